"""``runner serve`` with ``sandbox: docker`` after a SIGKILL: the session's
container is durable (owned by the server's database, not its process), so
the restarted server re-attaches the same container; a container removed or
stopped by hand fails its session cleanly; ``runner gc`` keeps a durable
container until its expiry passes.

Real parts only: the installed CLI as the server, a real HTTP client, real
containers of the test image.  Counter files in the container's workspace
prove how often each step ran; a step blocks on a file the test creates in
the container, so the kill lands at a known point.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_files import agent_yaml
from conftest import RUNNER_CLI, TEST_IMAGE
from serve_process import Server, lines, sse_events, wait_for, wait_status

from runner.sandboxes.docker.environment import LABEL_DURABLE

pytestmark = pytest.mark.docker

LABEL_SESSION = "sandbox-runner.session-id"
LABEL_EXPIRES = "sandbox-runner.expires-at"
BLOCK = "touch {flag}; while [ ! -f {go} ]; do sleep 0.05; done"


def docker_file(tmp_path: Path, *, ttl: int = 600, pool: int = 0) -> Path:
    return agent_yaml(
        tmp_path,
        "durable-docker.yaml",
        f"""\
            version: 1
            agent:
              name: durable
              model: local-model
              environment:
                sandbox: docker
                image: {TEST_IMAGE}
                ttl_seconds: {ttl}
                pool: {pool}
                default_exec_timeout_seconds: 120
                hooks:
                  - name: counted
                    on_create:
                      - run: echo ran >> create-1.count
                      - run: echo ran >> create-2.count; {BLOCK.format(flag="creating", go="GO_CREATE")}
                      - run: echo ran >> create-3.count
                    on_destroy:
                      - run: echo ran >> destroy-1.count; {BLOCK.format(flag="destroying", go="GO_DESTROY")}
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


class Db:
    """Reads the server's SQLite file (read-only; the server may be running)."""

    def __init__(self, server: Server) -> None:
        self.path = server.output_dir / "runner-serve.db"

    def _query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True) as db:
            return db.execute(sql, args).fetchall()

    def owner(self) -> str:
        ((value,),) = self._query("SELECT value FROM meta WHERE key = 'id'")
        return value

    def container_id(self, session_id: str) -> str | None:
        rows = self._query("SELECT sandbox FROM sessions WHERE id = ?", session_id)
        record = json.loads(rows[0][0]) if rows and rows[0][0] else {}
        return record.get("container_id")


def durable_containers(docker_client: Any, owner: str) -> list[Any]:
    return docker_client.containers.list(all=True, filters={"label": f"{LABEL_DURABLE}={owner}"})


def exists(docker_client: Any, container_id: str) -> bool:
    import docker.errors

    try:
        docker_client.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


def running(container: Any) -> bool:
    container.reload()
    return container.status == "running"


def in_container(container: Any, command: str) -> str:
    exit_code, output = container.exec_run(["sh", "-c", command], workdir="/workspace")
    assert exit_code == 0, output
    return output.decode()


def count(container: Any, name: str) -> int:
    return int(in_container(container, f"cat {name} 2>/dev/null | wc -l").strip())


@pytest.fixture
def served(tmp_path: Path, docker_client: Any):
    """A server (not started) and, at the end, every container its database owns
    removed: a test asserts what should be left before this runs."""
    servers: list[Server] = []

    def make(**options: Any) -> Server:
        server = Server([docker_file(tmp_path, **options)], tmp_path)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
        db = Db(server)
        if db.path.exists():
            for container in durable_containers(docker_client, db.owner()):
                container.remove(force=True, v=True)


def start_session(server: Server) -> str:
    with server.client() as client:
        created = client.post("/v1/sessions", json={"agent": "durable"})
        assert created.status_code == 201, created.text
    return created.json()["id"]


def recorded_container(server: Server, session_id: str, docker_client: Any) -> Any:
    container_id = wait_for(
        lambda: Db(server).container_id(session_id), what="the container to be recorded"
    )
    return docker_client.containers.get(container_id)


def waiting_session(server: Server, docker_client: Any) -> tuple[str, Any, str]:
    """(session id, its container, the journal's owner id) of a new session
    let through its on_create (step 2 waits for GO_CREATE), now waiting."""
    session_id = start_session(server)
    container = recorded_container(server, session_id, docker_client)
    owner = Db(server).owner()
    wait_for(lambda: "creating" in in_container(container, "ls"), what="on_create step 2")
    in_container(container, "touch GO_CREATE")
    with server.client() as client:
        wait_status(client, session_id, "waiting")
    return session_id, container, owner


