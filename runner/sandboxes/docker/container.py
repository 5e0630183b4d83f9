"""``DockerSandbox``: one session's container, seen from the inside out.

Holds the container and its exec channel: starts the channel, runs work on
it (in a worker thread, or on the event loop for the Python helper), and
falls back to one ``docker exec`` per command when it is lost; checks the
image, and deletes the container once.  The rest are mixins over the same
state: commands (``commands``), files (``files``), the agent's processes
(``processes``) and whose turn it is (``owners``).  The environment that
creates these (options, pool, snapshots) is in ``environment``; the
channel in ``channel``; the per-command path in ``exec``.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ...core.errors import SandboxUnavailableError
from ...core.events import emit
from ..base import Sandbox
from .channel import ChannelError, ExecChannel
from .commands import SandboxCommands
from .engine import DockerClient, remove_container, short_error
from .exec import FILE_PIECE_SECONDS, probe
from .files import FILE_CHUNK_BYTES, NO_CHANNEL, FileMoves, _NoChannel
from .owners import WORKSPACE, Owners, Principal
from .processes import SandboxProcesses

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

T = TypeVar("T")
logger = logging.getLogger("runner")


class DockerSandbox(SandboxCommands, Owners, FileMoves, SandboxProcesses, Sandbox):
    """One session's live container."""

    def __init__(
        self,
        *,
        client: DockerClient,
        container: Container,
        image: str,
        session_id: str,
        shell: str,
        default_exec_timeout_seconds: float,
        user: str = "sandbox",
    ) -> None:
        self.client = client
        self.container = container
        self.session_id = session_id
        #: The session id on the container's label (a pooled container keeps
        #: its ``pool-...`` label once a session adopts it: labels are fixed).
        self.label_session_id = session_id
        self.workspace = WORKSPACE
        self.image = image
        self.shell = shell
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self.user = user
        #: Whose commands run now (see ``owners``): the hooks' until the
        #: last ``on_create``.
        self.principal: Principal = "hooks"
        self._deleted = False
        self._delete_lock: anyio.Lock | None = None  # made in the loop that deletes
        self.channel: ExecChannel | None = None
        #: The snapshot image this container was started from, if any.
        self.snapshot_image: str | None = None
        self.output_cap_bytes = 8 << 20
        self.memory: str | None = None
        #: The container's pids limit (raised for a moment if the agent's
        #: processes took every pid when they are to be killed).
        self.pids_limit: int | None = None
        #: The OOM killer's count when the channel started; whether the next
        #: command reopens the channel (the helper died of out-of-memory).
        self._oom_kills: int | None = None
        self._reopen_channel = False
        self._helper = "auto"
        #: How long the sandbox user's processes may take over one piece of a
        #: file before the move is stopped and fails (both helpers and the
        #: per-command path; see ``FILE_PIECE_SECONDS``).
        self.file_piece_seconds = FILE_PIECE_SECONDS
        #: How the per-command path becomes the sandbox user ("setpriv",
        #: "nsenter", None: neither, so ``docker exec --user``); probed on
        #: first use.
        self._drop: str | None = None
        self._drop_probed = False
        #: ``HOME`` for the sandbox user's later commands (None: the
        #: container's, ``SANDBOX_HOME``); see ``fresh_home``.
        self.home: str | None = None

    @property
    def container_id(self) -> str:
        return self.container.id

    def record(self) -> dict[str, Any]:
        # A pooled container's label names the pool, not the session.
        return {
            "container_id": self.container_id,
            "label_session_id": self.label_session_id or self.session_id,
        }

    async def prepare(self, *, detect_shell: bool) -> None:
        """Find the shell and check the image has what ``execute`` relies on."""
        if self.channel is not None:  # the helper's first answer already told us
            found: dict[str, bool] | None = self.channel.found
        else:
            found = await self.client.call(probe, self.container_id, WORKSPACE)
        if found is None or not found.get("sleep"):
            raise SandboxUnavailableError(
                f"the container from {self.image!r} exited right after it started; the image "
                "needs 'sleep' and a shell, and must not stop on its own"
            )
        if not found.get("timeout"):
            raise SandboxUnavailableError(
                f"image {self.image!r} has no "
                "'timeout' command (GNU coreutils or busybox); the sandbox needs it to enforce "
                "command timeouts"
            )
        if detect_shell and found.get("bash"):
            self.shell = "bash"

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(WORKSPACE, path))

    async def open_channel(self, helper: str = "auto") -> None:
        """Start the in-container helper (``helper``: see ``HELPERS``) and say
        which one answers; if none can (or on any failure), stay on one
        ``docker exec`` per command, and say why."""
        channel = ExecChannel(
            None,
            self.container_id,
            max_body_bytes=2 * self.output_cap_bytes + FILE_CHUNK_BYTES + (1 << 20),
            helper=helper,
        )
        try:
            await self.client.call(_start_channel, channel)
            if not channel.can_drop and self._ids() is not None:
                raise ChannelError(
                    "the shell helper found neither setpriv nor nsenter in the image, so it "
                    "cannot run commands as the sandbox user"
                )
        except ChannelError as exc:
            channel.close()
            emit("exec_channel_unavailable", session_id=self.session_id, reason=str(exc))
            return
        self.channel = channel
        self._helper = helper
        if self._oom_kills is None:  # what a later loss of the channel is measured against
            self._oom_kills = await self._oom_kill_count()
        emit(
            "exec_channel_started",
            session_id=self.session_id,
            channel=channel.kind,
            reason=channel_reason(helper, channel.kind),
        )

    async def _on_channel(
        self,
        work: Callable[[ExecChannel], T],
        awaitable: Callable[[ExecChannel], Awaitable[T]] | None = None,
    ) -> T | _NoChannel:
        """``work(channel)`` in a worker thread, or ``awaitable(channel)`` on the
        event loop where it can (the Python helper, on asyncio): fewer thread
        hand-offs per command.  ``NO_CHANNEL`` if there is no channel.

        Raises ``ChannelError`` if the channel is lost during the work; later
        calls then go through ``docker exec`` one by one.
        """
        if self.channel is None and self._reopen_channel:
            # The out-of-memory killer took the helper: start it again, once.
            self._reopen_channel = False
            await self.open_channel(self._helper)
        channel = self.channel
        if channel is None:
            return NO_CHANNEL
        try:
            if awaitable is not None and channel.kind == "python" and _on_asyncio():
                return await awaitable(channel)
            return await anyio.to_thread.run_sync(
                partial(work, channel), limiter=_CHANNEL_WAITERS, abandon_on_cancel=True
            )
        except ChannelError as exc:
            self.channel = None
            channel.close()
            logger.warning(
                "exec channel of session %s lost (%s); using one docker exec per command",
                self.session_id,
                exc,
            )
            emit("exec_channel_lost", session_id=self.session_id, reason=str(exc))
            raise

    async def gone(self) -> str | None:
        from .durability import _find_container

        if self._deleted:
            return None  # deleted by its session: not gone from outside
        container = await self.client.call(_find_container, self.container_id)
        if container is None:
            return f"container {self.container_id[:12]} no longer exists"
        state = container.attrs.get("State", {})
        if not state.get("Running") or state.get("Paused"):
            return (
                f"container {self.container_id[:12]} is not running (status "
                f"{state.get('Status', 'unknown')}, exit code {state.get('ExitCode')})"
            )
        return None

    def adopt(self, *, session_id: str, client: DockerClient) -> None:
        """Hand a pooled sandbox to a session (and to that session's event loop)."""
        self.session_id = session_id
        self.client = client

    async def delete(self) -> None:
        if self._delete_lock is None:
            self._delete_lock = anyio.Lock()
        async with self._delete_lock:  # a second caller waits, then finds it gone
            if self._deleted:
                return
            if self.channel is not None:
                self.channel.close()
                self.channel = None
            await self.client.call(remove_container, self.container_id)
            self._deleted = True


#: Threads waiting on channel answers hold no Engine connection, so they get
#: their own, larger limiter: a long command must not starve the pool.
_CHANNEL_WAITERS = anyio.CapacityLimiter(256)


def _on_asyncio() -> bool:
    """Whether an asyncio event loop runs this task (``request_async`` needs
    one; anyio's other backend, trio, has none)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def channel_reason(asked: str, kind: str | None) -> str:
    """Why a sandbox's commands go through the helper they do."""
    if asked != "auto":
        return f"exec_channel={asked!r} was asked for"
    if kind == "python":
        return "the image has python3 (full or python3-minimal): the Python helper is the faster"
    return (
        "the image has no python3 that can run the Python helper: "
        "the POSIX shell helper serves commands and files"
    )


def _start_channel(client: docker.DockerClient, channel: ExecChannel) -> None:
    from docker.errors import DockerException

    channel.api = client.api
    try:
        channel.start()
    except DockerException as exc:
        raise ChannelError(f"cannot start the helper: {short_error(exc)}") from exc
