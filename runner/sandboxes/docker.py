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

Commands run over the exec channel (see ``_exec_channel``); without it,
through one ``docker exec`` each under ``timeout`` inside the container.
Either way the runner keeps each command's deadline on the host too.

The docker SDK is blocking; every call runs in a worker thread, through a
``CapacityLimiter`` sized to the client's connection pool so concurrent
sessions queue for a connection instead of failing.  ``import docker``
happens on first use, never at import time.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import socket
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
from ._exec_channel import ANSWER_GRACE_SECONDS, ChannelError, ExecChannel
from ._pool import WarmPool
from .base import (
    TIMEOUT_EXIT_CODE,
    FileTooLargeError,
    Sandbox,
    SandboxEnvironment,
    SandboxExecutionResult,
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

DEFAULT_IMAGE = "python:3.12-bookworm"
IMAGE_VARIABLE = "RUNNER_DOCKER_IMAGE"
WORKSPACE = "/workspace"
LABEL = "sandbox-runner"
LABEL_SESSION = "sandbox-runner.session-id"
LABEL_EXPIRES = "sandbox-runner.expires-at"
LABEL_OWNER_HOST = "sandbox-runner.owner-host"
LABEL_OWNER_PID = "sandbox-runner.owner-pid"
LABEL_OWNER_START = "sandbox-runner.owner-start"
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
#: Files travel over the exec channel in pieces of this size.
FILE_CHUNK_BYTES = 16 << 20
#: How long one piece of a file (one whole file on the per-command path) may take.
FILE_DEADLINE_SECONDS = 300.0
#: Exit status of a command whose exec channel was lost mid-way (as ssh).
CHANNEL_LOST_EXIT_CODE = 255
#: Seconds between timeout's TERM and its KILL for a command that ignores TERM.
KILL_GRACE_SECONDS = 2
#: How long past a command's timeout the host waits before it stops waiting
#: (the in-container ``timeout`` gets KILL_GRACE_SECONDS of it to act first).
HOST_GRACE_SECONDS = 5.0
#: The image probe at start: a few ``command -v`` calls.
PROBE_SECONDS = 30.0
_POOL_SIZE = 10  # docker-py's default connection pool per client
#: A pooled container unclaimed this long is replaced by a fresh one.
POOL_MAX_IDLE_SECONDS = 600.0

START_DOCKER_HINT = (
    "start the engine (for example 'sudo dockerd --bridge=none --iptables=false &' or "
    "'sudo systemctl start docker'), or point DOCKER_HOST at a running one"
)


class DockerClient:
    """A docker SDK client plus the limiter that keeps calls within its pool.

    Created lazily, once per environment, so building an agent costs nothing
    and a machine without Docker fails only when a session starts.
    """

    def __init__(self, base_url: str | None = None) -> None:
        self.base_url = base_url
        self._client: docker.DockerClient | None = None
        self._limiter: anyio.CapacityLimiter | None = None

    def fork(self) -> DockerClient:
        """A wrapper sharing this one's SDK client (and its connection pool) with a
        limiter of its own, for use from another event loop (the warm pool's)."""
        twin = DockerClient(self.base_url)
        twin._client = self._connect()
        return twin

    def _connect(self) -> docker.DockerClient:
        if self._client is None:
            import docker
            from docker.errors import DockerException

            try:
                if self.base_url:
                    client = docker.DockerClient(
                        base_url=self.base_url, timeout=None, max_pool_size=_POOL_SIZE
                    )
                else:
                    client = docker.from_env(timeout=None, max_pool_size=_POOL_SIZE)
                client.ping()
            except DockerException as exc:
                where = self.base_url or os.environ.get("DOCKER_HOST") or "the default socket"
                raise SandboxUnavailableError(
                    f"the Docker engine is not reachable at {where} ({exc}); {START_DOCKER_HINT}"
                ) from exc
            self._client = client
        return self._client

    async def call(
        self, function: Callable[..., T], *args: Any, abandon_on_cancel: bool = False
    ) -> T:
        """Run ``function(client, *args)`` in a worker thread within the pool's limit."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(_POOL_SIZE)
        if self._client is None:
            await anyio.to_thread.run_sync(self._connect, limiter=self._limiter)
        client = self._client
        assert client is not None
        return await anyio.to_thread.run_sync(
            partial(_engine_call, function, client, *args),
            limiter=self._limiter,
            abandon_on_cancel=abandon_on_cancel,
        )


def _engine_call(function: Callable[..., T], client: Any, *args: Any) -> T:
    """Run one blocking SDK call; an Engine that stopped answering (restarted,
    gone, or the container gone with it) becomes a typed error, not a raw
    HTTP or socket exception."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException

    try:
        return function(client, *args)
    except (DockerException, RequestException) as exc:
        raise SandboxUnavailableError(
            f"the Docker engine failed: {_short(exc)}; {START_DOCKER_HINT}"
        ) from exc


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
        exec_channel: bool = True,
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
        self.exec_channel = exec_channel
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
        tmpfs: dict[str, str] = {}
        if self.read_only_root:
            options["read_only"] = True
            sizes = READ_ONLY_TMPFS_SIZES
            tmpfs["/tmp"] = f"size={sizes['/tmp']},mode=1777,exec"
            tmpfs[home] = f"size={sizes['home']},{owner},exec"
            tmpfs[WORKSPACE] = f"size={self.workspace_size or sizes[WORKSPACE]},{owner},exec"
        elif self.workspace_size:
            tmpfs[WORKSPACE] = f"size={self.workspace_size},{owner},exec"
        if tmpfs:
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
        if not self._swept:
            self._swept = True
            await self.client.call(collect_garbage)
        if self.pool_size:
            self.start_pool()
            assert self._pool is not None
            pooled = self._pool.claim()
            if pooled is not None:
                pooled.adopt(session_id=session_id, client=self.client)
                return pooled
        return await self._create_new(session_id=session_id, expires_at=expires_at)

    async def _create_new(
        self, *, session_id: str, expires_at: float | None, client: DockerClient | None = None
    ) -> DockerSandbox:
        client = client or self.client
        await client.call(_ensure_image, self.image)
        options = self.container_options(session_id=session_id, expires_at=expires_at)
        # Shielded: a cancellation arriving while the engine creates the
        # container would otherwise lose the handle and leak the container.
        with anyio.CancelScope(shield=True):
            container = await client.call(_create_and_start, options)
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
                await sandbox.open_channel()
            await sandbox.prepare(detect_shell=self.shell is None)
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
            found = await self.client.call(_probe, self.container_id)
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

    async def open_channel(self) -> None:
        """Start the in-container helper; without python3 (or on any failure)
        stay on one ``docker exec`` per command."""
        channel = ExecChannel(
            None,
            self.container_id,
            max_body_bytes=2 * self.output_cap_bytes + FILE_CHUNK_BYTES + (1 << 20),
        )
        try:
            await self.client.call(_start_channel, channel)
        except ChannelError as exc:
            channel.close()
            emit("exec_channel_unavailable", session_id=self.session_id, reason=str(exc))
            return
        self.channel = channel

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
                lambda channel: channel.request(request, timeout=timeout + ANSWER_GRACE_SECONDS)
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
                output_truncated=header["stdout_total"] + header["stderr_total"] > len(body),
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
            _exec_capped,
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

    def _channel_pieces(self, channel: ExecChannel, path: str) -> Iterator[bytes]:
        """A file's bytes over the channel, piece by piece (blocking); refused
        over ``max_file_bytes`` from its size before any of it is read."""
        offset = 0
        while True:
            header, body = channel.request(
                {
                    "op": "read",
                    "path": self._path(path),
                    "offset": offset,
                    "max_bytes": FILE_CHUNK_BYTES,
                    "user": self._ids(),
                },
                timeout=FILE_DEADLINE_SECONDS,
            )
            if "error" in header:
                raise _file_error(header, path)
            if offset == 0 and header["size"] > self.max_file_bytes:
                raise FileTooLargeError(path, header["size"], self.max_file_bytes)
            offset += len(body)
            if offset > self.max_file_bytes:  # it grew while being read
                raise FileTooLargeError(path, None, self.max_file_bytes)
            if body:
                yield body
            if len(body) < FILE_CHUNK_BYTES:
                return

    def _exec_pieces(self, client: docker.DockerClient, path: str) -> Iterator[bytes]:
        """The same through ``cat`` as the sandbox user (blocking): no size is
        known in advance, so the read stops one byte past ``max_file_bytes``."""
        read = 0
        for piece in _exec_file(
            client, self.container_id, READ_SCRIPT, self._path(path), self._docker_user()
        ):
            read += len(piece)
            if read > self.max_file_bytes:
                raise FileTooLargeError(path, None, self.max_file_bytes)
            yield piece

    async def read_file(self, path: str) -> bytes:
        try:
            data = await self._on_channel(
                lambda channel: b"".join(self._channel_pieces(channel, path))
            )
        except ChannelError:
            data = NO_CHANNEL  # reading again is harmless
        if not isinstance(data, _NoChannel):
            return data
        return await self.client.call(lambda client: b"".join(self._exec_pieces(client, path)))

    async def save_file(self, path: str, target: Path) -> int:
        """Streamed to ``target`` piece by piece, its runs of zeros left as
        holes; refused over ``max_file_bytes``; no ``target`` is left behind
        on failure."""
        try:
            try:
                size = await self._on_channel(
                    lambda channel: write_sparse(target, self._channel_pieces(channel, path))
                )
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
                )
                if "error" in header:
                    raise _file_error(header, path)

        try:
            done = await self._on_channel(write_pieces)
        except ChannelError:
            done = NO_CHANNEL  # writing the whole file again is harmless
        if isinstance(done, _NoChannel):
            user = self._docker_user()

            def create_then_write(client: docker.DockerClient) -> None:
                _drain(_exec_file(client, self.container_id, CREATE_SCRIPT, target, user))
                _drain(_exec_file(client, self.container_id, WRITE_SCRIPT, target, user, payload))

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
            await self.client.call(_remove_container, self.container_id)
            self._deleted = True


