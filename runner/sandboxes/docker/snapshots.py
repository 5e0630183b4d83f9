"""Snapshots: containers committed to local images after their cached hooks ran.

A snapshot is an ordinary image, tagged ``sandbox-runner-snapshot:<key>``
and labelled with its key, when it was made and the image it came from, so
``docker images --filter label=sandbox-runner.snapshot`` lists them and
:func:`collect_snapshots` (``runner gc``) removes old ones.  Blocking
functions, run in a worker thread like the rest of ``engine``.

A commit holds the container's filesystem but not its tmpfs mounts.  A
sandbox whose workspace is a tmpfs (``workspace_size``, ``read_only_root``;
the latter's HOME too) is therefore saved explicitly: those directories are
archived by ``tar`` inside the container, the archive is added to the
committed image at ``SEED_ARCHIVE`` (through a created, never started,
container: a read-only root cannot take it), and a sandbox started from the
snapshot unpacks it into its fresh tmpfs mounts before anything runs
(``RESTORE_COMMAND``).  ``/tmp`` is not saved: it is temporary.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tarfile
import tempfile
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .engine import (
    LABEL,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SCOPE,
    LABEL_SESSION,
    current_scope,
    process_start_time,
    scoped,
)

if TYPE_CHECKING:
    import docker

SNAPSHOT_REPOSITORY = "sandbox-runner-snapshot"
LABEL_SNAPSHOT = "sandbox-runner.snapshot"
LABEL_SNAPSHOT_CREATED = "sandbox-runner.snapshot-created-at"
LABEL_SNAPSHOT_SOURCE = "sandbox-runner.snapshot-source-image"
#: ``runner gc`` removes snapshots older than this...
SNAPSHOT_MAX_AGE_SECONDS = 7 * 86400
#: ...and all but this many of the newest...
SNAPSHOT_MAX_COUNT = 20
#: ...and, oldest first, those beyond this many bytes of their own (what each
#: adds to the image it came from), newest kept first.
SNAPSHOT_MAX_TOTAL_BYTES = 20 << 30
#: Where a snapshot keeps the archive of its tmpfs directories (root's only).
SEED_DIR = "/var/lib/sandbox-runner"
SEED_ARCHIVE = f"{SEED_DIR}/seed.tar"
#: Run as root in a sandbox started from such a snapshot, before anything else.
RESTORE_COMMAND = f"tar -C / -xf {SEED_ARCHIVE}"


def image_id(client: docker.DockerClient, image: str) -> str:
    """The image's content id (``sha256:...``): a tag moved to another image
    must not match the snapshots of the old one."""
    return str(client.images.get(image).id)


def find_snapshot(client: docker.DockerClient, key: str) -> str | None:
    """The id of the newest snapshot with ``key``, or None."""
    found = client.api.images(filters={"label": scoped(f"{LABEL_SNAPSHOT}={key}")})
    if not found:
        return None
    newest = max(found, key=lambda summary: _created_at(summary.get("Labels") or {}))
    return str(newest["Id"])


def commit_snapshot(
    client: docker.DockerClient,
    container_id: str,
    key: str,
    source_image_id: str,
    *,
    tmpfs_dirs: Sequence[str] = (),
) -> str:
    """Commit the container as the snapshot for ``key``; returns the image id.

    ``tmpfs_dirs`` (absolute paths of tmpfs mounts, such as the workspace)
    are saved explicitly into the image, at ``SEED_ARCHIVE``.  The
    container's own labels (session, owner, expiry) are blanked in the
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
    snapshot_labels = {
        **labels,
        LABEL_SNAPSHOT: key,
        LABEL_SNAPSHOT_CREATED: str(int(time.time())),
        LABEL_SNAPSHOT_SOURCE: source_image_id,
        LABEL_SCOPE: current_scope() or "",
    }
    container = client.containers.get(container_id)
    if not tmpfs_dirs:
        image = container.commit(
            repository=SNAPSHOT_REPOSITORY, tag=key, conf={"Labels": snapshot_labels}
        )
        return str(image.id)
    # The filesystem first, untagged and unlabelled as a snapshot: until the
    # archive is in, nothing may find it.  Removing the final image later
    # removes this untagged parent with it.
    base = container.commit(conf={"Labels": labels})
    try:
        with tempfile.TemporaryDirectory(prefix="sandbox-runner-seed-") as scratch:
            archive = os.path.join(scratch, "dirs.tar")
            _archive_dirs(client, container_id, tmpfs_dirs, archive)
            wrapped = os.path.join(scratch, "seed.tar")
            _wrap_as_seed(archive, wrapped)
            return _commit_with(client, str(base.id), wrapped, key, snapshot_labels)
    except BaseException:
        with contextlib.suppress(Exception):
            client.api.remove_image(base.id)
        raise


