"""``LocalDockerSandbox``: one Docker container per session, through the docker SDK.

Hardened by default: no network (``Network.none()`` is ``network_mode="none"``),
``no-new-privileges``, every capability dropped but a few, a pids limit, a
memory cap, a CPU limit, and ``init=True`` so zombies are reaped.  Every
container carries labels (session id, expiry, owner process) so
:func:`collect_garbage` (``runner gc``) can remove what a crashed process left
behind.

Privilege separation: the container's main process (``sleep <ttl>``) and
the exec channel's helper run as root; hooks and agent commands run as the
sandbox user (uid and gid 1000, ``HOME=/home/sandbox``), who owns the
workspace and can neither signal, trace nor read those two.  Files move as
that user too (the helper opens them with its rights; without the helper,
``cat`` runs as it), so the agent's symlinks reach nothing it could not
reach itself.  ``user="root"`` turns this off.

Commands run over the exec channel (see ``_exec_channel``): its Python
helper where the image has a full python3, else its POSIX-shell helper
(busybox, Alpine, ``python3-minimal``, no Python).  Where neither can start,
through one ``docker exec`` each under ``timeout`` inside the container.
Either way the runner keeps each command's deadline on the host too.

Talking to the Engine (client, images, containers, garbage collection) is
in ``_docker_engine``; the per-command path in ``_docker_exec``; the
channel in ``_exec_channel`` and its helpers in ``_exec_helper.py`` and
``_exec_helper.sh``.
"""

from __future__ import annotations

import logging
import os
import posixpath
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .._errors import SandboxUnavailableError
from .._events import emit
from .._network import Network
from ._docker_engine import (
    DEFAULT_IMAGE,
    IMAGE_VARIABLE,
    LABEL,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SESSION,
    DockerClient,
    collect_garbage,
    create_and_start,
    ensure_image,
    process_start_time,
    remove_container,
    short_error,
)
from ._docker_exec import (
    CREATE_SCRIPT,
    FILE_DEADLINE_SECONDS,
    PROBE_SECONDS,
    READ_SCRIPT,
    WRITE_SCRIPT,
    drain,
    exec_capped,
    exec_file,
    file_error,
    probe,
)
from ._exec_channel import ANSWER_GRACE_SECONDS, HELPERS, ChannelError, ExecChannel
from ._pool import WarmPool
from ._snapshots import commit_snapshot, find_snapshot, image_id
from .base import (
    TIMEOUT_EXIT_CODE,
    FileTooLargeError,
    Sandbox,
    SandboxEnvironment,
    SandboxExecutionResult,
    SparseWriter,
    check_env,
    check_timeout,
    run_setup_script,
    write_sparse,
)

if TYPE_CHECKING:
    from pathlib import Path

    import docker
    from docker.models.containers import Container

    from .._hooks import SandboxHook

T = TypeVar("T")
logger = logging.getLogger("runner")

WORKSPACE = "/workspace"
#: Every capability is dropped, then only these are given back, each for a
#: reason.  They are root's only (the helper, the setup script, ``user:
#: root`` commands): the sandbox user's commands have none.  CHOWN - give the
#: workspace and HOME to the sandbox user, and let dpkg/pip/git as root own
#: files; DAC_OVERRIDE, FOWNER, FSETID - root may read and write any file of
#: the image and keep file modes; SETUID, SETGID - the helper starts each
#: command as the sandbox user (and apt drops to its own user); KILL - the
#: helper kills the process groups of timed-out commands, which belong to
#: the sandbox user.  Left out of Docker's default set: NET_RAW,
#: NET_BIND_SERVICE, MKNOD, AUDIT_WRITE, SETFCAP, SETPCAP, SYS_CHROOT.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")
#: Who runs hooks and agent commands: "sandbox" (uid/gid 1000, no
#: capabilities) or "root" (the weaker opt-out: the agent can then stop the
#: helper and the TTL process).
USERS = ("sandbox", "root")
SANDBOX_UID = SANDBOX_GID = 1000
SANDBOX_HOME = "/home/sandbox"
#: With ``read_only_root``: the writable places, each a tmpfs of this size
#: (counted against the memory limit); the workspace's is ``workspace_size``.
READ_ONLY_TMPFS_SIZES = {"/tmp": "256m", "home": "256m", WORKSPACE: "1g"}
#: The CPU limit when none is given: a runaway command cannot take every core.
DEFAULT_CPUS = 2.0
#: Where the shell helper keeps its files: a tmpfs only root can enter (it
#: uses /tmp in containers made without it).  Only what is stored counts
#: against the memory limit; each command holds at most 1.5 output caps per
#: stream there, each file piece 16 MiB.
CHANNEL_DIR = "/run/sandbox-runner"
CHANNEL_DIR_SIZE = "512m"
#: Files travel over the exec channel in pieces of this size.
FILE_CHUNK_BYTES = 16 << 20
#: How long one piece may take before the shell helper is told to stop it
#: (the agent swapped the file for a FIFO nobody writes, say).
FILE_PIECE_KILL_SECONDS = 60.0
#: Exit status of a command whose exec channel was lost mid-way (as ssh).
CHANNEL_LOST_EXIT_CODE = 255
#: Seconds between timeout's TERM and its KILL for a command that ignores TERM.
KILL_GRACE_SECONDS = 2
#: How long past a command's timeout the host waits before it stops waiting
#: (the in-container ``timeout`` gets KILL_GRACE_SECONDS of it to act first).
HOST_GRACE_SECONDS = 5.0
#: A pooled container unclaimed this long is replaced by a fresh one.
POOL_MAX_IDLE_SECONDS = 600.0