class _NoChannel:
    """What ``_on_channel`` returns when the sandbox has no channel."""


NO_CHANNEL = _NoChannel()

#: The per-command path's file moves, as the sandbox user: ``sh -c SCRIPT sh
#: PATH``.  Exit statuses name the failure (see ``_exec_file``).
READ_SCRIPT = """\
if [ -d "$1" ]; then exit 121; fi
if [ -e "$1" ] && [ ! -f "$1" ]; then exit 122; fi
exec cat -- "$1"
"""
#: Writes come in two execs: the first creates (or empties) the file, so a
#: refusal comes back at once; only then does the second take the bytes.
CREATE_SCRIPT = """\
if [ -d "$1" ]; then exit 121; fi
if [ -e "$1" ] && [ ! -f "$1" ]; then exit 122; fi
mkdir -p -- "${1%/*}/" && : > "$1"
"""
WRITE_SCRIPT = 'exec cat > "$1"'

_SCRIPT_ERRORS = {
    121: (IsADirectoryError, errno.EISDIR, "Is a directory"),
    122: (OSError, errno.EINVAL, "not a regular file"),
}
#: Otherwise the error ``cat``, ``mkdir`` or the shell printed (GNU and busybox
#: say the same words; the sandbox has no translations of them).
_MESSAGE_ERRORS = (
    ("No such file or directory", FileNotFoundError, errno.ENOENT),
    ("Permission denied", PermissionError, errno.EACCES),
    ("Not a directory", NotADirectoryError, errno.ENOTDIR),
)


