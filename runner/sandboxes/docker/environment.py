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
the exec channel's helper run as root; hooks and agent commands run as the
sandbox user (uid and gid 1000, ``HOME=/home/sandbox``), who owns the
workspace and can neither signal, trace nor read those two.  Files move as
that user too (the helper opens them with its rights; without the helper,
``cat`` runs as it), so the agent's symlinks reach nothing it could not
reach itself.  ``user="root"`` turns this off.

Commands run over the exec channel (see ``channel``): its Python
helper where the image has a full python3, else its POSIX-shell helper
(busybox, Alpine, ``python3-minimal``, no Python).  Where neither can start,
through one ``docker exec`` each under ``timeout`` inside the container.
Either way the runner keeps each command's deadline on the host too.

This module is the environment (container options, snapshots, creation);
its warm pools, plain and seeded, are ``pools``; the sandbox it creates
(commands, files) is ``container``.
Talking to the Engine (client, images, containers, garbage collection) is
in ``engine``; the per-command path in ``exec``; the
channel in ``channel`` and its helpers in ``helpers/exec_helper.py`` and
``helpers/exec_helper.sh``.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ...core.errors import SandboxUnavailableError
from ...core.network import Network
from ..base import (
    OptionError,
    Sandbox,
    SandboxEnvironment,
    check_env,
    check_timeout,
    run_setup_script,
)
from .channel import HELPERS, ChannelError, ExecChannel
from .container import (
    HOST_GRACE_SECONDS,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    WORKSPACE,
    DockerSandbox,
    _start_channel,
    channel_reason,
)
from .durability import DurableContainers, remove_durable_containers
from .engine import (
    DEFAULT_IMAGE,
    EXPIRY_GRACE_SECONDS,
    IMAGE_VARIABLE,
    LABEL,
    LABEL_DURABLE,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SCOPE,
    LABEL_SESSION,
    DockerClient,
    collect_garbage,
    create_and_start,
    current_scope,
    ensure_image,
    process_start_time,
    remove_container,
)
from .pool import WarmPool
from .pools import WarmPools
from .seccomp import security_options
from .snapshots import RESTORE_COMMAND, commit_snapshot, find_snapshot, image_id

if TYPE_CHECKING:
    from docker.models.containers import Container

    from ...core.hooks import SandboxHook


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


