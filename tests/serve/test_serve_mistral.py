"""``runner serve`` with ``sandbox: mistral`` after a SIGKILL: the session's
cloud instance is recorded when it is created (its ids, name and marker
file, never a token or the executor's secret), so the restarted server
re-attaches the same instance; an instance deleted, paused or woken from a
deep sleep without its disk while the server was down fails its session
cleanly, and nothing is left in the cloud.

Real parts: the installed CLI as the server (its own process, killed with
SIGKILL), koyeb-sdk inside it, a real HTTP client, a model server on
loopback.  Only the cloud is simulated (``tests/support/koyeb_server.py``, in this
test process, so it outlives the server; each instance is a real container
of the test image).  Counter files in the instance's workspace prove how
often each step ran; a step blocks on a file the test creates in the
instance, so the kill lands at a known point.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agent_files import agent_yaml
from conftest import TEST_IMAGE
from koyeb_server import FakeCloud, containers_left_by, point_sdk_at
from serve_process import Server, lines, wait_for, wait_status

pytestmark = pytest.mark.docker

BLOCK = "touch {flag}; while [ ! -f {go} ]; do sleep 0.05; done"

#: How long a wait that includes a server process's first cloud call may
#: take: the process imports the cloud SDK then (7-11 s measured on 2 idle
#: cores; stop 39's CI rehearsal, on 2 loaded cores, passed 30 s on a restart's).
#: A wait, not a speed check: the tests judge what happens, not how fast.
SDK_START = 120.0


def mistral_file(tmp_path: Path, model_url: str = "http://127.0.0.1:9/v1") -> Path:
    return agent_yaml(
        tmp_path,
        "durable-mistral.yaml",
        f"""\
            version: 1
            agent:
              name: durable
              model: local-model
              base_url: {model_url}
              environment:
                sandbox: mistral
                readiness_timeout_seconds: 30
                ttl_seconds: 600
                default_exec_timeout_seconds: 120
                hooks:
                  - name: counted
                    on_create:
                      - run: echo ran >> create-1.count
                      - run: echo ran >> create-2.count; {BLOCK.format(flag="creating", go="GO_CREATE")}
                      - run: echo ran >> create-3.count
                    on_destroy:
                      - run: echo ran >> destroy-1.count
                      - save: create-1.count
                        to: create-1.count
                      - save: create-2.count
                        to: create-2.count
                      - save: create-3.count
                        to: create-3.count
                      - save: destroy-1.count
                        to: destroy-1.count
            """,
    )


@pytest.fixture
def cloud(docker_client: Any, monkeypatch: pytest.MonkeyPatch):
    with FakeCloud(docker_client, TEST_IMAGE) as fake:
        point_sdk_at(monkeypatch, fake)  # the server's environment is copied from ours
        yield fake
    assert containers_left_by(fake, docker_client) == []


@pytest.fixture
def served(tmp_path: Path, cloud: FakeCloud):
    servers: list[Server] = []

    def make(model_url: str = "http://127.0.0.1:9/v1") -> Server:
        server = Server([mistral_file(tmp_path, model_url)], tmp_path)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def recorded(server: Server, session_id: str) -> dict[str, Any]:
    """The sandbox record of a session in the server's database (read-only)."""
    path = server.output_dir / "runner-serve.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT sandbox FROM sessions WHERE id = ?", (session_id,)).fetchall()
    return json.loads(rows[0][0]) if rows and rows[0][0] else {}


@pytest.fixture(autouse=True)
def probe() -> Any:
    """The test's own Docker client for looking into instances: the stand-in's
    threads use theirs (a client's exec streams are not shared across threads)."""
    import docker

    global _probe
    _probe = docker.from_env()
    yield _probe
    _probe.close()


_probe: Any = None


def in_instance(cloud: FakeCloud, app_id: str, command: str) -> str:
    """Run ``command`` in the workspace of the app's instance, as the test (not the
    server); every command here prints something, so an empty answer (an exec
    stream cut short on a loaded Docker daemon) is asked again."""
    container = _probe.containers.get(cloud.containers[app_id].id)

    def answer() -> str:
        exit_code, output = container.exec_run(["sh", "-c", command], workdir="/workspace")
        assert exit_code == 0, output
        return output.decode()

    return wait_for(answer, what=f"an answer to {command!r}")


