"""``LocalDockerSandbox``: one Docker container per session, through the docker SDK.

Hardened by default: no network (``Network.none()`` is ``network_mode="none"``),
``no-new-privileges``, every capability dropped but a few, a pids limit, a
memory cap, a CPU limit, and ``init=True`` so zombies are reaped.  Every
container carries labels (session id, expiry, owner process) so
:func:`collect_garbage` (``runner gc``) can remove what a crashed process left
behind.

Durable containers (``runner serve``): an environment whose
``durable_owner`` is set (the id of the server's database) labels its
containers with it too (``LABEL_DURABLE``); ``runner gc`` then leaves them
alone when their process dies, until they expire, and
:meth:`LocalDockerSandbox.reattach` gives a restarted server the sandbox of
such a container again.  :func:`remove_durable_containers` removes the
durable containers of one owner that no session records any more.

Privilege separation: the container's main process (``sleep <ttl>``) and
the exec channel's helper run as root; hooks run as uid and gid 1001 and
the agent's tools as uid and gid 1000 (``HOME=/home/sandbox``), the
workspace handed between them by root (``owners``); neither can signal,
trace nor read root's processes, nor the agent the hooks'.  Files move as
the user whose turn it is (the helper opens them with its rights; without
the helper, ``cat`` runs as it), so the agent's symlinks reach nothing it
could not reach itself.  ``user="root"`` turns this off.

Commands run over the exec channel (see ``channel``): its Python
helper where the image has a full python3, else its POSIX-shell helper
(busybox, Alpine, ``python3-minimal``, no Python).  Where neither can start,
through one ``docker exec`` each under ``timeout`` inside the container.
Either way the runner keeps each command's deadline on the host too.

This module is the environment (its settings, creation); the options a
container gets are ``hardening``; its snapshots are ``seeding``; its warm
pools, plain and seeded, are ``pools``; its durable containers
``durability``; the sandbox it creates (commands, files) is ``container``.
Talking to the Engine (client, images, containers, garbage collection) is
in ``engine``; the per-command path in ``exec``; the
channel in ``channel`` and its helpers in ``helpers/exec_helper.py`` and
``helpers/exec_helper.sh``.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ...core.network import Network
from ..base import (
    OptionError,
    SandboxEnvironment,
    check_env,
    check_timeout,
    run_setup_script,
)
from .channel import HELPERS, ChannelError, ExecChannel
from .commands import HOST_GRACE_SECONDS
from .container import DockerSandbox, _start_channel, channel_reason
from .durability import DurableContainers, remove_durable_containers
from .engine import (
    DEFAULT_IMAGE,
    EXPIRY_GRACE_SECONDS,
    IMAGE_VARIABLE,
    LABEL_DURABLE,
    LABEL_EXPIRES,
    LABEL_OWNER_PID,
    LABEL_SESSION,
    DockerClient,
    collect_garbage,
    create_and_start,
    ensure_image,
    remove_container,
)
from .hardening import (
    CHANNEL_DIR,
    DEFAULT_CPUS,
    USERS,
    ContainerOptions,
)
from .pool import WarmPool
from .pools import WarmPools
from .seccomp import security_options
from .seeding import SnapshotSeeding

if TYPE_CHECKING:
    from docker.models.containers import Container

    from ...core.hooks import SandboxHook


#: A pooled container unclaimed this long is replaced by a fresh one.
POOL_MAX_IDLE_SECONDS = 600.0


class LocalDockerSandbox(
    ContainerOptions, DurableContainers, WarmPools, SnapshotSeeding, SandboxEnvironment
):
    """Each session gets its own container, with the workspace at ``/workspace``.

    ``image`` defaults to ``$RUNNER_DOCKER_IMAGE``, else ``python:3.12-bookworm``.
    ``ttl_seconds`` (one day by default) is also the container's own lifetime:
    its main process is ``sleep <ttl>``, run as root, so even a container
    whose runner died stops by itself, and the agent cannot stop that clock.

    ``user="sandbox"`` (the default) runs hooks as uid and gid 1001 and the
    agent's tools as uid and gid 1000, with ``HOME=/home/sandbox``, created
    at start in any image; ``setup_script`` runs as root before it (it
    installs packages), and the workspace and HOME are then given to the
    hooks, and after the last ``on_create`` to the agent (``owners``).  ``user="root"`` runs
    everything as root, as a plain ``docker run`` would: weaker (see
    SECURITY.md).  ``read_only_root=True`` makes the image's files read-only;
    ``/tmp``, HOME and the workspace are then tmpfs mounts
    (``READ_ONLY_TMPFS_SIZES``; ``workspace_size`` sets the workspace's), so
    the agent cannot fill the host's disk.  ``runtime`` picks the engine's
    OCI runtime (``"runsc"``: gVisor, where the engine has it registered;
    ``runner info`` lists them); ``seccomp="strict"`` applies the runner's
    stricter seccomp profile (``seccomp.py``) instead of Docker's default.
    """

    backend = "docker"
    can_snapshot = True
    options = frozenset(
        {
            "image",
            "network",
            "setup_script",
            "setup_script_timeout_seconds",
            "memory",
            "cpus",
            "pids_limit",
            "pool",
            "seeded_pool",
            "seeded_pool_keys",
            "pool_idle_seconds",
            "workspace_size",
            "user",
            "read_only_root",
            "runtime",
            "seccomp",
        }
    )

    @classmethod
    def from_options(cls, spec: Mapping[str, Any], common: Mapping[str, Any]) -> LocalDockerSandbox:
        """The YAML keys, with this constructor's defaults for those not given."""
        network = spec.get("network", "none")
        if isinstance(network, dict):
            raise OptionError(
                "network", "docker cannot enforce network: {allow: [...]}; use none or all"
            )
        keys = {
            "image": "image",
            "setup_script": "setup_script",
            "setup_script_timeout_seconds": "setup_script_timeout_seconds",
            "memory": "memory",
            "cpus": "cpus",
            "pids_limit": "pids_limit",
            "pool": "pool_size",
            "seeded_pool": "seeded_pool_size",
            "seeded_pool_keys": "seeded_pool_keys",
            "pool_idle_seconds": "pool_idle_seconds",
            "workspace_size": "workspace_size",
            "user": "user",
            "read_only_root": "read_only_root",
            "runtime": "runtime",
            "seccomp": "seccomp",
        }
        options = {name: spec[key] for key, name in keys.items() if key in spec}
        arguments = {k: v for k, v in common.items() if k != "ttl_seconds" or "ttl_seconds" in spec}
        try:
            return cls(
                **arguments,
                network=Network.all() if network == "all" else Network.none(),
                **options,
            )
        except ValueError as exc:
            raise OptionError(None, str(exc)) from exc

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
        seeded_pool_size: int = 0,
        seeded_pool_keys: int = 4,
        pool_idle_seconds: float = POOL_MAX_IDLE_SECONDS,
        workspace_size: str | None = None,
        user: str = "sandbox",
        read_only_root: bool = False,
        runtime: str | None = None,
        seccomp: str = "default",
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
        self.exec_channel: str | Literal[False] = "auto" if exec_channel is True else exec_channel
        self.output_cap_bytes = output_cap_bytes
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
            raise ValueError(f"max_file_bytes must be an int, got {max_file_bytes!r}")
        self.max_file_bytes = max_file_bytes
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0:
            raise ValueError(f"pool_size must be an int >= 0, got {pool_size!r}")
        self.pool_size = pool_size
        if (
            isinstance(seeded_pool_size, bool)
            or not isinstance(seeded_pool_size, int)
            or seeded_pool_size < 0
        ):
            raise ValueError(f"seeded_pool_size must be an int >= 0, got {seeded_pool_size!r}")
        #: Containers kept started from each recently used snapshot (see
        #: ``create_from_snapshot``), for at most ``seeded_pool_keys`` keys.
        self.seeded_pool_size = seeded_pool_size
        if (
            isinstance(seeded_pool_keys, bool)
            or not isinstance(seeded_pool_keys, int)
            or seeded_pool_keys < 1
        ):
            raise ValueError(f"seeded_pool_keys must be an int >= 1, got {seeded_pool_keys!r}")
        self.seeded_pool_keys = seeded_pool_keys
        #: How long a pooled container may wait unclaimed: then it is replaced
        #: (the plain pool) or its seeded pool closes (nobody wants that key).
        self.pool_idle_seconds = check_timeout(pool_idle_seconds, name="pool_idle_seconds")
        #: A size such as "256m" puts /workspace on a tmpfs of that size (it
        #: counts against the memory limit): a full disk stays inside the sandbox.
        self.workspace_size = workspace_size
        if user not in USERS:
            raise ValueError(f"user must be one of {', '.join(USERS)}, got {user!r}")
        self.user = user
        if not isinstance(read_only_root, bool):
            raise ValueError(f"read_only_root must be a bool, got {read_only_root!r}")
        self.read_only_root = read_only_root
        if runtime is not None and (not isinstance(runtime, str) or not runtime.strip()):
            raise ValueError(f"runtime must be a runtime name the engine knows, got {runtime!r}")
        self.runtime = runtime
        self.security_options = security_options(seccomp)  # ValueError for an unknown name
        self.seccomp = seccomp
        self._check_workspace_fits_in_memory()
        self._pool: WarmPool[DockerSandbox] | None = None
        self._pool_lock = threading.Lock()
        #: Snapshot key -> (its image id, the pool of containers started from
        #: it), least recently used first.
        self._seeded: OrderedDict[str, tuple[str, WarmPool[DockerSandbox]]] = OrderedDict()
        #: Claim pooled containers from this environment's pool (``share_pool``).
        self._pool_source: LocalDockerSandbox | None = None
        self._swept = False
        #: Set by ``runner serve`` to the id of its database: containers are then
        #: labelled ``LABEL_DURABLE`` with it, outlive their process (``runner
        #: gc`` leaves them until they expire) and can be re-attached (``attach``).
        self.durable_owner: str | None = None

    async def create(self, *, session_id: str, expires_at: float | None) -> DockerSandbox:
        await self._sweep()
        if self.pool_size:
            owner = self._pool_source or self
            owner.start_pool()
            assert owner._pool is not None
            pooled = owner._pool.claim()
            if pooled is not None:
                pooled.adopt(session_id=session_id, client=self.client)
                return pooled
        return await self._create_new(session_id=session_id, expires_at=expires_at)

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
        sandbox = self._sandbox_of(container, session_id=session_id, client=client)
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

    def _sandbox_of(
        self, container: Container, *, session_id: str, client: DockerClient
    ) -> DockerSandbox:
        """The sandbox object for ``container``, with this environment's settings."""
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
        sandbox.pids_limit = self.pids_limit
        sandbox.max_file_bytes = self.max_file_bytes
        sandbox.output_cap_bytes = self.output_cap_bytes
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


# The labels and CHANNEL_DIR are re-exported: tests, bench and callers of
# ``runner gc`` read them where the environment is.
__all__ = [
    "CHANNEL_DIR",
    "EXPIRY_GRACE_SECONDS",
    "HOST_GRACE_SECONDS",
    "LABEL_DURABLE",
    "LABEL_EXPIRES",
    "LABEL_OWNER_PID",
    "LABEL_SESSION",
    "DockerSandbox",
    "LocalDockerSandbox",
    "collect_garbage",
    "remove_durable_containers",
]
