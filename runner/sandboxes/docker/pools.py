"""The warm pools of a Docker environment: containers started ahead of the
sessions that will take them.

Two kinds, both ``pool.WarmPool``: the plain pool (``pool_size``) of
containers as ``create`` makes them, and seeded pools (``seeded_pool_size``),
one per recently used snapshot key, of containers started from that
snapshot, so a session whose cached ``on_create`` matches starts at once.
Seeded pools are bounded in keys (``seeded_pool_keys``, least recently used
dropped) and in idle time (a key nobody takes from for ``pool_idle_seconds``
closes its pool).  ``share_pool`` makes an environment take from another's
pools (``runner serve``: one set per agent).  A mixin of
``LocalDockerSandbox``, which creates the containers (``_create_new``,
``_create_seeded``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from ...core.errors import SandboxUnavailableError
from ..base import SandboxEnvironment
from .container import DockerSandbox
from .engine import DockerClient, remove_container
from .exec import PROBE_SECONDS
from .pool import WarmPool


class WarmPools:
    """The pools of one environment (see the module's docstring)."""

    # Set by LocalDockerSandbox.__init__.
    image: str
    client: DockerClient
    ttl_seconds: float | None
    pool_size: int
    seeded_pool_size: int
    seeded_pool_keys: int
    pool_idle_seconds: float
    _pool: WarmPool[DockerSandbox] | None
    _pool_lock: threading.Lock
    #: Claim pooled containers from this environment's pools (``share_pool``).
    _pool_source: WarmPools | None
    #: Snapshot key -> (its image id, the pool of containers started from
    #: it), least recently used first.
    _seeded: OrderedDict[str, tuple[str, WarmPool[DockerSandbox]]]

    if TYPE_CHECKING:

        async def _create_new(
            self,
            *,
            session_id: str,
            expires_at: float | None,
            client: DockerClient | None = None,
            snapshot: str | None = None,
        ) -> DockerSandbox: ...

        async def _create_seeded(
            self,
            snapshot: str,
            *,
            session_id: str,
            expires_at: float | None,
            client: DockerClient,
        ) -> DockerSandbox: ...

    def start_pool(self) -> None:
        """Start filling the warm pool now (it also starts on the first session)."""
        if self.pool_size and self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = WarmPool(
                        self.pool_size,
                        self._make_pooled,
                        _discard_pooled,
                        max_idle_seconds=self.pool_idle_seconds,
                        name=f"docker-pool-{self.image}",
                    )

    async def wait_pool_ready(self, timeout: float = 120) -> bool:
        """Start the pool if needed and wait until it is full."""
        self.start_pool()
        if self._pool is None:
            return True
        return await anyio.to_thread.run_sync(self._pool.wait_ready, timeout)

    def share_pool(self, source: SandboxEnvironment) -> None:
        """Claim pooled containers from ``source``'s pool instead of filling one
        of this environment's own (``runner serve`` compiles an agent once per
        session; that agent's sessions share one pool).  ``source`` must make
        the same containers (same file, same ``durable_owner``)."""
        assert isinstance(source, WarmPools), source
        self._pool_source = source

    def close_pool(self) -> None:
        """Remove the pools' idle containers, seeded ones too (also done at
        interpreter exit)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        with self._pool_lock:
            seeded = [pool for _, pool in self._seeded.values()]
            self._seeded.clear()
        for pool in seeded:
            pool.close()

    def _make_pooled(self) -> DockerSandbox:
        """Runs in the pool's thread: the same creation code, in a private event loop.

        A pooled container lives ``ttl_seconds`` after it is claimed at most,
        plus the time it may wait in the pool.
        """
        lifetime = (self.ttl_seconds or 86400) + self.pool_idle_seconds
        return anyio.run(
            partial(
                _warmed_up,
                self._create_new,
                session_id=f"pool-{uuid.uuid4().hex[:12]}",
                expires_at=time.time() + lifetime,
                client=self.client.fork(),
            )
        )

    # --- seeded pools: containers started from a snapshot, per key -------------

    def _claim_seeded(self, key: str) -> DockerSandbox | None:
        """A warm container of the snapshot ``key``, or None (no pool for it,
        or none ready right now)."""
        with self._pool_lock:
            entry = self._seeded.get(key)
            if entry is None or entry[1].closed:
                return None
            self._seeded.move_to_end(key)
            pool = entry[1]
        return pool.claim()

    async def _keep_warm(self, key: str, snapshot: str) -> None:
        """Keep ``seeded_pool_size`` containers of ``snapshot`` (the image of
        ``key``) started from now on; the least recently used key beyond
        ``seeded_pool_keys`` loses its pool."""
        evicted: list[WarmPool[DockerSandbox]] = []
        with self._pool_lock:
            entry = self._seeded.get(key)
            if entry is not None and (entry[1].closed or entry[0] != snapshot):
                evicted.append(entry[1])  # retired, or a newer snapshot of the key
                entry = None
            if entry is None:
                self._seeded[key] = (
                    snapshot,
                    WarmPool(
                        self.seeded_pool_size,
                        partial(self._make_seeded, snapshot),
                        _discard_pooled,
                        max_idle_seconds=self.pool_idle_seconds,
                        replace_idle=False,
                        name=f"docker-seeded-pool-{key[:12]}",
                    ),
                )
            self._seeded.move_to_end(key)
            while len(self._seeded) > self.seeded_pool_keys:
                evicted.append(self._seeded.popitem(last=False)[1][1])
        for pool in evicted:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pool.close)

    def _make_seeded(self, snapshot: str) -> DockerSandbox:
        """Runs in a seeded pool's thread, as ``_make_pooled``."""
        lifetime = (self.ttl_seconds or 86400) + self.pool_idle_seconds
        return anyio.run(
            partial(
                _warmed_up,
                partial(self._create_seeded, snapshot),
                session_id=f"pool-{uuid.uuid4().hex[:12]}",
                expires_at=time.time() + lifetime,
                client=self.client.fork(),
            )
        )

    async def wait_seeded_pool_ready(self, key: str, timeout: float = 120) -> bool:
        """Wait until the seeded pool of ``key`` is full; False if there is
        none (no session used or saved that snapshot yet) or it did not fill
        within ``timeout``."""
        owner = self._pool_source or self
        with owner._pool_lock:
            entry = owner._seeded.get(key)
        if entry is None:
            return False
        return await anyio.to_thread.run_sync(entry[1].wait_ready, timeout)

    def warm_counts(self) -> dict[str, int]:
        """The containers ready to claim right now, by pool kind: ``plain``
        (``pool_size``) and ``seeded`` (every key's), each kind this
        environment has.  A container counts once its warm-up is done and
        a session would take it (what ``runner_warm_sandboxes`` reports)."""
        owner = self._pool_source or self
        counts: dict[str, int] = {}
        if owner.pool_size:
            plain = owner._pool
            counts["plain"] = len(plain) if plain is not None else 0
        if owner.seeded_pool_size:
            with owner._pool_lock:
                seeded = [pool for _, pool in owner._seeded.values() if not pool.closed]
            counts["seeded"] = sum(len(pool) for pool in seeded)
        return counts

    def seeded_keys(self) -> list[str]:
        """The snapshot keys kept warm now, least recently used first."""
        owner = self._pool_source or self
        with owner._pool_lock:
            return [key for key, (_, pool) in owner._seeded.items() if not pool.closed]


async def _warmed_up(create: Any, **options: Any) -> DockerSandbox:
    """A pooled sandbox made by ``create(**options)``, then given one command
    as each sandbox user, the agent's and the hooks' (``owners``): the
    helper starts a user's spawner on its first command (a fork of the
    helper), which the session's first hook and first turn would otherwise
    wait for.  It is left the hooks', as a new sandbox is."""
    sandbox: DockerSandbox = await create(**options)
    try:
        for principal in ("agent", "hooks"):
            sandbox.principal = principal  # nothing of the workspace changes hands
            warm = await sandbox.execute("true", timeout_seconds=PROBE_SECONDS)
            if not warm.ok:
                raise SandboxUnavailableError(f"a pooled sandbox's first command failed: {warm}")
    except BaseException:
        with anyio.CancelScope(shield=True):
            await sandbox.delete()
        raise
    return sandbox


def _discard_pooled(sandbox: DockerSandbox) -> None:
    """Runs in the pool's thread (or at exit): remove an unclaimed container."""
    if sandbox.channel is not None:
        sandbox.channel.close()
    remove_container(sandbox.client._connect(), sandbox.container_id)
