"""``LocalDockerSandbox``: one Docker container per session, through the docker SDK.

Hardened by default: no network (``Network.none()`` is ``network_mode="none"``),
``no-new-privileges``, a few capabilities dropped, a pids limit, a memory
cap, and ``init=True`` so zombies are reaped.  Every container carries labels
(session id, expiry, owner process) so :func:`collect_garbage` (``runner gc``)
can remove what a crashed process left behind.

Commands run through ``docker exec`` under GNU ``timeout`` inside the
container: the Engine API has no way to kill an exec, so the kill has to come
from inside.  ``timeout`` makes itself a process-group leader and signals the
whole group, so a command's children die with it.

The docker SDK is blocking; every call runs in a worker thread, through a
``CapacityLimiter`` sized to the client's connection pool so concurrent
sessions queue for a connection instead of failing.  ``import docker``
happens on first use, never at import time.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import posixpath
import socket
import tarfile
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
#: Capabilities a sandbox never needs; the rest of Docker's default set stays
#: so package managers and git work as root inside the container.
#: Every capability is dropped, then only these are given back, each for a
#: reason (commands run as root in the container, as package installs need):
#: CHOWN, DAC_OVERRIDE, FOWNER, FSETID - root may own, read and write any file
#: of the image and keep file modes (dpkg, pip, git); SETUID, SETGID - switch
#: to another user (apt's sandbox user, su in a setup script); KILL - signal
#: processes of other users (timeouts and pool cleanup of their process
#: groups).  Left out of Docker's default set: NET_RAW, NET_BIND_SERVICE,
#: MKNOD, AUDIT_WRITE, SETFCAP, SETPCAP, SYS_CHROOT.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")
#: The CPU limit when none is given: a runaway command cannot take every core.
DEFAULT_CPUS = 2.0
#: Files up to this size travel over the exec channel; bigger ones as tar
#: archives through the Engine API, which moves them faster.
CHANNEL_FILE_LIMIT = 4 << 20
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
    its main process is ``sleep <ttl>``, so even a container whose runner died
    stops by itself.
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
        if workspace_size and not exec_channel:
            raise ValueError(
                "workspace_size needs the exec channel (Docker's file API cannot see a tmpfs)"
            )
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
        options: dict[str, Any] = {
            "image": self.image,
            "command": ["sleep", lifetime],
            "working_dir": WORKSPACE,
            "labels": labels,
            "environment": self.env,
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
        if self.workspace_size:
            options["tmpfs"] = {WORKSPACE: f"size={self.workspace_size},mode=1777,exec"}
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
        )
        sandbox.memory = self.memory
        sandbox.max_file_bytes = self.max_file_bytes
        if self.workspace_size:
            sandbox._channel_file_limit = None
        try:
            if self.exec_channel:
                await sandbox.open_channel(output_cap_bytes=self.output_cap_bytes)
            if self.workspace_size and sandbox.channel is None:
                raise SandboxUnavailableError(
                    f"workspace_size needs python3 in the image ({self.image!r} has none): "
                    "files are moved by the in-container helper when /workspace is a tmpfs"
                )
            await sandbox.prepare(detect_shell=self.shell is None)
            if self.setup_script:
                await run_setup_script(
                    sandbox,
                    self.setup_script,
                    timeout=self.setup_script_timeout_seconds or 300,
                    where=f"in image {self.image!r}",
                )
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
    ) -> None:
        self.client = client
        self.container = container
        self.session_id = session_id
        self.workspace = WORKSPACE
        self.image = image
        self.shell = shell
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self._deleted = False
        self._delete_lock: anyio.Lock | None = None  # made in the loop that deletes
        self.channel: ExecChannel | None = None
        self.output_cap_bytes = 8 << 20
        self.memory: str | None = None
        #: Bigger files go through the Engine's archive API.  None: never, as
        #: with a tmpfs workspace, which that API does not see (it writes to
        #: the image layer underneath the mount).
        self._channel_file_limit: int | None = CHANNEL_FILE_LIMIT

    @property
    def container_id(self) -> str:
        return self.container.id

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

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(WORKSPACE, path))

    async def open_channel(self, *, output_cap_bytes: int) -> None:
        """Start the in-container helper; without python3 (or on any failure)
        stay on one ``docker exec`` per command."""
        self.output_cap_bytes = output_cap_bytes
        files = self._channel_file_limit if self._channel_file_limit is not None else 1 << 30
        channel = ExecChannel(
            None, self.container_id, max_body_bytes=2 * output_cap_bytes + files + (1 << 20)
        )
        try:
            await self.client.call(_start_channel, channel)
        except ChannelError as exc:
            channel.close()
            emit("exec_channel_unavailable", session_id=self.session_id, reason=str(exc))
            return
        self.channel = channel

    async def _over_channel(
        self, header: dict[str, Any], body: bytes = b"", *, timeout: float
    ) -> tuple[dict[str, Any], bytes] | None:
        """One request over the channel; None if there is no channel.

        Raises ``ChannelError`` if the channel is lost during this request;
        later requests then go through ``docker exec`` one by one.
        """
        channel = self.channel
        if channel is None:
            return None
        try:
            return await anyio.to_thread.run_sync(
                partial(channel.request, header, body, timeout=timeout),
                limiter=_CHANNEL_WAITERS,
                abandon_on_cancel=True,
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
        timeout = check_timeout(timeout_seconds, name="timeout_seconds")
        timeout = timeout or self.default_exec_timeout_seconds
        workdir = self._path(cwd) if cwd else WORKSPACE
        started = time.perf_counter()
        try:
            answer = await self._over_channel(
                {
                    "op": "exec",
                    "argv": [self.shell, "-c", command],
                    "cwd": workdir,
                    "env": check_env(env),
                    "timeout": timeout,
                    "cap": self.output_cap_bytes,
                },
                timeout=timeout + ANSWER_GRACE_SECONDS,
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
        if answer is not None:
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

    def _archives_allowed(self, path: str) -> None:
        """The archive API cannot see a tmpfs workspace: without the helper,
        say so rather than write where no command will find the file."""
        if self._channel_file_limit is None:
            raise SandboxUnavailableError(
                f"cannot move {path}: the sandbox's exec channel is gone, and the Engine's "
                "file API cannot reach a workspace_size (tmpfs) workspace"
            )

    def _explain_kill(self, exit_code: int, timed_out: bool) -> str:
        """A line for a command SIGKILLed by something other than its timeout:
        in a memory-capped container, that is the kernel's out-of-memory killer."""
        if exit_code != 128 + 9 or timed_out:
            return ""
        limit = f" (memory limit {self.memory})" if self.memory else ""
        return f"runner: the command was killed (SIGKILL), most likely out of memory{limit}\n"

    async def _read_over_channel(self, path: str) -> bytes | None:
        """A file over the channel, or None when it must go by the archive API
        (no channel, a lost one, or a file over the channel's limit).

        With a tmpfs workspace there is no archive path: the channel reads up
        to ``max_file_bytes`` itself.
        """
        limit = self._channel_file_limit
        try:
            answer = await self._over_channel(
                {
                    "op": "read",
                    "path": self._path(path),
                    "max_bytes": self.max_file_bytes if limit is None else limit,
                },
                timeout=300,
            )
        except ChannelError:
            return None  # reading again is harmless
        if answer is None:
            return None
        header, body = answer
        if "error" not in header:
            return body
        if header["error"] == "TooLarge" and limit is None:
            raise FileTooLargeError(path, None, self.max_file_bytes)
        if header["error"] == "TooLarge":
            return None  # big files go as tar streams, which the Engine moves faster
        raise _file_error(header, path)

    async def read_file(self, path: str) -> bytes:
        data = await self._read_over_channel(path)
        if data is not None:
            return data
        self._archives_allowed(path)
        return await self.client.call(
            _read_file, self.container_id, self._path(path), self.max_file_bytes
        )

    async def save_file(self, path: str, target: Path) -> int:
        """Small files over the channel; bigger ones streamed from the archive
        API to disk, refused over ``max_file_bytes`` before any byte is read."""
        data = await self._read_over_channel(path)
        if data is not None:
            return await anyio.to_thread.run_sync(write_sparse, target, [data])
        self._archives_allowed(path)
        return await self.client.call(
            _save_file, self.container_id, self._path(path), target, self.max_file_bytes
        )

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        target = self._path(path)
        answer = None
        limit = self._channel_file_limit
        if limit is None or len(payload) <= limit:  # big files go as tar streams
            try:
                answer = await self._over_channel(
                    {"op": "write", "path": target}, payload, timeout=300
                )
            except ChannelError:
                answer = None  # writing the whole file again is harmless
        if answer is None:
            self._archives_allowed(path)
            await self.client.call(_write_file, self.container_id, target, payload)
            return
        if "error" in answer[0]:
            raise _file_error(answer[0], path)

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
        container_id, argv, stdout=True, stderr=True, environment=env or None, workdir=workdir
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


