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

This module is the environment (container options, pool, snapshots,
creation); the sandbox it creates (commands, files) is ``_docker_sandbox``.
Talking to the Engine (client, images, containers, garbage collection) is
in ``_docker_engine``; the per-command path in ``_docker_exec``; the
channel in ``_exec_channel`` and its helpers in ``_exec_helper.py`` and
``_exec_helper.sh``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

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
)
from ._docker_sandbox import (
    HOST_GRACE_SECONDS,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    WORKSPACE,
    DockerSandbox,
    _start_channel,
    channel_reason,
)
from ._exec_channel import HELPERS, ChannelError, ExecChannel
from ._pool import WarmPool
from ._snapshots import commit_snapshot, find_snapshot, image_id
from .base import (
    Sandbox,
    SandboxEnvironment,
    check_env,
    check_timeout,
    run_setup_script,
)

if TYPE_CHECKING:
    from .._hooks import SandboxHook


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


def _discard_pooled(sandbox: DockerSandbox) -> None:
    """Runs in the pool's thread (or at exit): remove an unclaimed container."""
    if sandbox.channel is not None:
        sandbox.channel.close()
    remove_container(sandbox.client._connect(), sandbox.container_id)


__all__ = [
    "HOST_GRACE_SECONDS",
    "DockerSandbox",
    "LocalDockerSandbox",
    "collect_garbage",
]
