"""Removing a container returns only once it is gone.

CI once found a session's container still listed after the session closed:
its TTL ended as the session removed it, and the Engine answered the
removal's kill with 409 "is not running", which the runner took for
"another removal is under way" and let be.  Two removals at once give the
same answer deterministically enough to test: both must see it gone.
"""

from __future__ import annotations

import threading

import pytest
from conftest import TEST_IMAGE

from runner.sandboxes.docker.engine import remove_container

pytestmark = pytest.mark.docker


def _exists(docker_client, container_id: str) -> bool:
    from docker.errors import NotFound

    try:
        docker_client.api.inspect_container(container_id)
    except NotFound:
        return False
    return True


@pytest.mark.parametrize("attempt", range(3))
def test_two_removals_at_once_both_return_once_it_is_gone(docker_client, attempt) -> None:
    container = docker_client.containers.run(
        TEST_IMAGE, ["sleep", "600"], detach=True, network_mode="none"
    )
    start = threading.Barrier(2)
    seen_after: list[bool] = []
    errors: list[BaseException] = []

    def remove() -> None:
        start.wait()
        try:
            remove_container(docker_client, container.id)
            seen_after.append(_exists(docker_client, container.id))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=remove) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert seen_after == [False, False], "a removal returned while the container still existed"
    finally:
        remove_container(docker_client, container.id)
