"""Snapshots: containers committed to local images after their cached hooks ran.

A snapshot is an ordinary image, tagged ``sandbox-runner-snapshot:<key>``
and labelled with its key, when it was made and the image it came from, so
``docker images --filter label=sandbox-runner.snapshot`` lists them and
:func:`collect_snapshots` (``runner gc``) removes old ones.  Blocking
functions, run in a worker thread like the rest of ``_docker_engine``.

A commit holds the container's filesystem but not its tmpfs mounts, which
is why ``workspace_size`` and ``read_only_root`` (both a tmpfs workspace)
cannot be combined with cached hooks.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._docker_engine import (
    LABEL,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SESSION,
)

if TYPE_CHECKING:
    import docker

SNAPSHOT_REPOSITORY = "sandbox-runner-snapshot"
LABEL_SNAPSHOT = "sandbox-runner.snapshot"
LABEL_SNAPSHOT_CREATED = "sandbox-runner.snapshot-created-at"
LABEL_SNAPSHOT_SOURCE = "sandbox-runner.snapshot-source-image"
#: ``runner gc`` removes snapshots older than this...
SNAPSHOT_MAX_AGE_SECONDS = 7 * 86400
#: ...and all but this many of the newest.
SNAPSHOT_MAX_COUNT = 20


def image_id(client: docker.DockerClient, image: str) -> str:
    """The image's content id (``sha256:...``): a tag moved to another image
    must not match the snapshots of the old one."""
    return str(client.images.get(image).id)


def find_snapshot(client: docker.DockerClient, key: str) -> str | None:
    """The id of the newest snapshot with ``key``, or None."""
    found = client.api.images(filters={"label": f"{LABEL_SNAPSHOT}={key}"})
    if not found:
        return None
    newest = max(found, key=lambda summary: _created_at(summary.get("Labels") or {}))
    return str(newest["Id"])


def commit_snapshot(
    client: docker.DockerClient, container_id: str, key: str, source_image_id: str
) -> str:
    """Commit the container as the snapshot for ``key``; returns the image id.

    The container's own labels (session, owner, expiry) are blanked in the
    image: a container started from it would otherwise inherit them, and
    ``runner gc`` would take it for the first session's.
    """
    labels = {
        name: ""
        for name in (
            LABEL,
            LABEL_SESSION,
            LABEL_EXPIRES,
            LABEL_OWNER_HOST,
            LABEL_OWNER_PID,
            LABEL_OWNER_START,
        )
    }
    labels |= {
        LABEL_SNAPSHOT: key,
        LABEL_SNAPSHOT_CREATED: str(int(time.time())),
        LABEL_SNAPSHOT_SOURCE: source_image_id,
    }
    image = client.containers.get(container_id).commit(
        repository=SNAPSHOT_REPOSITORY, tag=key, conf={"Labels": labels}
    )
    return str(image.id)


def collect_snapshots(
    client: docker.DockerClient,
    *,
    max_age_seconds: float = SNAPSHOT_MAX_AGE_SECONDS,
    max_count: int = SNAPSHOT_MAX_COUNT,
    now: float | None = None,
) -> list[str]:
    """Remove snapshots older than ``max_age_seconds`` and all but the
    ``max_count`` newest; returns the ids removed.  One still used by a
    container is left for a later run."""
    from docker.errors import APIError

    now = time.time() if now is None else now
    summaries = client.api.images(filters={"label": LABEL_SNAPSHOT})
    summaries.sort(key=lambda s: _created_at(s.get("Labels") or {}), reverse=True)
    removed = []
    for rank, summary in enumerate(summaries):
        age = now - _created_at(summary.get("Labels") or {})
        if rank < max_count and age <= max_age_seconds:
            continue
        try:
            client.api.remove_image(summary["Id"])
        except APIError:  # in use, or already gone
            continue
        removed.append(str(summary["Id"]))
    return removed


def _created_at(labels: dict[str, str]) -> float:
    try:
        return float(labels.get(LABEL_SNAPSHOT_CREATED, ""))
    except ValueError:
        return 0.0