# --- blocking helpers, run in worker threads --------------------------------


def _discard_pooled(sandbox: DockerSandbox) -> None:
    """Runs in the pool's thread (or at exit): remove an unclaimed container."""
    if sandbox.channel is not None:
        sandbox.channel.close()
    _remove_container(sandbox.client._connect(), sandbox.container_id)


#: Threads waiting on channel answers hold no Engine connection, so they get
#: their own, larger limiter: a long command must not starve the pool.
_CHANNEL_WAITERS = anyio.CapacityLimiter(256)


def _start_channel(client: docker.DockerClient, channel: ExecChannel) -> None:
    from docker.errors import DockerException

    channel.api = client.api
    try:
        channel.start()
    except DockerException as exc:
        raise ChannelError(f"cannot start the helper: {_short(exc)}") from exc


def _file_error(header: dict[str, Any], path: str) -> OSError:
    kinds = {
        "FileNotFoundError": FileNotFoundError,
        "IsADirectoryError": IsADirectoryError,
        "PermissionError": PermissionError,
        "NotADirectoryError": NotADirectoryError,
    }
    kind = kinds.get(header["error"], OSError)
    return kind(f"{path}: {header['message']}")


def _ensure_image(client: docker.DockerClient, image: str) -> None:
    from docker.errors import DockerException, ImageNotFound

    try:
        client.images.get(image)
        return
    except ImageNotFound:
        pass
    try:
        client.images.pull(image)
    except DockerException as exc:
        raise SandboxUnavailableError(
            f"Docker image {image!r} is not on this machine and could not be pulled "
            f"({_short(exc)}); build or load it, or set {IMAGE_VARIABLE} (or image=) "
            "to an image listed by 'docker images'"
        ) from exc