class LocalDockerSandbox(DurableContainers, WarmPools, SandboxEnvironment):
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

    def _check_workspace_fits_in_memory(self) -> None:
        """A tmpfs workspace is memory: one larger than the memory limit lets
        the agent fill the limit with pages no process owns, and the
        out-of-memory killer then ends every process, the TTL clock and
        docker-init included (issue 26).  Refused here, so ``runner validate``
        names it too.  Sizes it cannot read (a percentage) are left to Docker."""
        size = self.workspace_size or (
            READ_ONLY_TMPFS_SIZES[WORKSPACE] if self.read_only_root else None
        )
        if size is None or not self.memory:
            return
        workspace, memory = size_in_bytes(size), size_in_bytes(self.memory)
        if workspace is not None and memory is not None and workspace > memory:
            given = (
                f"workspace_size {size!r}"
                if self.workspace_size
                else f"read_only_root's tmpfs workspace ({size})"
            )
            raise ValueError(
                f"{given} is larger than the memory limit {self.memory!r}: a tmpfs workspace is "
                "counted against memory, and filling it would leave none for the sandbox's own "
                "processes; give a workspace_size no larger than memory, or more memory"
            )

    def container_options(self, *, session_id: str, expires_at: float | None) -> dict[str, Any]:
        """The keyword arguments of ``containers.create`` for one session."""
        labels = {
            LABEL: "1",
            LABEL_SESSION: session_id,
            LABEL_OWNER_HOST: socket.gethostname(),
            LABEL_OWNER_PID: str(os.getpid()),
            LABEL_OWNER_START: process_start_time(os.getpid()) or "",
        }
        if self.durable_owner:
            labels[LABEL_DURABLE] = self.durable_owner
        scope = current_scope()
        if scope is not None:
            labels[LABEL_SCOPE] = scope
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
            "security_opt": ["no-new-privileges", *self.security_options],
            "cap_drop": ["ALL"],
            "cap_add": list(CAPABILITIES),
            "pids_limit": self.pids_limit,
            "detach": True,
        }
        if self.runtime is not None:
            options["runtime"] = self.runtime
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

    # --- snapshots (see runner/core/snapshot_keys.py for which hooks are cached) -------------

    def saved_tmpfs_dirs(self) -> list[str]:
        """The tmpfs mounts a snapshot of this environment's sandboxes saves
        explicitly (a commit does not hold them): the workspace when it is a
        tmpfs, and HOME too under ``read_only_root``.  ``/tmp`` is not saved."""
        if self.read_only_root:
            return [WORKSPACE, SANDBOX_HOME if self.user == "sandbox" else "/root"]
        return [WORKSPACE] if self.workspace_size else []

    async def snapshot_key(self, *, hooks: Sequence[Any], inputs: Mapping[str, Any]) -> str:
        """The key of the snapshot these cached hooks, with these input values, would make."""
        from ...core.snapshot_keys import snapshot_key

        return snapshot_key(
            {
                # One inspect, not ensure_image's and image_id's: it is on
                # every session's path, a seeded pooled start's included.
                "image_id": await self.client.call(_present_image_id, self.image),
                "setup_script": self.setup_script,
                "user": self.user,
                "env": self.env,
                "shell": self.shell,
                # A snapshot with its workspace in the image cannot seed a
                # tmpfs workspace, which hides it, nor the other way round.
                "saved_tmpfs": self.saved_tmpfs_dirs(),
                "hooks": list(hooks),
                "inputs": dict(inputs),
            }
        )

    async def create_from_snapshot(
        self, key: str, *, session_id: str, expires_at: float | None
    ) -> DockerSandbox | None:
        """A sandbox started from the snapshot with ``key`` (setup script and
        cached hooks already in it), or None if there is none."""
        owner = self._pool_source or self
        if self.seeded_pool_size:
            pooled = owner._claim_seeded(key)
            if pooled is not None:
                pooled.adopt(session_id=session_id, client=self.client)
                return pooled
        snapshot = await self.client.call(find_snapshot, key)
        if snapshot is None:
            return None
        await self._sweep()
        if self.seeded_pool_size:  # warm for the next session of this key
            await owner._keep_warm(key, snapshot)
        return await self._create_seeded(
            snapshot, session_id=session_id, expires_at=expires_at, client=self.client
        )

    async def _create_seeded(
        self, snapshot: str, *, session_id: str, expires_at: float | None, client: DockerClient
    ) -> DockerSandbox:
        """A new container of the snapshot image ``snapshot``, its saved tmpfs
        directories restored."""
        sandbox = await self._create_new(
            session_id=session_id, expires_at=expires_at, client=client, snapshot=snapshot
        )
        if self.saved_tmpfs_dirs():
            try:
                await self._restore_tmpfs(sandbox)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await sandbox.delete()
                raise
        sandbox.snapshot_image = snapshot
        return sandbox

    # The ignore: mypy cannot tell that the shielded scope swallows nothing.
    async def save_snapshot(self, sandbox: Sandbox, key: str) -> str:  # type: ignore[return]
        """Commit ``sandbox``'s container as the snapshot for ``key``; returns the image id."""
        assert isinstance(sandbox, DockerSandbox)
        source = await self.client.call(image_id, self.image)
        with anyio.CancelScope(shield=True):  # an interrupted commit would leave a stray image
            snapshot = await self.client.call(
                partial(commit_snapshot, tmpfs_dirs=self.saved_tmpfs_dirs()),
                sandbox.container_id,
                key,
                source,
            )
            if self.seeded_pool_size:  # the next session of this key starts warm
                await (self._pool_source or self)._keep_warm(key, snapshot)
            return snapshot

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

    async def _restore_tmpfs(self, sandbox: DockerSandbox) -> None:
        """Unpack a snapshot's saved tmpfs directories into this sandbox's fresh ones."""
        result = await sandbox.execute_as_root(RESTORE_COMMAND, timeout_seconds=300)
        if result.exit_code != 0:
            raise SandboxUnavailableError(
                f"could not restore the snapshot's {', '.join(self.saved_tmpfs_dirs())} "
                f"(exit code {result.exit_code}): {result.stderr.strip()[:300]}"
            )

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


_SIZE = re.compile(r"([0-9]+)\s*([bkmgt]?)b?", re.IGNORECASE)


def size_in_bytes(size: str | int) -> int | None:
    """A size as Docker reads a memory limit or a tmpfs size ("512m", "2g",
    bytes as an int or digits), in bytes; None for what it cannot read."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    found = _SIZE.fullmatch(str(size).strip())
    if found is None:
        return None
    return int(found.group(1)) << (10 * " kmgt".index(found.group(2).lower() or " "))


def _present_image_id(client: Any, image: str) -> str:
    """The image's id, pulled first where it is missing (``ensure_image``)."""
    from docker.errors import ImageNotFound

    try:
        return str(client.images.get(image).id)
    except ImageNotFound:
        ensure_image(client, image)
        return image_id(client, image)


__all__ = [
    "EXPIRY_GRACE_SECONDS",
    "HOST_GRACE_SECONDS",
    "LABEL_DURABLE",
    "DockerSandbox",
    "LocalDockerSandbox",
    "collect_garbage",
    "remove_durable_containers",
]
