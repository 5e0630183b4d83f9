"""Talking to the Docker Engine: the client, images, containers, crash leftovers.

The docker SDK is blocking; every call runs in a worker thread, through a
``CapacityLimiter`` sized to the client's connection pool so concurrent
sessions queue for a connection instead of failing.  ``import docker``
happens on first use, never at import time.  An Engine that stops answering
becomes ``SandboxUnavailableError``, never a raw HTTP error.

Every runner container carries labels (session id, expiry, owner process)
so :func:`collect_garbage` (``runner gc``, and the first session of a
process) can remove what a crashed runner left behind.  A container of a
``runner serve`` session also carries ``LABEL_DURABLE`` (the id of the
server's database): it outlives its process, so that a restarted server can
re-attach it, and only its expiry bounds it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ...core.errors import SandboxUnavailableError, SandboxUnreachableError

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

T = TypeVar("T")

DEFAULT_IMAGE = "python:3.12-bookworm"
IMAGE_VARIABLE = "RUNNER_DOCKER_IMAGE"

LABEL = "sandbox-runner"
LABEL_SESSION = "sandbox-runner.session-id"
LABEL_EXPIRES = "sandbox-runner.expires-at"
LABEL_OWNER_HOST = "sandbox-runner.owner-host"
LABEL_OWNER_PID = "sandbox-runner.owner-pid"
LABEL_OWNER_START = "sandbox-runner.owner-start"
#: Set on the containers of ``runner serve`` sessions: the id of the server's
#: database, which owns them instead of the process (see ``collect_garbage``).
LABEL_DURABLE = "sandbox-runner.durable"
#: Set on every container and snapshot made while ``RUNNER_SCOPE`` is set (a
#: CI job, a test run): ``runner gc``, the sweep at start and snapshot
#: lookups then see only that scope's, so a test suite never removes (or
#: reuses) what a user's runs left.  Unset, they see everything.
LABEL_SCOPE = "sandbox-runner.scope"
SCOPE_VARIABLE = "RUNNER_SCOPE"


def current_scope() -> str | None:
    """The value of ``RUNNER_SCOPE``, or None."""
    return os.environ.get(SCOPE_VARIABLE) or None


def scoped(label: str) -> str | list[str]:
    """A Docker label filter narrowed to the current scope (all must match)."""
    scope = current_scope()
    return label if scope is None else [label, f"{LABEL_SCOPE}={scope}"]


_POOL_SIZE = 10  # docker-py's default connection pool per client

#: How long past its expiry a container that is still running is left to its
#: own clock before :func:`collect_garbage` removes it.  The clock (``sleep``,
#: started after the label was written) ends up to a second or two after the
#: label's time; without this grace a sweep of another runner process would
#: race it and kill a container that was about to stop by itself.  A
#: container whose clock was stopped (``user="root"``) is removed after it.
EXPIRY_GRACE_SECONDS = 30.0


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
                raise SandboxUnreachableError(
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
    from docker.errors import APIError, DockerException
    from requests.exceptions import RequestException

    try:
        return function(client, *args)
    except APIError as exc:  # an answer (it is a RequestException too): 5xx may pass
        failure = (
            SandboxUnreachableError if (exc.status_code or 0) >= 500 else SandboxUnavailableError
        )
        raise failure(f"the Docker engine failed: {short_error(exc)}; {START_DOCKER_HINT}") from exc
    except RequestException as exc:  # no answer (a refused or dropped connection, a timeout)
        raise SandboxUnreachableError(
            f"the Docker engine failed: {short_error(exc)}; {START_DOCKER_HINT}"
        ) from exc
    except DockerException as exc:
        raise SandboxUnavailableError(
            f"the Docker engine failed: {short_error(exc)}; {START_DOCKER_HINT}"
        ) from exc


def ensure_image(client: docker.DockerClient, image: str) -> None:
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
            f"({short_error(exc)}); build or load it, or set {IMAGE_VARIABLE} (or image=) "
            "to an image listed by 'docker images'"
        ) from exc


def create_and_start(client: docker.DockerClient, options: dict[str, Any]) -> Container:
    from docker.errors import DockerException

    options = dict(options)
    options.pop("detach", None)
    try:
        container = client.containers.create(**options)
    except DockerException as exc:
        raise SandboxUnavailableError(
            f"could not create a container from {options['image']!r}: {short_error(exc)}"
        ) from exc
    try:
        container.start()
    except BaseException as exc:
        container.remove(force=True)
        if isinstance(exc, DockerException):
            raise SandboxUnavailableError(
                f"could not start a container from {options['image']!r}: {short_error(exc)}"
            ) from exc
        raise
    return container


#: How long :func:`remove_container` keeps asking while the Engine answers 409.
REMOVE_CONFLICT_SECONDS = 30.0


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    """Remove a container and return only once it is gone.

    The Engine answers 409 (conflict) when another removal of the container
    is under way, and also when the container's main process is exiting
    just as the removal kills it ("is not running"); neither removed it.
    Both are asked again until the container is gone (CI saw the second
    leave a container behind whose TTL ended as its session closed)."""
    from docker.errors import APIError, NotFound

    deadline = time.monotonic() + REMOVE_CONFLICT_SECONDS
    while True:
        try:
            client.api.remove_container(container_id, force=True, v=True)
            return
        except NotFound:
            return
        except APIError as exc:
            if exc.status_code != 409 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def short_error(exc: Exception) -> str:
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


def is_garbage(
    labels: Mapping[str, str], *, at: float | None = None, running: bool = False
) -> bool:
    """True for a runner container that expired, or whose owner process is gone
    and which is not durable (``LABEL_DURABLE``: a ``runner serve`` session's,
    owned by the server's database, kept for a restarted server until it expires).

    A ``running`` container counts as expired only ``EXPIRY_GRACE_SECONDS``
    after its label's time: until then its own clock is due to stop it."""
    now = time.time() if at is None else at
    if is_expired(labels, at=now - EXPIRY_GRACE_SECONDS if running else now):
        return True
    return not labels.get(LABEL_DURABLE) and owner_is_gone(labels)


def collect_garbage(client: docker.DockerClient) -> list[str]:
    """Remove runner containers that expired or whose owner process is gone.

    Returns the ids of the containers removed.  Containers of live runner
    processes are left alone, whoever owns them.  Durable containers (those
    of ``runner serve`` sessions, labelled ``LABEL_DURABLE``) are left alone
    even when the server that made them is dead, so that it can re-attach
    them when it starts again; their expiry label (the session's
    ``ttl_seconds``, one day by default) still bounds them: once it passes
    they are removed like any other.  An expired container that still runs
    is given ``EXPIRY_GRACE_SECONDS`` for its own clock to stop it first.
    """
    from docker.errors import APIError, NotFound

    removed = []
    for summary in client.api.containers(all=True, filters={"label": scoped(LABEL)}):
        labels = summary.get("Labels") or {}
        if is_garbage(labels, running=summary.get("State") == "running"):
            try:
                client.api.remove_container(summary["Id"], force=True, v=True)
            except NotFound:
                continue
            except APIError as exc:
                # Another `runner gc` (or the session itself) is removing it.
                if exc.status_code == 409 and "already in progress" in str(exc):
                    continue
                raise
            removed.append(summary["Id"])
    return removed