def _archive_dirs(
    client: docker.DockerClient, container_id: str, dirs: Sequence[str], path: str
) -> None:
    """``tar`` ``dirs`` as root inside the container, streamed into ``path``."""
    names = [d.lstrip("/") for d in dirs]
    exec_id = client.api.exec_create(
        container_id, ["tar", "-C", "/", "-cf", "-", *names], user="0:0", stdout=True, stderr=True
    )["Id"]
    errors = bytearray()
    with open(path, "wb") as sink:
        for out, err in client.api.exec_start(exec_id, stream=True, demux=True):
            if out:
                sink.write(out)
            if err and len(errors) < 4096:
                errors += err
    code = client.api.exec_inspect(exec_id)["ExitCode"]
    if code != 0:
        message = errors.decode(errors="replace").strip()[:300]
        raise RuntimeError(f"tar of {', '.join(dirs)} exited {code}: {message}")


def _wrap_as_seed(archive: str, path: str) -> None:
    """An archive that puts ``archive`` at ``SEED_ARCHIVE``, in a root-only directory."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as outer:
        parts = SEED_DIR.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            directory = tarfile.TarInfo("/".join(parts[:depth]))
            directory.type = tarfile.DIRTYPE
            directory.mode = 0o700 if depth == len(parts) else 0o755
            directory.mtime = int(time.time())
            outer.addfile(directory)
        member = tarfile.TarInfo(SEED_ARCHIVE.lstrip("/"))
        member.size = os.path.getsize(archive)
        member.mode = 0o600
        member.mtime = int(time.time())
        with open(archive, "rb") as source:
            outer.addfile(member, source)


def _commit_with(
    client: docker.DockerClient, base: str, seed: str, key: str, labels: dict[str, str]
) -> str:
    """``base`` plus the ``seed`` archive, committed as the snapshot for ``key``."""
    # Never started; labelled as the runner's, so that `runner gc` removes it
    # if this process dies before it does.
    owner = {
        LABEL: "1",
        LABEL_SESSION: f"snapshot-{key[:12]}",
        LABEL_OWNER_HOST: socket.gethostname(),
        LABEL_OWNER_PID: str(os.getpid()),
        LABEL_OWNER_START: process_start_time(os.getpid()) or "",
    }
    created = client.api.create_container(
        base, command=["true"], network_disabled=True, labels=owner
    )
    try:
        with open(seed, "rb") as data:
            client.api.put_archive(created["Id"], "/", data)
        image = client.api.commit(
            created["Id"], repository=SNAPSHOT_REPOSITORY, tag=key, conf={"Labels": labels}
        )
    finally:
        client.api.remove_container(created["Id"], force=True, v=True)
    return str(image["Id"])


def collect_snapshots(
    client: docker.DockerClient,
    *,
    max_age_seconds: float = SNAPSHOT_MAX_AGE_SECONDS,
    max_count: int = SNAPSHOT_MAX_COUNT,
    max_total_bytes: int = SNAPSHOT_MAX_TOTAL_BYTES,
    now: float | None = None,
) -> list[str]:
    """Remove snapshots older than ``max_age_seconds``, all but the
    ``max_count`` newest, and the older ones beyond ``max_total_bytes`` of
    their own; returns the ids removed.  One still used by a container is
    left for a later run."""
    from docker.errors import APIError

    now = time.time() if now is None else now
    sizes = {str(s["Id"]): int(s.get("Size") or 0) for s in client.api.images(all=True)}
    summaries = client.api.images(filters={"label": scoped(LABEL_SNAPSHOT)})
    summaries.sort(key=lambda s: _created_at(s.get("Labels") or {}), reverse=True)
    removed = []
    total = 0
    for rank, summary in enumerate(summaries):
        labels = summary.get("Labels") or {}
        age = now - _created_at(labels)
        total += own_size(summary, sizes)
        if rank < max_count and age <= max_age_seconds and total <= max_total_bytes:
            continue
        try:
            client.api.remove_image(summary["Id"])
        except APIError:  # in use, or already gone
            continue
        removed.append(str(summary["Id"]))
    return removed


def own_size(summary: dict, sizes: dict[str, int]) -> int:
    """What a snapshot adds to the image it came from, in bytes (an image's
    ``Size`` counts its parents' layers too)."""
    size = int(summary.get("Size") or 0)
    source = (summary.get("Labels") or {}).get(LABEL_SNAPSHOT_SOURCE, "")
    return max(0, size - sizes.get(source, 0))


def _created_at(labels: dict[str, str]) -> float:
    try:
        return float(labels.get(LABEL_SNAPSHOT_CREATED, ""))
    except ValueError:
        return 0.0