@contextlib.contextmanager
def _archive_file(
    client: docker.DockerClient, container_id: str, path: str, max_bytes: int
) -> Iterator[tuple[int, Iterator[bytes]]]:
    """A regular file through the Engine's archive API: its size, and its bytes
    as an iterator of pieces read as the tar stream arrives.

    Symbolic links are followed (at most 16); the size comes from the tar
    header, so a file over ``max_bytes`` is refused before any of it is read.
    The response is closed on the way out, read or not: an abandoned archive
    stream of a huge file would keep the engine busy sending it.
    """
    from docker.errors import NotFound

    api = client.api
    for _ in range(16):
        response = api._get(
            api._url("/containers/{0}/archive", container_id),
            params={"path": path},
            stream=True,
            headers={"Accept-Encoding": "identity"},
        )
        try:
            try:
                api._raise_for_status(response)
            except NotFound:
                raise FileNotFoundError(2, "No such file in the sandbox", path) from None
            stream = _ChunkReader(response.iter_content(1 << 20, False))
            header = stream.read_exact(tarfile.BLOCKSIZE)
            member = tarfile.TarInfo.frombuf(header, tarfile.ENCODING, "surrogateescape")
            pieces: Iterator[bytes] | None = None
            if member.type not in (
                tarfile.REGTYPE,
                tarfile.AREGTYPE,
                tarfile.DIRTYPE,
                tarfile.SYMTYPE,
            ):
                # Extended headers (long names, pax sizes): tarfile reads them, as a stream.
                tar = tarfile.open(fileobj=_StreamFile(header, stream), mode="r|")  # noqa: SIM115
                member = tar.next()
                if member is None:
                    raise FileNotFoundError(2, "No such file in the sandbox", path)
                if member.isfile():
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    pieces = iter(partial(extracted.read, 1 << 20), b"")
            if member.isdir():
                raise IsADirectoryError(21, "Is a directory", path)
            if member.issym():
                path = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
                continue
            if not member.isfile():
                raise OSError(f"{path}: not a regular file")
            if member.size > max_bytes:
                raise FileTooLargeError(path, member.size, max_bytes)
            yield member.size, pieces if pieces is not None else stream.pieces(member.size)
            return
        finally:
            response.close()
    raise OSError(f"{path}: too many levels of symbolic links")