def count(cloud: FakeCloud, app_id: str, name: str) -> int:
    return int(in_instance(cloud, app_id, f"cat {name} 2>/dev/null | wc -l").strip())


def started_instance(server: Server, cloud: FakeCloud) -> tuple[str, dict[str, Any]]:
    """A new session, its on_create blocked in step 2: (its id, its sandbox record)."""
    with server.client() as client:
        created = client.post("/v1/sessions", json={"agent": "durable"})
        assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    record = wait_for(
        lambda: recorded(server, session_id), what="the instance to be recorded", timeout=SDK_START
    )
    app_id = record["app_id"]
    wait_for(lambda: "creating" in in_instance(cloud, app_id, "ls"), what="on_create step 2")
    return session_id, record


def test_a_mistral_session_killed_mid_on_create_resumes_on_the_same_instance(
    served: Any, cloud: FakeCloud
) -> None:
    from chat_server import ChatServer, assistant

    with ChatServer([assistant("Resumed and listening.")]) as model:
        server = served(f"{model.url}").start()
        session_id, record = started_instance(server, cloud)
        app_id, instance_id = record["app_id"], record["instance_id"]
        assert cloud.instances[instance_id].app_id == app_id
        assert set(record) >= {"instance_id", "app_id", "instance_name", "marker", "shell"}
        secret = cloud.instances[instance_id].secret
        assert secret and secret not in json.dumps(record)  # no secret is stored
        assert cloud.token not in json.dumps(record)
        server.kill()
        assert list(cloud.instances) == [instance_id]  # the server's death did not take it

        server.start()
        assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
        with server.client() as client:
            # The cut-off step 2 runs again on the same instance; step 1 never again.
            wait_for(
                lambda: count(cloud, app_id, "create-2.count") == 2,
                what="step 2 again",
                timeout=SDK_START,
            )
            in_instance(cloud, app_id, "touch GO_CREATE; echo ok")
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
            assert recorded(server, session_id)["instance_id"] == instance_id
            assert list(cloud.instances) == [instance_id]  # no second instance
            assert [count(cloud, app_id, f"create-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]

            turn = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Hello?"})
            assert turn.status_code == 200, turn.text
            assert turn.json()["turn"] == {
                "status": "completed",
                "text": "Resumed and listening.",
                "error": None,
            }
            closed = client.delete(f"/v1/sessions/{session_id}").json()
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]
    assert lines(saved / "destroy-1.count") == 1  # on_destroy ran once, on that instance
    assert cloud.instances == {} and cloud.containers == {}  # nothing left in the cloud
    assert [c["path"] for c in cloud.calls("DELETE")] == [f"/v1/apps/{app_id}"]


@pytest.mark.parametrize("by_hand", ["deleted", "paused", "deep-slept"])
def test_a_mistral_session_whose_instance_went_away_fails_cleanly_after_a_restart(
    served: Any, cloud: FakeCloud, by_hand: str
) -> None:
    server = served().start()
    session_id, record = started_instance(server, cloud)
    app_id, instance_id = record["app_id"], record["instance_id"]
    server.kill()
    if by_hand == "deleted":
        cloud.expire(app_id)
    elif by_hand == "paused":
        cloud.pause(app_id)
    else:
        cloud.sleep(app_id, deep=True)

    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
        reason = {
            "deleted": f"cloud instance {instance_id} no longer exists",
            "paused": f"cloud instance {instance_id} is not running (deployment STOPPED)",
            "deep-slept": f"cloud instance {instance_id}: the cloud sandbox restarted and lost "
            "its files",
        }[by_hand]
        assert failed["error"].startswith(
            f"the server restarted and its sandbox is gone ({reason}"
        ), failed["error"]
        refused = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "hi"})
        assert refused.status_code == 409
        assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "failed"
    # No hook ran on it, and an instance still there (paused, woken empty) was deleted.
    assert not (server.output_dir / session_id / "destroy-1.count").exists()
    assert cloud.instances == {} and cloud.containers == {}
    expected = [] if by_hand == "deleted" else [f"/v1/apps/{app_id}"]
    assert [c["path"] for c in cloud.calls("DELETE")] == expected


