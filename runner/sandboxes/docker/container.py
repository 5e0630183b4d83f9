"""``DockerSandbox``: one session's container, seen from the inside out.

Runs commands (over the exec channel, else one ``docker exec`` each under
``timeout``) and moves files with the sandbox user's rights.  The
environment that creates these (options, pool, snapshots) is in ``docker``;
the channel in ``channel``; the per-command path in ``exec``.
"""

from __future__ import annotations

import logging
import posixpath
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from ...core.errors import SandboxUnavailableError
from ...core.events import decode_output, emit
from ...core.output import output_lines
from ..base import (
    TIMEOUT_EXIT_CODE,
    Sandbox,
    SandboxExecutionResult,
    check_env,
    check_timeout,
)
from .channel import ANSWER_GRACE_SECONDS, ChannelError, ExecChannel
from .engine import DockerClient, remove_container, short_error
from .exec import (
    FILE_PIECE_SECONDS,
    PROBE_SECONDS,
    drop_argv,
    exec_capped,
    probe,
    probe_drop,
)
from .files import FILE_CHUNK_BYTES, NO_CHANNEL, FileMoves, _NoChannel
from .live_output import ChannelOutput
from .owners import WORKSPACE, Owners, Principal
from .processes import SandboxProcesses

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

T = TypeVar("T")
logger = logging.getLogger("runner")

#: Files travel over the exec channel in pieces of this size.
#: Exit status of a command whose exec channel was lost mid-way (as ssh).
CHANNEL_LOST_EXIT_CODE = 255
#: Exit status of a command killed by the kernel's out-of-memory killer (SIGKILL).
OOM_EXIT_CODE = 128 + 9
#: Prints the container's ``oom_kill N`` (cgroup v2, else v1).
OOM_KILLS_COMMAND = (
    "cat /sys/fs/cgroup/memory.events 2>/dev/null"
    " || cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; true"
)
#: Starts the rest of its arguments with oom_score_adj 1000, as the helpers
#: start the sandbox user's commands (the per-command path).
RAISE_OOM_SCORE = 'echo 1000 2>/dev/null >/proc/self/oom_score_adj; exec "$@"'
#: Seconds between timeout's TERM and its KILL for a command that ignores TERM.
KILL_GRACE_SECONDS = 2
#: How long past a command's timeout the host waits before it stops waiting
#: (the in-container ``timeout`` gets KILL_GRACE_SECONDS of it to act first).
HOST_GRACE_SECONDS = 5.0