def test_a_docker_session_killed_mid_on_create_resumes_in_the_same_container(
    served: Any, docker_client: Any
) -> None:
    server = served().start()
    session_id = start_session(server)
    container = recorded_container(server, session_id, docker_client)
    owner = Db(server).owner()
    assert container.labels[LABEL_DURABLE] == owner
    wait_for(lambda: "creating" in in_container(container, "ls"), what="on_create step 2")
    server.kill()
    container.reload()
    assert container.status == "running"  # the server's death did not take it

    server.start()
    assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
    with server.client() as client:
        assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "starting"
        # The cut-off step 2 runs again, in the same container; step 1 never again.
        wait_for(lambda: count(container, "create-2.count") == 2, what="step 2 to run again")
        in_container(container, "touch GO_CREATE")
        session = wait_status(client, session_id, "waiting", "failed")
        assert session["status"] == "waiting", session["error"]
        assert Db(server).container_id(session_id) == container.id
        assert [c.id for c in durable_containers(docker_client, owner)] == [container.id]
        assert [count(container, f"create-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]
        in_container(container, "touch GO_DESTROY")
        closed = client.delete(f"/v1/sessions/{session_id}").json()
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]
    assert lines(saved / "destroy-1.count") == 1  # on_destroy ran, in that container
    assert not exists(docker_client, container.id)
    assert durable_containers(docker_client, owner) == []


@pytest.mark.parametrize("by_hand", ["removed", "stopped"])
def test_a_docker_session_whose_container_went_away_fails_cleanly_after_a_restart(
    served: Any, docker_client: Any, by_hand: str
) -> None:
    server = served().start()
    session_id, container, owner = waiting_session(server, docker_client)
    server.kill()
    if by_hand == "removed":
        container.remove(force=True, v=True)
    else:
        container.kill()
        container.wait(timeout=30)
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
        short = container.id[:12]
        reason = (
            f"container {short} no longer exists"
            if by_hand == "removed"
            else f"container {short} is not running (status exited"
        )
        assert failed["error"].startswith(
            f"the server restarted and its sandbox is gone ({reason}"
        ), failed["error"]
        refused = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "hi"})
        assert refused.status_code == 409
        assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "failed"
    # Nothing left behind: a stopped container of the session was removed too.
    assert not exists(docker_client, container.id)
    assert durable_containers(docker_client, owner) == []


def runner_gc() -> str:
    result = subprocess.run([*RUNNER_CLI, "gc"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_runner_gc_keeps_a_durable_container_of_a_dead_server_until_it_expires(
    served: Any, docker_client: Any
) -> None:
    server = served(ttl=30).start()
    session_id = start_session(server)
    container = recorded_container(server, session_id, docker_client)
    wait_for(lambda: "creating" in in_container(container, "ls"), what="on_create step 2")
    server.kill()
    expires_at = float(container.labels[LABEL_EXPIRES])

    gc_output = runner_gc()
    assert time.time() < expires_at, "too slow: the container expired before the first gc"
    assert container.id[:12] not in gc_output
    container.reload()
    assert container.status == "running"

    # The TTL still bounds it: its clock stops it at its expiry, and gc then removes it.
    wait_for(lambda: time.time() >= expires_at, what="the expiry", timeout=60)
    wait_for(lambda: not running(container), what="the container's own clock", timeout=30)
    # Judged by what is left, not by this gc's output: another worker's gc may sweep it first.
    runner_gc()
    assert not exists(docker_client, container.id)


def test_a_restarted_server_removes_its_pools_idle_containers_and_keeps_its_sessions(
    served: Any, docker_client: Any
) -> None:
    server = served(pool=2).start()
    owner = ""
    sessions: dict[str, Any] = {}  # session id -> its container

    def idle_pool() -> list[str]:
        mine = {c.id for c in sessions.values()}
        return [
            c.id
            for c in durable_containers(docker_client, owner)
            if c.labels[LABEL_SESSION].startswith("pool-") and c.id not in mine
        ]

    for _ in range(2):  # the second claims a pooled container
        session_id, container, owner = waiting_session(server, docker_client)
        sessions[session_id] = container
        wait_for(lambda: len(idle_pool()) == 2, what="the pool to fill", timeout=120)
    pooled = list(sessions.values())[1]
    assert pooled.labels[LABEL_SESSION].startswith("pool-")  # labels stay as made
    server.kill()
    assert len(durable_containers(docker_client, owner)) == 4

    server.start()
    # Before it listens, the server removed what no open session records.
    kept = {c.id for c in durable_containers(docker_client, owner)}
    assert kept == {c.id for c in sessions.values()}
    with server.client() as client:
        for session_id, container in sessions.items():
            assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "waiting"
            in_container(container, "touch GO_DESTROY")

            def deleted() -> dict[str, Any] | None:
                # 409 ("try again") while the server is still re-attaching it.
                answer = client.delete(f"/v1/sessions/{session_id}")  # noqa: B023
                assert answer.status_code in (200, 409), answer.text
                return answer.json() if answer.status_code == 200 else None

            closed = wait_for(deleted, what="the session to be closed")
            assert closed["status"] == "closed", closed["error"]
            saved = server.output_dir / session_id
            assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 1, 1]
            assert lines(saved / "destroy-1.count") == 1  # on_destroy ran in it
    server.stop()
    assert durable_containers(docker_client, owner) == []


def test_a_docker_session_killed_mid_on_destroy_finishes_closing_in_the_same_container(
    served: Any, docker_client: Any
) -> None:
    server = served().start()
    session_id, container, owner = waiting_session(server, docker_client)

    def kill_when_destroying() -> None:
        wait_for(lambda: "destroying" in in_container(container, "ls"), what="on_destroy")
        server.kill()

    killer = threading.Thread(target=kill_when_destroying)
    killer.start()
    try:
        with server.client() as client, pytest.raises(httpx.TransportError):
            client.delete(f"/v1/sessions/{session_id}")  # the server dies under it
    finally:
        killer.join()
    container.reload()
    assert container.status == "running"

    server.start()
    with server.client() as client:
        wait_for(lambda: count(container, "destroy-1.count") == 2, what="on_destroy again")
        in_container(container, "touch GO_DESTROY")
        closed = wait_status(client, session_id, "closed", "failed")
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 1, 1]
    assert lines(saved / "destroy-1.count") == 2  # the cut-off step, run again
    assert not exists(docker_client, container.id)
    assert durable_containers(docker_client, owner) == []