class LocalDockerSandbox(SandboxEnvironment):
    """Each session gets its own container, with the workspace at ``/workspace``.

    ``image`` defaults to ``$RUNNER_DOCKER_IMAGE``, else ``python:3.12-bookworm``.
    ``ttl_seconds`` (one day by default) is also the container's own lifetime:
    its main process is ``sleep <ttl>``, run as root, so even a container
    whose runner died stops by itself, and the agent cannot stop that clock.

    ``user="sandbox"`` (the default) runs hooks and agent commands as uid and
    gid 1000 with ``HOME=/home/sandbox``, created at start in any image;
    ``setup_script`` runs as root before it (it installs packages), and the
    workspace and HOME are then given to that user.  ``user="root"`` runs
    everything as root, as a plain ``docker run`` would: weaker (see
    SECURITY.md).  ``read_only_root=True`` makes the image's files read-only;
    ``/tmp``, HOME and the workspace are then tmpfs mounts
    (``READ_ONLY_TMPFS_SIZES``; ``workspace_size`` sets the workspace's), so
    the agent cannot fill the host's disk.
    """

    backend = "docker"
    can_snapshot = True

    def __init__(
        self,
        *,
        image: str | None = None,
        hooks: Sequence[SandboxHook] = (),
        default_exec_timeout_seconds: float = 30,
        ttl_seconds: float | None = 86400,
        network: Network | None = None,
        setup_script: str | None = None,
        setup_script_timeout_seconds: float = 300,
        memory: str | None = "2g",
        cpus: float | None = DEFAULT_CPUS,
        pids_limit: int = 512,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        docker_host: str | None = None,
        exec_channel: bool | str = True,
        output_cap_bytes: int = 8 << 20,
        max_file_bytes: int = 1 << 30,
        pool_size: int = 0,
        workspace_size: str | None = None,
        user: str = "sandbox",
        read_only_root: bool = False,
    ) -> None:
        super().__init__(
            hooks=hooks,
            default_exec_timeout_seconds=default_exec_timeout_seconds,
            ttl_seconds=ttl_seconds,
        )
        self.image = image or os.environ.get(IMAGE_VARIABLE) or DEFAULT_IMAGE
        self.network = network or Network.none()
        if not isinstance(self.network, Network):
            raise TypeError(f"network= takes a Network, got {network!r}")
        if self.network.mode == "allow":
            raise ValueError(
                f"LocalDockerSandbox cannot enforce {self.network}: Docker has no per-host "
                "egress filter; use Network.none() (the default) or Network.all()"
            )
        self.setup_script = setup_script
        self.setup_script_timeout_seconds = check_timeout(
            setup_script_timeout_seconds, name="setup_script_timeout_seconds"
        )
        self.memory = memory
        if cpus is not None and (isinstance(cpus, bool) or not cpus > 0):
            raise ValueError(f"cpus must be a positive number, got {cpus!r}")
        self.cpus = cpus
        if isinstance(pids_limit, bool) or not isinstance(pids_limit, int) or pids_limit < 16:
            raise ValueError(f"pids_limit must be an int of at least 16, got {pids_limit!r}")
        self.pids_limit = pids_limit
        self.shell = shell
        self.env = check_env(env)
        self.client = DockerClient(docker_host)
        if exec_channel not in (True, False, *HELPERS):
            raise ValueError(
                "exec_channel must be True, False, 'auto', 'python' or 'shell', "
                f"got {exec_channel!r}"
            )
        #: Which exec channel helper to start: "auto" (Python where it runs,
        #: else the shell), "python", "shell"; False: one docker exec per command.
        self.exec_channel: str | bool = "auto" if exec_channel is True else exec_channel
        self.output_cap_bytes = output_cap_bytes
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
            raise ValueError(f"max_file_bytes must be an int, got {max_file_bytes!r}")
        self.max_file_bytes = max_file_bytes
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0:
            raise ValueError(f"pool_size must be an int >= 0, got {pool_size!r}")
        self.pool_size = pool_size
        #: A size such as "256m" puts /workspace on a tmpfs of that size (it
        #: counts against the memory limit): a full disk stays inside the sandbox.
        self.workspace_size = workspace_size
        if user not in USERS:
            raise ValueError(f"user must be one of {', '.join(USERS)}, got {user!r}")
        self.user = user
        if not isinstance(read_only_root, bool):
            raise ValueError(f"read_only_root must be a bool, got {read_only_root!r}")
        self.read_only_root = read_only_root
        self._refuse_tmpfs_cache()
        self._pool: WarmPool[DockerSandbox] | None = None
        self._pool_lock = threading.Lock()
        self._swept = False

    def container_options(self, *, session_id: str, expires_at: float | None) -> dict[str, Any]:
        """The keyword arguments of ``containers.create`` for one session."""
        labels = {
            LABEL: "1",
            LABEL_SESSION: session_id,
            LABEL_OWNER_HOST: socket.gethostname(),
            LABEL_OWNER_PID: str(os.getpid()),
            LABEL_OWNER_START: process_start_time(os.getpid()) or "",
        }
        lifetime = "infinity"
        if expires_at is not None:
            labels[LABEL_EXPIRES] = str(int(expires_at))
            lifetime = str(max(1, int(expires_at - time.time()) + 1))
        home = SANDBOX_HOME if self.user == "sandbox" else "/root"
        options: dict[str, Any] = {
            "image": self.image,
            "command": ["sleep", lifetime],
            # Root whatever the image's USER says: the helper and the TTL
            # clock must be out of the sandbox user's reach.
            "user": "0:0",
            "working_dir": WORKSPACE,
            "labels": labels,
            "environment": {"HOME": home, **self.env},
            "init": True,
            "security_opt": ["no-new-privileges"],
            "cap_drop": ["ALL"],
            "cap_add": list(CAPABILITIES),
            "pids_limit": self.pids_limit,
            "detach": True,
        }
        if self.network.mode == "none":
            options["network_mode"] = "none"
        if self.memory:
            options["mem_limit"] = self.memory
        owner = (
            f"uid={SANDBOX_UID},gid={SANDBOX_GID},mode=0755"
            if self.user == "sandbox"
            else "mode=1777"
        )
        # The shell helper's own files (commands' output, file pieces): root's
        # only, so the agent can neither read them nor fill their space.
        tmpfs: dict[str, str] = {CHANNEL_DIR: f"size={CHANNEL_DIR_SIZE},mode=0700"}
        if self.read_only_root:
            options["read_only"] = True
            sizes = READ_ONLY_TMPFS_SIZES
            tmpfs["/tmp"] = f"size={sizes['/tmp']},mode=1777,exec"
            tmpfs[home] = f"size={sizes['home']},{owner},exec"
            tmpfs[WORKSPACE] = f"size={self.workspace_size or sizes[WORKSPACE]},{owner},exec"
        elif self.workspace_size:
            tmpfs[WORKSPACE] = f"size={self.workspace_size},{owner},exec"
        options["tmpfs"] = tmpfs
        if self.cpus:
            options["nano_cpus"] = int(self.cpus * 1e9)
        return options

    # --- warm pool -------------------------------------------------------------

    def start_pool(self) -> None:
        """Start filling the warm pool now (it also starts on the first session)."""
        if self.pool_size and self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = WarmPool(
                        self.pool_size,
                        self._make_pooled,
                        _discard_pooled,
                        max_idle_seconds=POOL_MAX_IDLE_SECONDS,
                        name=f"docker-pool-{self.image}",
                    )

    async def wait_pool_ready(self, timeout: float = 120) -> bool:
        """Start the pool if needed and wait until it is full."""
        self.start_pool()
        if self._pool is None:
            return True
        return await anyio.to_thread.run_sync(self._pool.wait_ready, timeout)

    def close_pool(self) -> None:
        """Remove the pool's idle containers (also done at interpreter exit)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _make_pooled(self) -> DockerSandbox:
        """Runs in the pool's thread: the same creation code, in a private event loop.

        A pooled container lives ``ttl_seconds`` after it is claimed at most,
        plus the time it may wait in the pool.
        """
        lifetime = (self.ttl_seconds or 86400) + POOL_MAX_IDLE_SECONDS
        return anyio.run(
            partial(
                self._create_new,
                session_id=f"pool-{uuid.uuid4().hex[:12]}",
                expires_at=time.time() + lifetime,
                client=self.client.fork(),
            )
        )

    async def create(self, *, session_id: str, expires_at: float | None) -> DockerSandbox:
        await self._sweep()
        if self.pool_size:
            self.start_pool()
            assert self._pool is not None
            pooled = self._pool.claim()
            if pooled is not None:
                pooled.adopt(session_id=session_id, client=self.client)
                return pooled
        return await self._create_new(session_id=session_id, expires_at=expires_at)

    # --- snapshots (see runner/_cache.py for which hooks are cached) -------------

    def _refuse_tmpfs_cache(self) -> None:
        """A commit does not hold tmpfs mounts: cached hooks would seed a
        workspace that the snapshot loses."""
        from .._cache import cached_prefix

        if (self.workspace_size or self.read_only_root) and cached_prefix(self.hooks):
            option = "workspace_size" if self.workspace_size else "read_only_root"
            raise ValueError(
                f"cached hooks (cache = True) cannot be used with {option}: the workspace is "
                "then a tmpfs, which a snapshot (docker commit) does not hold"
            )

    async def snapshot_key(self, *, hooks: Sequence[Any], inputs: Mapping[str, Any]) -> str:
        """The key of the snapshot these cached hooks, with these input values, would make."""
        from .._cache import snapshot_key

        await self.client.call(ensure_image, self.image)
        return snapshot_key(
            {
                "image_id": await self.client.call(image_id, self.image),
                "setup_script": self.setup_script,
                "user": self.user,
                "env": self.env,
                "shell": self.shell,
                "hooks": list(hooks),
                "inputs": dict(inputs),
            }
        )

    async def create_from_snapshot(
        self, key: str, *, session_id: str, expires_at: float | None
    ) -> DockerSandbox | None:
        """A sandbox started from the snapshot with ``key`` (setup script and
        cached hooks already in it), or None if there is none."""
        snapshot = await self.client.call(find_snapshot, key)
        if snapshot is None:
            return None
        await self._sweep()
        sandbox = await self._create_new(
            session_id=session_id, expires_at=expires_at, snapshot=snapshot
        )
        sandbox.snapshot_image = snapshot
        return sandbox

    async def save_snapshot(self, sandbox: Sandbox, key: str) -> str:
        """Commit ``sandbox``'s container as the snapshot for ``key``; returns the image id."""
        assert isinstance(sandbox, DockerSandbox)
        source = await self.client.call(image_id, self.image)
        with anyio.CancelScope(shield=True):  # an interrupted commit would leave a stray image
            return await self.client.call(commit_snapshot, sandbox.container_id, key, source)

    async def _sweep(self) -> None:
        if not self._swept:
            self._swept = True
            await self.client.call(collect_garbage)

    async def _create_new(
        self,
        *,
        session_id: str,
        expires_at: float | None,
        client: DockerClient | None = None,
        snapshot: str | None = None,
    ) -> DockerSandbox:
        """A new container; from ``snapshot`` (an image id), it skips the setup
        script and the workspace hand-over, which the snapshot already holds."""
        client = client or self.client
        if snapshot is None:
            await client.call(ensure_image, self.image)
        options = self.container_options(session_id=session_id, expires_at=expires_at)
        if snapshot is not None:
            options["image"] = snapshot
        # Shielded: a cancellation arriving while the engine creates the
        # container would otherwise lose the handle and leak the container.
        with anyio.CancelScope(shield=True):
            container = await client.call(create_and_start, options)
        sandbox = DockerSandbox(
            client=client,
            container=container,
            image=self.image,
            session_id=session_id,
            shell=self.shell or "sh",
            default_exec_timeout_seconds=self.default_exec_timeout_seconds,
            user=self.user,
        )
        sandbox.memory = self.memory
        sandbox.max_file_bytes = self.max_file_bytes
        sandbox.output_cap_bytes = self.output_cap_bytes
        try:
            if self.exec_channel:
                await sandbox.open_channel(self.exec_channel)
            await sandbox.prepare(detect_shell=self.shell is None)
            if snapshot is not None:
                return sandbox
            if self.setup_script:
                await run_setup_script(
                    sandbox,
                    self.setup_script,
                    timeout=self.setup_script_timeout_seconds or 300,
                    where=f"in image {self.image!r}",
                    execute=sandbox.execute_as_root,
                )
            if self.user == "sandbox":
                await sandbox.hand_over_workspace()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await sandbox.delete()
            raise
        return sandbox

    async def probe_exec_channel(self) -> tuple[str, str]:
        """Which exec channel this environment's sandboxes get, and why:
        ("python" | "shell" | "per-command" | "off", reason).

        For ``runner info``: a throwaway container of the image (the same
        options, labelled and with a 2-minute expiry like any other, so
        ``runner gc`` would find it) starts the helper, and is removed at
        once.  No setup script runs: it can only add programs.
        """
        if self.exec_channel is False:
            return "off", "exec_channel=False: one docker exec per command"
        options = self.container_options(
            session_id=f"probe-{uuid.uuid4().hex[:12]}", expires_at=time.time() + 120
        )
        with anyio.CancelScope(shield=True):
            container = await self.client.call(create_and_start, options)
        channel = ExecChannel(None, container.id, helper=self.exec_channel)
        try:
            await self.client.call(_start_channel, channel)
            if not channel.can_drop and self.user == "sandbox":
                return "per-command", (
                    "the shell helper found neither setpriv nor nsenter in the image, so it "
                    "cannot run commands as the sandbox user"
                )
            assert channel.kind is not None
            return channel.kind, channel_reason(self.exec_channel, channel.kind)
        except ChannelError as exc:
            return "per-command", str(exc)
        finally:
            channel.close()
            with anyio.CancelScope(shield=True):
                await self.client.call(remove_container, container.id)

    def __repr__(self) -> str:
        hooks = ", ".join(type(h).__name__ for h in self.hooks)
        return f"LocalDockerSandbox(image={self.image!r}, network={self.network}, hooks=[{hooks}])"