def _read_file(client: docker.DockerClient, container_id: str, path: str, max_bytes: int) -> bytes:
    """A file through the Engine's archive API, at most ``max_bytes`` of it."""
    with _archive_file(client, container_id, path, max_bytes) as (size, pieces):
        data = b"".join(pieces)
    if len(data) != size:
        raise OSError(f"{path}: the archive ended early")
    return data


def _save_file(
    client: docker.DockerClient, container_id: str, path: str, target: Path, max_bytes: int
) -> int:
    """A file through the Engine's archive API straight into ``target`` on the
    host, never whole in memory, its runs of zeros left as holes."""
    with _archive_file(client, container_id, path, max_bytes) as (size, pieces):
        written = write_sparse(target, pieces)
    if written != size:
        raise OSError(f"{path}: the archive ended early")
    return written


class _ChunkReader:
    """Reads exact byte counts out of an iterator of chunks, copying once."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = iter(chunks)
        self._pending = b""

    def read_exact(self, size: int) -> bytes:
        parts = [self._pending[:size]]
        have = len(parts[0])
        self._pending = self._pending[size:]
        while have < size:
            chunk = next(self._chunks, b"")
            if not chunk:
                raise OSError("the archive ended early")
            take = chunk[: size - have]
            parts.append(take)
            have += len(take)
            self._pending = chunk[len(take) :]
        return b"".join(parts)

    def pieces(self, size: int) -> Iterator[bytes]:
        """The next ``size`` bytes, as the chunks they arrive in."""
        left = size
        while left > 0:
            chunk = self._pending or next(self._chunks, b"")
            if not chunk:
                raise OSError("the archive ended early")
            piece, self._pending = chunk[:left], chunk[left:]
            left -= len(piece)
            yield piece

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            rest = self._pending + b"".join(self._chunks)
            self._pending = b""
            return rest
        if not self._pending:
            self._pending = next(self._chunks, b"")
        piece, self._pending = self._pending[:size], self._pending[size:]
        return piece


class _StreamFile(io.RawIOBase):
    """``header`` then the rest of a ``_ChunkReader``, as a file for tarfile's stream mode."""

    def __init__(self, header: bytes, rest: _ChunkReader) -> None:
        self._header = header
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        piece = self._header[: len(buffer)] if self._header else self._rest.read(len(buffer))
        self._header = self._header[len(piece) :]
        buffer[: len(piece)] = piece
        return len(piece)


def _write_file(client: docker.DockerClient, container_id: str, path: str, data: bytes) -> None:
    """A file through the Engine's archive API, streamed: the data is not copied."""
    from docker.errors import APIError

    info = tarfile.TarInfo(name=path.lstrip("/"))
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    header = info.tobuf(format=tarfile.PAX_FORMAT)
    padding = b"\0" * (-len(data) % tarfile.BLOCKSIZE)

    def archive() -> Any:
        yield header
        view = memoryview(data)
        for start in range(0, len(data), 1 << 20):
            yield bytes(view[start : start + (1 << 20)])
        yield padding + b"\0" * (2 * tarfile.BLOCKSIZE)  # end-of-archive marker

    try:
        client.api.put_archive(container_id, "/", archive())
    except APIError as exc:
        raise OSError(f"cannot write {path} in the sandbox: {_short(exc)}") from exc


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