def _create_and_start(client: docker.DockerClient, options: dict[str, Any]) -> Container:
    from docker.errors import DockerException

    options = dict(options)
    options.pop("detach", None)
    try:
        container = client.containers.create(**options)
    except DockerException as exc:
        raise SandboxUnavailableError(
            f"could not create a container from {options['image']!r}: {_short(exc)}"
        ) from exc
    try:
        container.start()
    except BaseException as exc:
        container.remove(force=True)
        if isinstance(exc, DockerException):
            raise SandboxUnavailableError(
                f"could not start a container from {options['image']!r}: {_short(exc)}"
            ) from exc
        raise
    return container


def _probe(client: docker.DockerClient, container_id: str) -> dict[str, bool] | None:
    """Which of bash, timeout and sleep the image has; None if the container
    is not running."""
    from docker.errors import APIError

    script = "for c in bash timeout sleep; do command -v $c >/dev/null && echo $c; done"
    try:
        _code, stdout, _err, _cut = _exec_capped(
            client, container_id, ["sh", "-c", script], {}, WORKSPACE, 1 << 16, PROBE_SECONDS
        )
    except APIError as exc:
        if exc.status_code == 409:  # "container ... is not running"
            return None
        raise
    present = stdout.decode("utf-8", errors="replace").split()
    return {name: name in present for name in ("bash", "timeout", "sleep")}


