"""``runner serve`` with ``seeded_pool:``: the agent's sessions start from
warm containers of its cached hook's snapshot (issue 30, item 1).

Real parts: the CLI as the server, a real HTTP client, real containers.
The cached hook writes random bytes, which each session saves on close:
the same bytes in both sessions show the second started from the snapshot,
its container's ``pool-...`` label that it came from the agent's pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_files import agent_yaml
from conftest import TEST_IMAGE
from serve_process import Server, wait_for, wait_status
from test_serve_docker import LABEL_SESSION, Db, durable_containers, recorded_container

from runner.sandboxes.docker.snapshots import LABEL_SNAPSHOT

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("snapshot_lock")]


def seeded_file(tmp_path: Path) -> Path:
    return agent_yaml(
        tmp_path,
        "seeded.yaml",
        f"""\
            version: 1
            agent:
              name: seeded
              model: local-model
              environment:
                sandbox: docker
                image: {TEST_IMAGE}
                seeded_pool: 1
                hooks:
                  - name: seed
                    cache: true
                    on_create:
                      - run: head -c 8 /dev/urandom | od -An -tx1 > seed.txt
                  - name: keep
                    on_destroy:
                      - save: seed.txt
                        to: seed.txt
            """,
    )


def warm_sandboxes(exposition: str, agent: str) -> float:
    """The ``runner_warm_sandboxes`` sample of ``agent``'s seeded pool."""
    sample = f'runner_warm_sandboxes{{agent="{agent}",pool="seeded"}} '
    for line in exposition.splitlines():
        if line.startswith(sample):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {sample!r} in:\n{exposition}")


def test_a_served_agents_second_session_starts_from_its_seeded_pool(
    tmp_path: Path, docker_client: Any
) -> None:
    snapshots_before = {i.id for i in docker_client.images.list(filters={"label": LABEL_SNAPSHOT})}
    server = Server([seeded_file(tmp_path)], tmp_path)
    owner = ""
    try:
        server.start()
        labels = []
        for _ in range(2):
            with server.client() as client:
                created = client.post("/v1/sessions", json={"agent": "seeded"})
                assert created.status_code == 201, created.text
                session_id = created.json()["id"]
                container = recorded_container(server, session_id, docker_client)
                owner = Db(server).owner()
                labels.append(container.labels[LABEL_SESSION])
                wait_status(client, session_id, "waiting")
                assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
            if not labels[-1].startswith("pool-"):  # the pool fills after the first session

                def ready() -> bool:
                    # The server's own word: a warmed container waits in the
                    # agent's seeded pool, so the next session claims it.
                    with server.client() as scraper:
                        return warm_sandboxes(scraper.get("/metrics").text, "seeded") == 1

                wait_for(ready, what="the seeded pool to fill", timeout=120)
        seeds = [
            (server.output_dir / session / "seed.txt").read_text()
            for session in sorted(p.name for p in server.output_dir.iterdir() if p.is_dir())
        ]
        assert not labels[0].startswith("pool-")
        assert labels[1].startswith("pool-"), labels
        assert len(seeds) == 2 and seeds[0] == seeds[1], seeds
        server.stop()
        assert durable_containers(docker_client, owner) == []  # the pool's idle one too
    finally:
        server.stop()
        if owner:
            for container in durable_containers(docker_client, owner):
                container.remove(force=True, v=True)
        for image in docker_client.images.list(filters={"label": LABEL_SNAPSHOT}):
            if image.id not in snapshots_before:
                docker_client.images.remove(image.id, force=True)