#: Lists (``list``) or kills (``kill``) a user's processes but those kept, as
#: root; see ``DockerSandbox.end_processes``.
class DockerSandbox(Owners, FileMoves, SandboxProcesses, Sandbox):
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

    async def _as_user(self, argv: list[str], *, root: bool = False) -> tuple[list[str], str]:
        """``argv`` and the ``docker exec --user`` that run it as the sandbox
        user on the per-command path: started as root and dropped inside
        where the image has setpriv or nsenter (see ``drop_argv``: the agent
        can then stop nothing of the exec itself), else ``--user``, which
        leaves runc's init process to the agent (SECURITY.md says so)."""
        ids = self._ids(root=root)
        if ids is None:
            return argv, "0:0"
        if not self._drop_probed:
            self._drop = await self.client.call(probe_drop, self.container_id)
            self._drop_probed = True
        if self._drop is None:
            return argv, f"{ids[0]}:{ids[1]}"
        return [*drop_argv(self._drop, ids[0], ids[1]), *argv], "0:0"

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

    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        return await self._execute(command, timeout_seconds, env, cwd, root=False)

    async def execute_as_root(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        """``execute`` as root, whatever ``user`` is: for the setup script,
        which the author wrote (it installs packages), never for the agent."""
        return await self._execute(command, timeout_seconds, env, cwd, root=True)

    async def _execute(
        self,
        command: str,
        timeout_seconds: float | None,
        env: Mapping[str, str] | None,
        cwd: str | None,
        *,
        root: bool,
    ) -> SandboxExecutionResult:
        timeout = check_timeout(timeout_seconds, name="timeout_seconds")
        timeout = timeout or self.default_exec_timeout_seconds
        workdir = self._path(cwd) if cwd else WORKSPACE
        if self.home is not None and not root:  # the hooks' own (a step's env: still wins)
            env = {"HOME": self.home, **(env or {})}
        started = time.perf_counter()
        request = {
            "op": "exec",
            "argv": [self.shell, "-c", command],
            "cwd": workdir,
            "env": check_env(env),
            "timeout": timeout,
            "cap": self.output_cap_bytes,
            "user": self._ids(root=root),
        }
        # The output as it comes, for the live progress, when someone listens.
        lines = output_lines()
        live = ChannelOutput(lines) if lines is not None else None
        if live is not None:
            request["stream"] = True
        try:
            answer = await self._on_channel(
                lambda channel: channel.request(
                    request,
                    timeout=timeout + ANSWER_GRACE_SECONDS,
                    kill_after=timeout,
                    on_output=live,
                ),
                lambda channel: channel.request_async(
                    request, timeout=timeout + ANSWER_GRACE_SECONDS, on_output=live
                ),
            )
        except ChannelError as exc:
            # Not re-run: it may have done part of its work.
            if await self._lost_to_oom():
                # The helper went to the out-of-memory killer: said as the
                # kernel's SIGKILL of a command is (137), and the next
                # command gets a new helper.
                self._reopen_channel = True
                limit = f" (memory limit {self.memory})" if self.memory else ""
                return SandboxExecutionResult(
                    exit_code=OOM_EXIT_CODE,
                    stdout="",
                    stderr=f"runner: out of memory{limit}: the kernel's out-of-memory killer "
                    "ended the sandbox's exec helper during this command; the command may or "
                    "may not have completed, and may still run\n",
                    duration_seconds=time.perf_counter() - started,
                )
            # 255, as ssh reports a lost connection.
            return SandboxExecutionResult(
                exit_code=CHANNEL_LOST_EXIT_CODE,
                stdout="",
                stderr=f"the sandbox's exec channel was lost during this command ({exc}); "
                "it may or may not have completed\n",
                duration_seconds=time.perf_counter() - started,
            )
        finally:
            if live is not None:
                live.close()  # its last line, if it had no newline
        if not isinstance(answer, _NoChannel):
            header, body = answer
            if "error" in header:  # it could not even start (no pids left, ...), as a shell
                return SandboxExecutionResult(  # that cannot fork: 126, not an exception
                    exit_code=126,
                    stdout="",
                    stderr=f"runner: could not start the command: {header['message']}\n",
                    duration_seconds=time.perf_counter() - started,
                )
            stdout, stderr = body[: header["stdout_len"]], body[header["stdout_len"] :]
            return SandboxExecutionResult(
                exit_code=header["exit_code"],
                stdout=decode_output(stdout),  # scrubbed of non-UTF-8 secrets first
                stderr=self._explain_kill(header["exit_code"], header["timed_out"])
                + decode_output(stderr),
                timed_out=header["timed_out"],
                duration_seconds=time.perf_counter() - started,
                output_truncated=header["stdout_total"] != len(stdout)
                or header["stderr_total"] != len(stderr),
            )
        # timeout runs as root where the image can drop (the agent cannot stop
        # it); the user's command is the OOM killer's first choice, as over the
        # channel (it raises its own score after the drop; root's keep 0).
        argv = [self.shell, "-c", command]
        if self._ids(root=root) is not None:
            argv = [self.shell, "-c", RAISE_OOM_SCORE, "sh", *argv]
        argv, user = await self._as_user(argv, root=root)
        argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), f"{timeout:g}", *argv]
        exit_code, stdout, stderr, truncated = await self.client.call(
            exec_capped,
            self.container_id,
            argv,
            check_env(env),
            workdir,
            self.output_cap_bytes,
            timeout + HOST_GRACE_SECONDS,
            user,
            abandon_on_cancel=True,
        )
        duration = time.perf_counter() - started
        abandoned = exit_code is None
        # 124 from GNU timeout; 143/137 from busybox's, which sends TERM (then
        # KILL) and exits with the command's own status.
        timed_out = abandoned or (
            exit_code in (TIMEOUT_EXIT_CODE, 128 + 15, 128 + 9) and duration >= timeout
        )
        note = (
            f"runner: the command outlived its {timeout:g} s timeout by "
            f"{HOST_GRACE_SECONDS:g} s (something in the sandbox stopped it from being "
            "killed there); the runner stopped waiting for it\n"
            if abandoned
            else self._explain_kill(cast(int, exit_code), timed_out)
        )
        return SandboxExecutionResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else cast(int, exit_code),
            stdout=decode_output(stdout),  # scrubbed of non-UTF-8 secrets first
            stderr=note + decode_output(stderr),
            timed_out=timed_out,
            duration_seconds=duration,
            output_truncated=truncated,
        )

    async def _oom_kill_count(self, *, over_channel: bool = True) -> int | None:
        """How many processes the out-of-memory killer has killed in the
        container (cgroup v2's memory.events, v1's memory.oom_control), read
        as root over the channel or through ``docker exec``; None if unknown."""
        try:
            if over_channel:
                result = await self.execute_as_root(
                    OOM_KILLS_COMMAND, timeout_seconds=PROBE_SECONDS
                )
                output = result.stdout
            else:
                _, out, _, _ = await self.client.call(
                    exec_capped,
                    self.container_id,
                    ["sh", "-c", OOM_KILLS_COMMAND],
                    {},
                    "/",
                    1 << 16,
                    PROBE_SECONDS,
                    "0:0",
                )
                output = out.decode("utf-8", "replace")
        except Exception:  # no answer (the engine, a full container): unknown
            return None
        found = re.search(r"^oom_kill ([0-9]+)$", output, re.MULTILINE)
        return int(found.group(1)) if found else None

    async def _lost_to_oom(self) -> bool:
        """Whether the out-of-memory killer killed something since the last
        look (the channel's start): then it is what ended the channel."""
        count = await self._oom_kill_count(over_channel=False)
        if count is None:
            return False
        before, self._oom_kills = self._oom_kills or 0, count
        return count > before

    def _explain_kill(self, exit_code: int, timed_out: bool) -> str:
        """A line for a command SIGKILLed by something other than its timeout:
        in a memory-capped container, that is the kernel's out-of-memory killer."""
        if exit_code != 128 + 9 or timed_out:
            return ""
        limit = f" (memory limit {self.memory})" if self.memory else ""
        return f"runner: the command was killed (SIGKILL), most likely out of memory{limit}\n"

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
