"""A test run removes only what it made (issue 27).

The suite's gc tests run the real ``runner gc`` and ``collect_snapshots``
(even with ``max_count=0``, which removes every snapshot it sees).  Run on a
machine where the runner had been used, one of them once removed a snapshot
another run had left.  Now every container and snapshot made while
``RUNNER_SCOPE`` is set carries that scope, and gc sees only its own scope;
``tests/conftest.py`` gives each test run one.  These tests leave a
*foreign* snapshot and an expired container (no scope) in place, run every
kind of cleanup the suite runs, and check both survive while this scope's
twins are removed.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import RUNNER_CLI, TEST_IMAGE

from runner.sandboxes.docker.engine import LABEL, LABEL_EXPIRES, LABEL_SCOPE, collect_garbage
from runner.sandboxes.docker.snapshots import (
    LABEL_SNAPSHOT,
    LABEL_SNAPSHOT_CREATED,
    LABEL_SNAPSHOT_SOURCE,
    collect_snapshots,
)

pytestmark = pytest.mark.docker


def _snapshot(docker_client, name: str, scope: str | None):
    source = docker_client.images.get(TEST_IMAGE).id
    container = docker_client.containers.create(TEST_IMAGE, command=["true"])
    try:
        labels = {
            LABEL_SNAPSHOT: f"scope-test-{name}",
            LABEL_SNAPSHOT_CREATED: str(int(time.time()) - 30 * 86400),  # past every age limit
            LABEL_SNAPSHOT_SOURCE: source,
            LABEL_SCOPE: scope or "",
        }
        return container.commit(
            repository="sandbox-runner-snapshot", tag=f"scope-test-{name}", conf={"Labels": labels}
        )
    finally:
        container.remove(force=True)


def _expired_container(docker_client, scope: str | None):
    labels = {LABEL: "", LABEL_EXPIRES: "1"}  # expired in 1970
    if scope:
        labels[LABEL_SCOPE] = scope
    return docker_client.containers.create(TEST_IMAGE, command=["true"], labels=labels)


def _exists(docker_client, kind: str, ident: str) -> bool:
    from docker.errors import NotFound

    try:
        getattr(docker_client, kind).get(ident)
    except NotFound:
        return False
    return True


def test_cleanup_leaves_what_another_scope_made(docker_client, snapshot_lock) -> None:
    scope = os.environ["RUNNER_SCOPE"]
    foreign_image = _snapshot(docker_client, "foreign", None)
    foreign_container = _expired_container(docker_client, None)
    ours_image = _snapshot(docker_client, "ours", scope)
    ours_container = _expired_container(docker_client, scope)
    try:
        # Every cleanup the suite runs: in process, with every limit at zero,
        # and through the installed CLI (which inherits RUNNER_SCOPE).
        collect_garbage(docker_client)
        collect_snapshots(docker_client, max_count=0)
        gc = subprocess.run([*RUNNER_CLI, "gc"], capture_output=True, text=True, timeout=120)
        assert gc.returncode == 0, gc.stderr
        assert _exists(docker_client, "images", foreign_image.id), "a foreign snapshot was removed"
        assert _exists(docker_client, "containers", foreign_container.id), "a foreign container"
        assert not _exists(docker_client, "images", ours_image.id)
        assert not _exists(docker_client, "containers", ours_container.id)
        # Without a scope (a user's own gc), everything is in reach.
        unscoped = {k: v for k, v in os.environ.items() if k != "RUNNER_SCOPE"}
        gc = subprocess.run(
            [*RUNNER_CLI, "gc"], capture_output=True, text=True, timeout=120, env=unscoped
        )
        assert foreign_container.id[:12] in gc.stdout, gc.stdout
    finally:
        for ident in (foreign_container.id, ours_container.id):
            if _exists(docker_client, "containers", ident):
                docker_client.containers.get(ident).remove(force=True)
        for ident in (foreign_image.id, ours_image.id):
            if _exists(docker_client, "images", ident):
                docker_client.images.remove(ident, force=True)