class DockerSandbox(Sandbox):
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
        self.workspace = WORKSPACE
        self.image = image
        self.shell = shell
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self.user = user
        self._deleted = False
        self._delete_lock: anyio.Lock | None = None  # made in the loop that deletes
        self.channel: ExecChannel | None = None
        #: The snapshot image this container was started from, if any.
        self.snapshot_image: str | None = None
        self.output_cap_bytes = 8 << 20
        self.memory: str | None = None

    @property
    def container_id(self) -> str:
        return self.container.id

    def _ids(self, *, root: bool = False) -> list[int] | None:
        """The uid and gid the helper switches to (None: stay root)."""
        if root or self.user == "root":
            return None
        return [SANDBOX_UID, SANDBOX_GID]

    def _docker_user(self, *, root: bool = False) -> str:
        """The same, as ``docker exec --user`` takes it."""
        ids = self._ids(root=root)
        return "0:0" if ids is None else f"{ids[0]}:{ids[1]}"

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

    async def hand_over_workspace(self) -> None:
        """Give the workspace and HOME to the sandbox user (as root, once, after
        the setup script, so what it put there is the user's too)."""
        dirs = f"{SANDBOX_HOME} {WORKSPACE}"
        result = await self.execute_as_root(
            f"mkdir -p -- {dirs} && chown -R {SANDBOX_UID}:{SANDBOX_GID} -- {dirs}",
            timeout_seconds=PROBE_SECONDS,
        )
        if result.exit_code != 0:
            raise SandboxUnavailableError(
                f"could not give {WORKSPACE} and {SANDBOX_HOME} to the sandbox user in image "
                f"{self.image!r}: {result.stderr.strip()[-500:]}"
            )

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
        emit(
            "exec_channel_started",
            session_id=self.session_id,
            channel=channel.kind,
            reason=channel_reason(helper, channel.kind),
        )

    async def _on_channel(self, work: Callable[[ExecChannel], T]) -> T | _NoChannel:
        """``work(channel)`` in a worker thread; ``NO_CHANNEL`` if there is none.

        Raises ``ChannelError`` if the channel is lost during the work; later
        calls then go through ``docker exec`` one by one.
        """
        channel = self.channel
        if channel is None:
            return NO_CHANNEL
        try:
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
        try:
            answer = await self._on_channel(
                lambda channel: channel.request(
                    request, timeout=timeout + ANSWER_GRACE_SECONDS, kill_after=timeout
                )
            )
        except ChannelError as exc:
            # Not re-run: it may have done part of its work.  255, as ssh
            # reports a lost connection.
            return SandboxExecutionResult(
                exit_code=CHANNEL_LOST_EXIT_CODE,
                stdout="",
                stderr=f"the sandbox's exec channel was lost during this command ({exc}); "
                "it may or may not have completed\n",
                duration_seconds=time.perf_counter() - started,
            )
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
                stdout=stdout.decode("utf-8", errors="replace"),
                stderr=self._explain_kill(header["exit_code"], header["timed_out"])
                + stderr.decode("utf-8", errors="replace"),
                timed_out=header["timed_out"],
                duration_seconds=time.perf_counter() - started,
                output_truncated=header["stdout_total"] != len(stdout)
                or header["stderr_total"] != len(stderr),
            )
        argv = [
            "timeout",
            "-k",
            str(KILL_GRACE_SECONDS),
            f"{timeout:g}",
            self.shell,
            "-c",
            command,
        ]
        exit_code, stdout, stderr, truncated = await self.client.call(
            exec_capped,
            self.container_id,
            argv,
            check_env(env),
            workdir,
            self.output_cap_bytes,
            timeout + HOST_GRACE_SECONDS,
            self._docker_user(root=root),
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
            else self._explain_kill(exit_code, timed_out)
        )
        return SandboxExecutionResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else exit_code,
            stdout=stdout.decode("utf-8", errors="replace"),
            stderr=note + stderr.decode("utf-8", errors="replace"),
            timed_out=timed_out,
            duration_seconds=duration,
            output_truncated=truncated,
        )

    def _explain_kill(self, exit_code: int, timed_out: bool) -> str:
        """A line for a command SIGKILLed by something other than its timeout:
        in a memory-capped container, that is the kernel's out-of-memory killer."""
        if exit_code != 128 + 9 or timed_out:
            return ""
        limit = f" (memory limit {self.memory})" if self.memory else ""
        return f"runner: the command was killed (SIGKILL), most likely out of memory{limit}\n"

    # --- files: as the sandbox user, over the channel or through `cat` ---------

    def _channel_read(
        self, channel: ExecChannel, path: str, sink: Callable[[bytes], object]
    ) -> None:
        """A file's bytes over the channel into ``sink`` as they arrive, piece
        by piece (blocking); refused over ``max_file_bytes`` from its size,
        after the first piece at most."""
        offset = 0

        def counted(data: bytes) -> None:
            nonlocal offset
            offset += len(data)
            sink(data)

        while True:
            asked_at = offset
            header, _ = channel.request(
                {
                    "op": "read",
                    "path": self._path(path),
                    "offset": asked_at,
                    "max_bytes": FILE_CHUNK_BYTES,
                    "user": self._ids(),
                },
                timeout=FILE_DEADLINE_SECONDS,
                kill_after=FILE_PIECE_KILL_SECONDS,
                sink=counted,
            )
            if "error" in header:
                raise file_error(header, path)
            if asked_at == 0 and header["size"] > self.max_file_bytes:
                raise FileTooLargeError(path, header["size"], self.max_file_bytes)
            if offset > self.max_file_bytes:  # it grew while being read
                raise FileTooLargeError(path, None, self.max_file_bytes)
            if offset - asked_at < FILE_CHUNK_BYTES:
                return

    def _exec_pieces(self, client: docker.DockerClient, path: str) -> Iterator[bytes]:
        """The same through ``cat`` as the sandbox user (blocking): no size is
        known in advance, so the read stops one byte past ``max_file_bytes``."""
        read = 0
        for piece in exec_file(
            client, self.container_id, READ_SCRIPT, self._path(path), self._docker_user()
        ):
            read += len(piece)
            if read > self.max_file_bytes:
                raise FileTooLargeError(path, None, self.max_file_bytes)
            yield piece

    async def read_file(self, path: str) -> bytes:
        """Over the channel, the file goes through a host temporary file, so
        at its peak only the returned bytes are in memory, not a second copy."""
        try:
            data = await self._on_channel(partial(self._channel_read_bytes, path=path))
        except ChannelError:
            data = NO_CHANNEL  # reading again is harmless
        if not isinstance(data, _NoChannel):
            return data
        return await self.client.call(lambda client: b"".join(self._exec_pieces(client, path)))

    def _channel_read_bytes(self, channel: ExecChannel, *, path: str) -> bytes:
        with tempfile.TemporaryFile(buffering=0) as spool:
            self._channel_read(channel, path, partial(write_all, spool))
            spool.seek(0)
            return spool.readall()

    def _channel_save(self, channel: ExecChannel, *, path: str, target: Path) -> int:
        with SparseWriter(target) as out:
            self._channel_read(channel, path, out.write)
        return out.size

    async def save_file(self, path: str, target: Path) -> int:
        """Streamed to ``target`` piece by piece, its runs of zeros left as
        holes; refused over ``max_file_bytes``; no ``target`` is left behind
        on failure."""
        try:
            try:
                size = await self._on_channel(partial(self._channel_save, path=path, target=target))
            except ChannelError:
                size = NO_CHANNEL  # copying again is harmless
            if not isinstance(size, _NoChannel):
                return size
            return await self.client.call(
                lambda client: write_sparse(target, self._exec_pieces(client, path))
            )
        except BaseException:
            target.unlink(missing_ok=True)
            raise

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        target = self._path(path)

        def write_pieces(channel: ExecChannel) -> None:
            view = memoryview(payload)
            for offset in range(0, max(1, len(payload)), FILE_CHUNK_BYTES):
                piece = bytes(view[offset : offset + FILE_CHUNK_BYTES])
                header, _ = channel.request(
                    {"op": "write", "path": target, "offset": offset, "user": self._ids()},
                    piece,
                    timeout=FILE_DEADLINE_SECONDS,
                    kill_after=FILE_PIECE_KILL_SECONDS,
                )
                if "error" in header:
                    raise file_error(header, path)

        try:
            done = await self._on_channel(write_pieces)
        except ChannelError:
            done = NO_CHANNEL  # writing the whole file again is harmless
        if isinstance(done, _NoChannel):
            user = self._docker_user()

            def create_then_write(client: docker.DockerClient) -> None:
                drain(exec_file(client, self.container_id, CREATE_SCRIPT, target, user))
                drain(exec_file(client, self.container_id, WRITE_SCRIPT, target, user, payload))

            await self.client.call(create_then_write)

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