def test_a_docker_session_that_cannot_resume_has_its_container_removed(
    served: Any, docker_client: Any
) -> None:
    server = served().start()
    session_id, container, owner = waiting_session(server, docker_client)
    server.kill()
    # Its journal is keyed by positions in the file: another file cannot replay it.
    server.files[0].write_text(server.files[0].read_text() + "# edited\n")
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
    assert "changed since the session started" in failed["error"]
    assert not exists(docker_client, container.id)  # no hook ran; the container is gone
    assert durable_containers(docker_client, owner) == []


def test_a_python_agent_on_docker_resumes_in_its_container_replaying_its_calls(
    tmp_path: Path, docker_client: Any
) -> None:
    """``--agent`` with a ``LocalDockerSandbox``: the container is durable like a
    YAML agent's, and the cut-off hook point replays its finished sandbox calls."""
    (tmp_path / "docker_agents.py").write_text(
        textwrap.dedent(
            f"""\
            import runner


            class Stepwise(runner.SandboxHook):
                async def on_create(self, ctx):
                    await ctx.sandbox.execute("echo ran >> call-1.count")
                    await ctx.sandbox.execute(
                        "echo ran >> call-2.count; " + {BLOCK.format(flag="creating", go="GO_CREATE")!r}
                    )
                    await ctx.sandbox.execute("echo ran >> call-3.count")

                async def on_destroy(self, ctx):
                    await ctx.sandbox.save_file("call-1.count", {str(tmp_path / "saved-1.count")!r})


            agent = runner.Agent(
                model="local-model",
                environment=runner.LocalDockerSandbox(
                    image={TEST_IMAGE!r}, hooks=[Stepwise()], default_exec_timeout_seconds=120
                ),
            )
            """
        )
    )
    server = Server([], tmp_path, args=["--agent", "docker_agents:agent"])
    owner = None
    try:
        server.start()
        session_id = start_session_of(server, "agent")
        container = recorded_container(server, session_id, docker_client)
        owner = Db(server).owner()
        assert container.labels[LABEL_DURABLE] == owner
        wait_for(lambda: "creating" in in_container(container, "ls"), what="call 2")
        server.kill()

        server.start()
        assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
        wait_for(lambda: count(container, "call-2.count") == 2, what="call 2 to run again")
        in_container(container, "touch GO_CREATE")
        with server.client() as client:
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
            assert [count(container, f"call-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]
            closed = client.delete(f"/v1/sessions/{session_id}").json()
        assert closed["status"] == "closed", closed["error"]
        assert lines(tmp_path / "saved-1.count") == 1
        assert not exists(docker_client, container.id)
    finally:
        server.stop()
        for leftover in durable_containers(docker_client, owner) if owner else []:
            leftover.remove(force=True, v=True)


def start_session_of(server: Server, agent: str) -> str:
    with server.client() as client:
        created = client.post("/v1/sessions", json={"agent": agent})
        assert created.status_code == 201, created.text
    return created.json()["id"]


@pytest.mark.parametrize("by_hand", ["removed", "stopped"])
def test_a_docker_session_whose_container_goes_away_during_a_turn_fails(
    tmp_path: Path, docker_client: Any, by_hand: str
) -> None:
    """Not only at a restart: the turn that finds the container gone fails
    the session (a ``sandbox_gone`` event), and what is left is removed."""
    from chat_server import ChatServer, assistant

    block = "touch started; while [ ! -f GO ]; do sleep 0.05; done"
    replies = [assistant(None, ("call00001", "bash", {"command": block})), assistant("Done.")]
    config = tmp_path / "chat-docker.yaml"
    with ChatServer(replies) as model:
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                agent:
                  name: chat
                  model: local-model
                  base_url: {model.url}
                  environment:
                    sandbox: docker
                    image: {TEST_IMAGE}
                """
            )
        )
        with Server([config], tmp_path) as server, server.client() as client:
            session_id = client.post("/v1/sessions", json={"agent": "chat"}).json()["id"]
            wait_status(client, session_id, "waiting")
            container = recorded_container(server, session_id, docker_client)
            try:
                turn_in_a_vanishing_container(client, session_id, container, by_hand)
            finally:
                left = exists(docker_client, container.id)
                if left:  # not left behind when the test fails
                    container.remove(force=True, v=True)
    assert not left  # what was left of it (a stopped container) was removed


def turn_in_a_vanishing_container(
    client: httpx.Client, session_id: str, container: Any, by_hand: str
) -> None:
    """A turn whose tool call's container is removed or stopped under it."""
    from serve_process import sse_events

    sending = threading.Thread(
        target=client.post,
        args=(f"/v1/sessions/{session_id}/messages",),
        kwargs={"json": {"text": "go"}},
    )
    sending.start()
    try:
        wait_for(lambda: "started" in in_container(container, "ls"), what="the tool call")
        if by_hand == "removed":
            container.remove(force=True, v=True)
        else:
            container.kill()
    finally:
        sending.join()
    failed = wait_status(client, session_id, "failed", "waiting")
    assert failed["status"] == "failed"
    assert failed["error"].startswith("the session's sandbox is gone (container "), failed
    [gone] = [e for e in sse_events(client, session_id) if e["event"] == "sandbox_gone"]
    assert gone["reason"] in failed["error"]


def test_a_command_its_server_left_running_in_a_container_dies_at_its_own_timeout(
    tmp_path: Path, docker_client: Any, image: tuple[str, str]
) -> None:
    """The exec helper in the container (Python, or the shell one in the
    busybox image) outlives the killed server until its commands in flight
    reach their deadlines, and kills them then (seen from outside: ``docker
    top``); no server is started again."""
    config = tmp_path / "long-docker.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            agent:
              name: long
              model: local-model
              environment:
                sandbox: docker
                image: {image[1]}
                hooks:
                  - name: long
                    on_create:
                      - run: touch started; sleep 601
                        timeout_seconds: 2
            """
        )
    )
    server = Server([config], tmp_path)
    container = None
    try:
        server.start()
        with server.client() as client:
            session_id = client.post("/v1/sessions", json={"agent": "long"}).json()["id"]
        container = recorded_container(server, session_id, docker_client)
        wait_for(lambda: "started" in in_container(container, "ls"), what="the step to start")
        server.kill()

        def sleeping() -> bool:
            return any("sleep 601" in " ".join(p) for p in container.top()["Processes"] or [])

        wait_for(lambda: not sleeping(), what="the cut-off command to be killed")
    finally:
        server.stop()
        if container is not None:
            container.remove(force=True, v=True)


def test_a_docker_session_deleted_mid_on_create_leaves_no_container(
    served: Any, docker_client: Any
) -> None:
    """``DELETE`` while step 2 blocks: answered without waiting for it, the
    container removed (and with it the step's command), no ``on_destroy``
    (the hook's ``on_create`` did not finish), nothing left on the host."""
    server = served().start()
    session_id = start_session(server)
    container = recorded_container(server, session_id, docker_client)
    owner = Db(server).owner()
    wait_for(lambda: "creating" in in_container(container, "ls"), what="on_create step 2")
    with server.client() as client:
        closed = client.delete(f"/v1/sessions/{session_id}")
        assert closed.status_code == 200, closed.text
        assert (closed.json()["status"], closed.json()["error"]) == ("closed", None)
        kinds = [e["event"] for e in sse_events(client, session_id)]
    assert not exists(docker_client, container.id)
    assert durable_containers(docker_client, owner) == []
    assert "hook_cancelled" in kinds and "session_started" not in kinds
    assert kinds.count("hook_started") == 1  # on_create only: no on_destroy ran
    assert kinds[-2:] == ["sandbox_deleted", "session_closed"]
    assert not (server.output_dir / session_id).exists()  # no save: step ran
    assert list(server.tmp.iterdir()) == []