def test_a_mistral_session_that_cannot_resume_has_its_instance_deleted(
    served: Any, cloud: FakeCloud
) -> None:
    server = served().start()
    session_id, record = started_instance(server, cloud)
    server.kill()
    # Its journal is keyed by positions in the file: another file cannot replay it.
    server.files[0].write_text(server.files[0].read_text() + "# edited\n")
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
    assert "changed since the session started" in failed["error"]
    assert cloud.instances == {} and cloud.containers == {}
    assert [c["path"] for c in cloud.calls("DELETE")] == [f"/v1/apps/{record['app_id']}"]


def test_an_instance_made_but_not_recorded_before_the_kill_is_deleted_at_restart(
    served: Any, cloud: FakeCloud
) -> None:
    cloud.pre_ready_statuses = ["STARTING"] * 100_000  # the readiness wait never ends
    server = served().start()
    with server.client() as client:
        session_id = client.post("/v1/sessions", json={"agent": "durable"}).json()["id"]
    first = wait_for(lambda: list(cloud.instances), what="the instance to exist")[0]
    first_app = cloud.instances[first].app_id
    wait_for(lambda: len(cloud.calls("GET", "/v1/deployments/")) >= 2, what="the readiness wait")
    assert recorded(server, session_id) == {}  # created, not yet recorded
    server.kill()
    cloud.pre_ready_statuses = ["STARTING"]

    server.start()
    with server.client() as client:
        # The unrecorded instance is deleted (found by its name) and the
        # session starts afresh on a new one.
        record = wait_for(
            lambda: recorded(server, session_id), what="a new instance recorded", timeout=SDK_START
        )
        assert record["instance_id"] != first
        assert first not in cloud.instances
        assert f"/v1/apps/{first_app}" in [c["path"] for c in cloud.calls("DELETE")]
        app_id = record["app_id"]
        wait_for(lambda: "creating" in in_instance(cloud, app_id, "ls"), what="on_create step 2")
        in_instance(cloud, app_id, "touch GO_CREATE; echo ok")
        session = wait_status(client, session_id, "waiting", "failed")
        assert session["status"] == "waiting", session["error"]
        closed = client.delete(f"/v1/sessions/{session_id}").json()
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 1, 1]
    assert cloud.instances == {} and cloud.containers == {}


def test_a_cloud_api_outage_at_restart_is_waited_out(served: Any, cloud: FakeCloud) -> None:
    server = served()
    server.args = ["--reattach-timeout", "60"]
    server.start()
    session_id, record = started_instance(server, cloud)
    app_id = record["app_id"]
    server.kill()
    cloud.outage = 503
    try:
        server.start()
        # The server keeps trying while the API answers 503 ...
        wait_for(lambda: "trying again in" in server.stderr(), what="a retry")
        with server.client() as client:
            assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "starting"
    finally:
        cloud.outage = None
    # ... and re-attaches once it answers: step 2 runs again on the same instance.
    with server.client() as client:
        wait_for(
            lambda: count(cloud, app_id, "create-2.count") == 2,
            what="step 2 again",
            timeout=SDK_START,
        )
        in_instance(cloud, app_id, "touch GO_CREATE; echo ok")
        session = wait_status(client, session_id, "waiting", "failed")
        assert session["status"] == "waiting", session["error"]
        in_instance(cloud, app_id, "touch GO_DESTROY; echo ok")
        assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
    assert cloud.instances == {}


def test_a_cloud_api_that_stays_down_fails_the_session_after_the_reattach_timeout(
    served: Any, cloud: FakeCloud
) -> None:
    server = served()
    server.args = ["--reattach-timeout", "1"]
    server.start()
    session_id, record = started_instance(server, cloud)
    server.kill()
    cloud.outage = 503
    try:
        server.start()
        with server.client() as client:
            failed = wait_status(client, session_id, "failed")
    finally:
        cloud.outage = None
    assert failed["error"].startswith(
        "the server restarted and its sandbox's backend did not answer for 1 s (cloud instance "
        f"{record['instance_id']} cannot be reached ("
    ), failed["error"]
    assert "503" in failed["error"]
    # The instance could not be deleted either (the platform's TTL bounds it): the test does it.
    assert list(cloud.instances) == [record["instance_id"]]
    cloud.expire(record["app_id"])