class _NoChannel:
    """What ``_on_channel`` returns when the sandbox has no channel."""


NO_CHANNEL = _NoChannel()

# --- blocking helpers, run in worker threads --------------------------------


def _discard_pooled(sandbox: DockerSandbox) -> None:
    """Runs in the pool's thread (or at exit): remove an unclaimed container."""
    if sandbox.channel is not None:
        sandbox.channel.close()
    remove_container(sandbox.client._connect(), sandbox.container_id)


#: Threads waiting on channel answers hold no Engine connection, so they get
#: their own, larger limiter: a long command must not starve the pool.
_CHANNEL_WAITERS = anyio.CapacityLimiter(256)


def write_all(out: Any, data: bytes) -> None:
    """``data`` to a raw (unbuffered) file, whose writes may be partial."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]


def channel_reason(asked: str, kind: str | None) -> str:
    """Why a sandbox's commands go through the helper they do."""
    if asked != "auto":
        return f"exec_channel={asked!r} was asked for"
    if kind == "python":
        return "the image has python3 with its standard library: the Python helper is the faster"
    return (
        "the image has no python3 with its standard library (none, or python3-minimal): "
        "the POSIX shell helper serves commands and files"
    )


def _start_channel(client: docker.DockerClient, channel: ExecChannel) -> None:
    from docker.errors import DockerException

    channel.api = client.api
    try:
        channel.start()
    except DockerException as exc:
        raise ChannelError(f"cannot start the helper: {short_error(exc)}") from exc
