"""Durable Docker sandboxes: containers that outlive a ``runner serve`` crash.

A durable environment labels its containers with its owner (the server's
database); a restarted server re-attaches each open session's container
(``reattach``), removes one it cannot (``discard``), and removes the
owner's containers no session records (``recover``: the pool's, or one made
just before the crash).  A mixin of ``LocalDockerSandbox``, split from
``environment`` (issue 27).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ...core.errors import SandboxUnavailableError
from .container import DockerSandbox
from .engine import (
    LABEL,
    LABEL_DURABLE,
    LABEL_SESSION,
    DockerClient,
    remove_container,
    short_error,
)

if TYPE_CHECKING:
    from docker.models.containers import Container


class DurableContainers:
    """Re-attaching and removing durable containers (see the module's docstring)."""

    # Set by LocalDockerSandbox.__init__.
    client: DockerClient
    exec_channel: str | Literal[False]
    shell: str | None
    durable_owner: str | None

    if TYPE_CHECKING:

        def _sandbox_of(
            self, container: Container, *, session_id: str, client: DockerClient
        ) -> DockerSandbox: ...

    async def reattach(self, record: Mapping[str, Any], *, session_id: str) -> DockerSandbox:
        """The sandbox of an existing, running container of this session: for a
        ``runner serve`` restarted after a crash, whose sessions' containers
        (durable ones) outlived it.

        The container (``record["container_id"]``) must carry the runner's
        labels with ``record["label_session_id"]`` (default ``session_id``; a
        pooled container keeps its ``pool-...`` label) as its session, and be
        running.  A fresh exec channel is
        started, as at creation, and whose turn it is (the hooks' or the
        agent's) is read from the workspace's owner; nothing else runs (the
        setup script and the workspace hand-over were done when it was
        created).  Raises
        ``SandboxUnavailableError`` saying why if the container is gone, is
        not running, or belongs to another session.
        """
        container_id = str(record.get("container_id") or "")
        expected = record.get("label_session_id") or session_id
        if not container_id:
            raise SandboxUnavailableError("no container was recorded")
        container = await self.client.call(_find_container, container_id)
        if container is None:
            raise SandboxUnavailableError(f"container {container_id[:12]} no longer exists")
        labels = container.attrs.get("Config", {}).get("Labels") or {}
        if labels.get(LABEL) != "1" or labels.get(LABEL_SESSION) != expected:
            raise SandboxUnavailableError(
                f"container {container_id[:12]} is not the sandbox of session {expected} "
                f"(its session label is {labels.get(LABEL_SESSION)!r})"
            )
        state = container.attrs.get("State", {})
        if not state.get("Running") or state.get("Paused"):
            raise SandboxUnavailableError(
                f"container {container_id[:12]} is not running (status "
                f"{state.get('Status', 'unknown')}, exit code {state.get('ExitCode')})"
            )
        sandbox = self._sandbox_of(container, session_id=session_id, client=self.client)
        sandbox.label_session_id = expected
        try:
            if self.exec_channel:
                await sandbox.open_channel(self.exec_channel)
            await sandbox.prepare(detect_shell=self.shell is None)
            await sandbox.read_principal()  # the hooks' turn or the agent's
        except BaseException:
            if sandbox.channel is not None:  # the container stays: the caller decides
                sandbox.channel.close()
                sandbox.channel = None
            raise
        return sandbox

    async def discard(self, record: Mapping[str, Any], *, session_id: str) -> bool:
        """Remove the container ``record`` names if it is this session's (its
        session label is ``record["label_session_id"]``, default ``session_id``),
        in whatever state; True if one was removed.  For a session that cannot
        be re-attached: nothing is left behind."""
        container_id = record.get("container_id")
        if not container_id:
            return False
        label = record.get("label_session_id") or session_id
        return await self.client.call(_discard, container_id, label)

    def make_durable(self, owner: str) -> None:
        """Label new containers as ``owner``'s; one engine client per owner and
        engine for all its sessions' environments (one connection pool)."""
        self.durable_owner = owner
        key = (owner, self.client.base_url)
        self.client = _DURABLE_CLIENTS.setdefault(key, self.client)

    @classmethod
    async def recover(
        cls, records: Sequence[Mapping[str, Any]], *, owner: str, sessions: set[str] | None
    ) -> list[str]:
        keep = {str(r["container_id"]) for r in records if r.get("container_id")}
        try:
            removed = await remove_durable_containers(owner, keep=keep, sessions=sessions)
        except SandboxUnavailableError as exc:
            return [str(exc)]
        if not removed:
            return []
        return [
            f"removed {len(removed)} container(s) no open session records: "
            + ", ".join(c[:12] for c in removed)
        ]


def _find_container(client: Any, container_id: str) -> Any:
    from docker.errors import NotFound

    try:
        return client.containers.get(container_id)
    except NotFound:
        return None


def _discard(client: Any, container_id: str, label_session_id: str) -> bool:
    container = _find_container(client, container_id)
    if container is None:
        return False
    labels = container.attrs.get("Config", {}).get("Labels") or {}
    if labels.get(LABEL) != "1" or labels.get(LABEL_SESSION) != label_session_id:
        return False  # not ours to remove
    remove_container(client, container_id)
    return True


def _durable_leftovers(
    client: Any, owner: str, keep: frozenset[str], sessions: frozenset[str] | None
) -> list[str]:
    removed = []
    for summary in client.api.containers(
        all=True, filters={"label": [LABEL, f"{LABEL_DURABLE}={owner}"]}
    ):
        if summary["Id"] in keep:
            continue
        if (
            sessions is not None
            and (summary.get("Labels") or {}).get(LABEL_SESSION) not in sessions
        ):
            continue
        remove_container(client, summary["Id"])
        removed.append(summary["Id"])
    return removed


async def remove_durable_containers(
    owner: str,
    *,
    keep: Collection[str] = (),
    sessions: Collection[str] | None = None,
    docker_host: str | None = None,
) -> list[str]:
    """Remove the durable containers of ``owner`` (a ``runner serve`` database)
    whose id is not in ``keep``; returns their ids.  With ``sessions``, only
    those labelled with one of these session ids.

    A restarted server calls it before resuming, with the containers its open
    sessions record: what is left is its pool's unclaimed containers, and a
    container created just before a crash, before the server could record it.
    Servers sharing a PostgreSQL database pass the sessions they take over:
    another server's pool and sessions are not theirs to remove.
    """
    client = DockerClient(docker_host)
    try:
        return await client.call(
            _durable_leftovers,
            owner,
            frozenset(keep),
            None if sessions is None else frozenset(sessions),
        )
    except SandboxUnavailableError as exc:
        raise SandboxUnavailableError(
            f"could not list the durable containers of {owner}: {short_error(exc)}"
        ) from exc


#: (owner, engine URL) -> the engine client every durable environment of it shares.
_DURABLE_CLIENTS: dict[tuple[str, str | None], DockerClient] = {}
