"""Snapshots of a Docker environment: the key a set of cached hooks would
make, a sandbox started from a snapshot, and a sandbox committed as one.

A snapshot is an image committed from a container after its setup script
and cached ``on_create`` hooks (see ``runner/core/snapshot_keys.py`` for
which hooks are cached); the tmpfs mounts a commit does not hold (a tmpfs
workspace, HOME under ``read_only_root``) are archived into the image and
restored into the fresh mounts of each container started from it
(``snapshots.RESTORE_COMMAND``).  A mixin of ``LocalDockerSandbox``, which
creates the containers (``_create_new``); the image work on the Engine is in
``snapshots``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from ...core.errors import SandboxUnavailableError
from ..base import Sandbox
from .container import DockerSandbox
from .engine import DockerClient, ensure_image
from .owners import HOOK_UID, SANDBOX_HOME, WORKSPACE
from .snapshots import RESTORE_COMMAND, commit_snapshot, find_snapshot, image_id

if TYPE_CHECKING:
    from .pools import WarmPools


class SnapshotSeeding:
    """The snapshot methods of one environment (see the module's docstring)."""

    # Set by LocalDockerSandbox.__init__.
    image: str
    client: DockerClient
    user: str
    env: dict[str, str]
    shell: str | None
    setup_script: str | None
    read_only_root: bool
    workspace_size: str | None
    seeded_pool_size: int
    _pool_source: WarmPools | None

    if TYPE_CHECKING:

        async def _sweep(self) -> None: ...

        async def _create_new(
            self,
            *,
            session_id: str,
            expires_at: float | None,
            client: DockerClient | None = None,
            snapshot: str | None = None,
        ) -> DockerSandbox: ...

        def _claim_seeded(self, key: str) -> DockerSandbox | None: ...

        async def _keep_warm(self, key: str, snapshot: str) -> None: ...

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
                # Snapshots made before the hooks had a uid of their own
                # hold a workspace the agent's uid owns (``owners``).
                "owners": f"hooks:{HOOK_UID}",
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

    async def _restore_tmpfs(self, sandbox: DockerSandbox) -> None:
        """Unpack a snapshot's saved tmpfs directories into this sandbox's fresh ones."""
        result = await sandbox.execute_as_root(RESTORE_COMMAND, timeout_seconds=300)
        if result.exit_code != 0:
            raise SandboxUnavailableError(
                f"could not restore the snapshot's {', '.join(self.saved_tmpfs_dirs())} "
                f"(exit code {result.exit_code}): {result.stderr.strip()[:300]}"
            )


def _present_image_id(client: Any, image: str) -> str:
    """The image's id, pulled first where it is missing (``ensure_image``)."""
    from docker.errors import ImageNotFound

    try:
        return str(client.images.get(image).id)
    except ImageNotFound:
        ensure_image(client, image)
        return image_id(client, image)