def _exec_capped(
    client: docker.DockerClient,
    container_id: str,
    argv: list[str],
    env: dict[str, str],
    workdir: str,
    cap: int,
    deadline_seconds: float,
    user: str = "0:0",
) -> tuple[int | None, bytes, bytes, bool]:
    """One exec, its output streamed and capped (head and tail) as the helper does.

    The deadline is kept here, on the host: the ``timeout`` inside the
    container is the agent's to stop or replace.  When it passes, the output
    stream is closed and the exit code is None (the command may still run;
    it goes with the container).
    """
    from ._exec_helper import Capped

    api = client.api
    exec_id = api.exec_create(
        container_id,
        argv,
        stdout=True,
        stderr=True,
        environment=env or None,
        workdir=workdir,
        user=user,
    )["Id"]
    out, err = Capped(cap), Capped(cap)
    stream = api.exec_start(exec_id, stream=True, demux=True)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        stream.close()  # the blocked read below returns

    timer = threading.Timer(deadline_seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        for stdout, stderr in stream:
            if stdout:
                out.add(stdout)
            if stderr:
                err.add(stderr)
    finally:
        timer.cancel()
        stream.close()
    truncated = out.total > len(out.head) + len(out.tail) or err.total > len(err.head) + len(
        err.tail
    )
    if expired.is_set():
        return None, out.value(), err.value(), truncated
    exit_code = api.exec_inspect(exec_id)["ExitCode"]
    code = exit_code if exit_code is not None else -1
    return code, out.value(), err.value(), truncated


def _exec_file(
    client: docker.DockerClient,
    container_id: str,
    script: str,
    path: str,
    user: str,
    data: bytes | None = None,
) -> Iterator[bytes]:
    """Run ``script`` (``READ_SCRIPT``/``WRITE_SCRIPT``) on ``path`` as ``user``,
    feeding it ``data`` on stdin; yield its stdout as it arrives, then raise
    the ``OSError`` its exit status names.

    Used where there is no helper: ``cat`` running as the sandbox user moves
    the bytes, so the Engine's archive API (which reads and writes as root,
    following the agent's links) is never used.  The whole move has a host
    deadline of ``FILE_DEADLINE_SECONDS``.
    """
    api = client.api
    exec_id = api.exec_create(
        container_id,
        ["sh", "-c", script, "sh", path],
        stdin=data is not None,
        stdout=True,
        stderr=True,
        user=user,
        workdir="/",
    )["Id"]
    attached = api.exec_start(exec_id, socket=True)
    raw = getattr(attached, "_sock", attached)
    deadline = time.monotonic() + FILE_DEADLINE_SECONDS
    stderr = bytearray()
    try:
        if data is not None:
            view = memoryview(data)
            try:
                for start in range(0, len(data), 1 << 20):
                    raw.settimeout(max(0.01, deadline - time.monotonic()))
                    raw.sendall(view[start : start + (1 << 20)])
                raw.shutdown(socket.SHUT_WR)  # cat sees the end of its input
            except (BrokenPipeError, ConnectionResetError):
                # The script ended early (it refused the file): its status says why.
                with contextlib.suppress(OSError):
                    raw.shutdown(socket.SHUT_WR)
        buffer = _SocketReader(raw, deadline)
        while True:
            head = buffer.read_exact(8, eof_ok=True)
            if head is None:
                break
            payload = buffer.read_exact(int.from_bytes(head[4:8], "big"))
            if head[0] == 1:
                yield payload
            elif len(stderr) < 4096:
                stderr += payload[: 4096 - len(stderr)]
    except TimeoutError:
        raise OSError(
            errno.ETIMEDOUT,
            f"the sandbox did not finish moving the file in {FILE_DEADLINE_SECONDS:g} s",
            path,
        ) from None
    finally:
        attached.close()
    code = api.exec_inspect(exec_id)["ExitCode"]
    if code == 0:
        return
    if code in _SCRIPT_ERRORS:
        kind, number, text = _SCRIPT_ERRORS[code]
        raise kind(number, text, path)
    message = stderr.decode("utf-8", errors="replace").strip()
    for text, kind, number in _MESSAGE_ERRORS:
        if text in message:
            raise kind(number, text, path)
    raise OSError(errno.EIO, message[-500:] or f"exit status {code}", path)


class _SocketReader:
    """Exact reads from a socket, each within an overall deadline."""

    def __init__(self, raw: socket.socket, deadline: float) -> None:
        self._raw = raw
        self._deadline = deadline
        self._buffer = bytearray()

    def read_exact(self, size: int, *, eof_ok: bool = False) -> bytes | None:
        while len(self._buffer) < size:
            self._raw.settimeout(max(0.01, self._deadline - time.monotonic()))
            chunk = self._raw.recv(max(1 << 16, size - len(self._buffer)))
            if not chunk:
                if eof_ok and not self._buffer:
                    return None
                raise OSError(errno.EIO, "the sandbox's output ended early")
            self._buffer += chunk
        piece = bytes(self._buffer[:size])
        del self._buffer[:size]
        return piece


def _drain(pieces: Iterator[bytes]) -> None:
    for _ in pieces:
        pass


def _remove_container(client: docker.DockerClient, container_id: str) -> None:
    from docker.errors import APIError, NotFound

    try:
        client.api.remove_container(container_id, force=True, v=True)
    except NotFound:
        pass
    except APIError as exc:
        if exc.status_code != 409:  # 409: another removal of it is already under way
            raise


def _short(exc: Exception) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return str(text).strip().splitlines()[0][:300] if text else type(exc).__name__


# --- crash leftovers ---------------------------------------------------------


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (to tell a live owner from a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def owner_is_gone(labels: Mapping[str, str]) -> bool:
    """True if the container's runner process on this host no longer exists."""
    if labels.get(LABEL_OWNER_HOST) != socket.gethostname():
        return False
    try:
        pid = int(labels.get(LABEL_OWNER_PID, ""))
    except ValueError:
        return False
    started = process_start_time(pid)
    if started is None:
        return True
    recorded = labels.get(LABEL_OWNER_START)
    return bool(recorded) and recorded != started


def is_expired(labels: Mapping[str, str], *, at: float | None = None) -> bool:
    try:
        expires_at = float(labels[LABEL_EXPIRES])
    except (KeyError, ValueError):
        return False
    return expires_at <= (time.time() if at is None else at)


def collect_garbage(client: docker.DockerClient) -> list[str]:
    """Remove runner containers that expired or whose owner process is gone.

    Returns the ids of the containers removed.  Containers of live runner
    processes are left alone, whoever owns them.
    """
    from docker.errors import NotFound

    removed = []
    for summary in client.api.containers(all=True, filters={"label": LABEL}):
        labels = summary.get("Labels") or {}
        if is_expired(labels) or owner_is_gone(labels):
            try:
                client.api.remove_container(summary["Id"], force=True, v=True)
            except NotFound:
                continue
            removed.append(summary["Id"])
    return removed
