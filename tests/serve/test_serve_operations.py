"""Operating ``runner serve``: probes, Prometheus metrics, JSON logs, pages of
sessions, retention.  Real server process, real HTTP, the real SQLite file."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from agent_files import agent_yaml
from serve_process import Server, wait_for, wait_status


def agent_file(tmp_path: Path, *, block: bool = False) -> Path:
    """An agent with one hook of two steps; ``block``: the second waits for GO."""
    wait = f"; while [ ! -f {tmp_path / 'GO'} ]; do sleep 0.05; done" if block else ""
    return agent_yaml(
        tmp_path,
        "agent.yaml",
        f"""\
            version: 1
            agent:
              name: plain
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: prepare
                    on_create:
                      - run: echo one > one.txt
                      - run: touch started{wait}
            """,
    )


def create(client) -> str:  # type: ignore[no-untyped-def]
    created = client.post("/v1/sessions", json={"agent": "plain"})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_probes_need_no_token_and_readyz_fails_while_draining(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path, block=True)], tmp_path, args=["--drain-timeout", "30"])
    try:
        server.start()
        with server.client(token=None) as anonymous:
            assert anonymous.get("/healthz").json() == {"status": "ok"}
            assert anonymous.get("/readyz").json() == {"status": "ready"}
            assert anonymous.head("/readyz").status_code == 200
            assert anonymous.post("/readyz").status_code == 405
            assert anonymous.get("/metrics").status_code == 401  # metrics need the token
        with server.client() as client:
            create(client)
        wait_for(lambda: server.workspaces(), what="the workspace")
        wait_for(lambda: (server.workspaces()[0] / "started").exists(), what="the step")
        stopping = threading.Thread(target=server.terminate)
        stopping.start()
        wait_for(lambda: "stopping: no new sessions" in server.stderr(), what="the drain")
        with server.client(token=None) as anonymous:
            not_ready = anonymous.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json()["error"] == "not_ready"
            assert anonymous.get("/healthz").status_code == 200  # alive, not ready
        (tmp_path / "GO").touch()
        stopping.join(timeout=60)
    finally:
        (tmp_path / "GO").touch()
        server.stop()


def metric(text: str, name: str) -> float:
    """The value of the sample ``name`` (with its labels) in an exposition."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name} in:\n{text}")


def test_metrics_count_sessions_steps_resumes_and_requests(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path)], tmp_path)
    try:
        server.start()
        with server.client() as client:
            closed = create(client)
            wait_status(client, closed, "waiting")
            client.delete(f"/v1/sessions/{closed}")
            left_open = create(client)
            wait_status(client, left_open, "waiting")
            scraped = client.get("/metrics")
        assert scraped.headers["content-type"].startswith("text/plain")
        text = scraped.text
        assert metric(text, 'runner_sessions{state="closed"}') == 1
        assert metric(text, 'runner_sessions{state="waiting"}') == 1
        assert metric(text, 'runner_steps_total{outcome="finished"}') == 4  # 2 steps x 2
        assert metric(text, "runner_session_resumes_total") == 0
        created = 'method="POST",route="/v1/sessions",status="201"'
        assert metric(text, f"runner_http_request_duration_seconds_count{{{created}}}") == 2
        deleted = 'method="DELETE",route="/v1/sessions/{id}",status="200"'
        assert metric(text, f"runner_http_request_duration_seconds_count{{{deleted}}}") == 1
        assert "sess_" not in text  # routes, never session ids, in labels

        server.kill()
        server.start()
        with server.client() as client:
            wait_status(client, left_open, "waiting")
            text = client.get("/metrics").text
        assert metric(text, "runner_session_resumes_total") == 1
    finally:
        server.stop()


def test_log_format_json_writes_one_object_a_line(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path)], tmp_path, args=["--log-format", "json"])
    with server, server.client() as client:
        client.get("/v1/sessions")
        client.get("/v1/nothing")
    records = [json.loads(line) for line in server.stderr().splitlines() if line.strip()]
    assert any("serving plain on http://127.0.0.1:" in r["message"] for r in records)
    request = next(r for r in records if r.get("path") == "/v1/sessions")
    assert request["method"] == "GET" and request["status"] == 200
    assert request["level"] == "info" and request["time"].endswith("Z")
    assert isinstance(request["duration_ms"], float)
    assert any(r["message"].startswith("stopped;") for r in records)


def test_sessions_come_in_pages_with_a_cursor(tmp_path: Path) -> None:
    with Server([agent_file(tmp_path)], tmp_path) as server, server.client() as client:
        ids = [create(client) for _ in range(5)]
        seen: list[str] = []
        pages = []
        query = {"limit": "2"}
        while True:
            page = client.get("/v1/sessions", params=query).json()
            pages.append(len(page["sessions"]))
            seen += [s["id"] for s in page["sessions"]]
            if "next" not in page:
                break
            query = {"limit": "2", "after": page["next"]}
        assert pages == [2, 2, 1]
        assert seen == ids  # oldest first, each once
        assert [s["id"] for s in client.get("/v1/sessions").json()["sessions"]] == ids
        for bad in ({"limit": "0"}, {"limit": "1001"}, {"limit": "x"}, {"after": "%%%"}):
            refused = client.get("/v1/sessions", params=bad)
            assert refused.status_code == 400, bad
            assert refused.json()["error"] == "bad_request"


def test_retain_days_deletes_closed_sessions_and_their_events(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path)], tmp_path)
    try:
        server.start()
        with server.client() as client:
            closed = create(client)
            wait_status(client, closed, "waiting")
            client.delete(f"/v1/sessions/{closed}")
            kept = create(client)
            wait_status(client, kept, "waiting")
        server.stop()
        server.args += ["--retain-days", "0"]
        server.start()
        with server.client() as client:
            wait_for(
                lambda: client.get(f"/v1/sessions/{closed}").status_code == 404,
                what="the closed session to be deleted",
            )
            assert client.get(f"/v1/sessions/{kept}").json()["status"] == "waiting"
        db = sqlite3.connect(server.output_dir / "runner-serve.db")
        try:
            for table in ("events", "steps"):
                count = db.execute(
                    f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", (closed,)
                ).fetchone()[0]
                assert count == 0, table
            assert db.execute(
                "SELECT COUNT(*) FROM events WHERE session_id = ?", (kept,)
            ).fetchone()[0]
        finally:
            db.close()
        assert "deleted 1 session(s) closed more than 0 day(s) ago" in server.stderr()
    finally:
        server.stop()


def test_readyz_is_not_ready_while_the_database_does_not_answer(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """The server's connection for reads and writes is cut (its claims
    connection lives on, and the long --claim-interval keeps the server from
    noticing by itself: a server that loses its claims stops, exit 2)."""
    import psycopg

    server = Server(
        [agent_file(tmp_path)],
        tmp_path,
        db=postgres_dsn,  # type: ignore[arg-type]
        args=["--claim-interval", "3600"],
    )
    with server, server.client(token=None) as probe:
        assert probe.get("/readyz").status_code == 200
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            (cut,) = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = %s",
                (f"runner serve {server.process.pid}",),
            ).fetchone()
        assert cut == 1
        ready = probe.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["error"] == "not_ready"
        assert ready.json()["message"].startswith("the database does not answer")
        assert probe.get("/healthz").status_code == 200  # alive, not ready
