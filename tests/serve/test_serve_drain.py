"""``runner serve`` stopped with SIGTERM (what systemd, Kubernetes and every
rolling deploy send): no session fails because the server stopped.

New sessions and messages get 503 at once; a running step gets
``--drain-timeout`` seconds to finish; one still running then is left as a
SIGKILL leaves it, and the next start resumes it.  Counter files prove how
often each step ran."""

from __future__ import annotations

from pathlib import Path

from agent_files import agent_yaml
from serve_process import Server, lines, wait_for, wait_status

BLOCK = "touch {flag}; while [ ! -f {go} ]; do sleep 0.05; done"


def blocking_file(tmp_path: Path, *, then: str = "") -> Path:
    return agent_yaml(
        tmp_path,
        "slow.yaml",
        f"""\
            version: 1
            agent:
              name: slow
              model: local-model
              environment:
                sandbox: local
                default_exec_timeout_seconds: 120
                hooks:
                  - name: counted
                    on_create:
                      - run: echo ran >> create-1.count
                      - run: echo ran >> create-2.count; {BLOCK.format(flag="creating", go=tmp_path / "GO")}
            """,
        then,
    )


def three_steps_file(tmp_path: Path) -> Path:
    """Step 2 blocks on ``GO``, step 3 on ``GO_3``."""
    third = BLOCK.format(flag="third", go=tmp_path / "GO_3")
    return blocking_file(tmp_path, then=f"          - run: echo ran >> create-3.count; {third}\n")


def start_blocked(server: Server) -> tuple[str, Path]:
    with server.client() as client:
        created = client.post("/v1/sessions", json={"agent": "slow", "inputs": {}})
        assert created.status_code == 201, created.text
    workspace = wait_for(lambda: server.workspaces(), what="the workspace")[0]
    wait_for(lambda: (workspace / "creating").exists(), what="step 2 to block")
    return created.json()["id"], workspace


def test_sigterm_lets_the_running_step_finish_and_refuses_new_work(tmp_path: Path) -> None:
    server = Server([blocking_file(tmp_path)], tmp_path, args=["--drain-timeout", "30"])
    try:
        server.start()
        session_id, workspace = start_blocked(server)
        stopping = server.drain_in_background()
        with server.client() as client:
            refused = client.post("/v1/sessions", json={"agent": "slow", "inputs": {}})
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"] == "stopping"
            assert refused.headers["retry-after"]
        assert stopping.is_alive(), "the server waits for the running step"
        (tmp_path / "GO").touch()
        assert stopping.join(timeout=60) == [0], server.stderr()
        assert "stopped; sessions left open resume at the next start" in server.stderr()

        server.start()
        with server.client() as client:
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
        assert lines(workspace / "create-2.count") == 1  # finished before the stop
        assert lines(workspace / "create-1.count") == 1
    finally:
        (tmp_path / "GO").touch()
        server.stop()


def test_a_step_still_running_after_the_drain_resumes_at_the_next_start(tmp_path: Path) -> None:
    server = Server([blocking_file(tmp_path)], tmp_path, args=["--drain-timeout", "0.5"])
    try:
        server.start()
        session_id, workspace = start_blocked(server)
        assert server.terminate() == 0
        assert "1 step(s) still running after 0.5 s" in server.stderr()

        server.start()
        assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
        with server.client() as client:
            # not failed by the stop: the cut-off step runs again, step 1 never
            assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "starting"
            wait_for(lambda: lines(workspace / "create-2.count") == 2, what="step 2 again")
            (tmp_path / "GO").touch()
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
        assert lines(workspace / "create-1.count") == 1
    finally:
        (tmp_path / "GO").touch()
        server.stop()


def test_a_drain_stops_a_starting_session_before_its_next_step(tmp_path: Path) -> None:
    """The drain waits for the running step, not for the rest of
    ``on_create``: the session stops before step 3, the server exits, and
    the next start runs step 3, once (steps 1 and 2 not again)."""
    server = Server([three_steps_file(tmp_path)], tmp_path, args=["--drain-timeout", "300"])
    try:
        server.start()
        session_id, workspace = start_blocked(server)
        stopping = server.drain_in_background()
        (tmp_path / "GO").touch()  # step 2 ends; step 3 (blocking on GO_3) must not start
        assert stopping.join(timeout=300) == [0], server.stderr()
        assert lines(workspace / "create-3.count") == 0
        assert "1 session(s) stopped between two steps of on_create" in server.stderr()

        (tmp_path / "GO_3").touch()
        server.start()
        with server.client() as client:
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
        counts = [lines(workspace / f"create-{n}.count") for n in (1, 2, 3)]
        assert counts == [1, 1, 1]
    finally:
        (tmp_path / "GO").touch()
        (tmp_path / "GO_3").touch()
        server.stop()
