"""``runner serve --max-sessions N``: open sessions (not closed or failed) are
counted; one more ``POST /v1/sessions`` is answered 503 with ``Retry-After``
and creates nothing, no sandbox and no row.  Real server, real HTTP."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent_files import agent_yaml
from conftest import RUNNER_CLI
from serve_process import Server, wait_for, wait_status


def limited_file(tmp_path: Path) -> Path:
    return agent_yaml(
        tmp_path,
        "limited.yaml",
        """\
            version: 1
            inputs:
              acme.mode:
                as: mode
                required: false
                schema:
                  type: object
                  properties:
                    fail: {type: boolean, default: false}
            agent:
              name: limited
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: maybe-fail
                    on_create:
                      - run: test {{ mode.fail }} = false
            """,
    )


def create(client, **body):  # type: ignore[no-untyped-def]
    return client.post("/v1/sessions", json=body)


def assert_refused(response, limit: int) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "error": "too_many_sessions",
        "message": f"this server already has {limit} open sessions (--max-sessions); "
        "close one (DELETE /v1/sessions/{id}) or retry later",
    }


def test_a_session_beyond_the_limit_gets_503_and_nothing_is_created(tmp_path: Path) -> None:
    server = Server([limited_file(tmp_path)], tmp_path, args=["--max-sessions", "2"])
    with server, server.client() as client:
        assert "at most 2 open sessions" in server.stderr()
        first = create(client, idempotency_key="first").json()["id"]
        second = create(client).json()["id"]
        for session_id in (first, second):
            assert wait_status(client, session_id, "waiting", "failed")["status"] == "waiting"
        workspaces = server.workspaces()
        assert len(workspaces) == 2

        assert_refused(create(client), 2)
        assert_refused(create(client, idempotency_key="third"), 2)
        # Nothing was created: no row, no sandbox, no folder for a session.
        listed = client.get("/v1/sessions").json()["sessions"]
        assert sorted(s["id"] for s in listed) == sorted([first, second])
        assert server.workspaces() == workspaces
        assert sorted(p.name for p in server.output_dir.iterdir() if p.is_dir()) == []
        # A replayed idempotency key creates nothing: it is answered at the limit.
        replayed = create(client, idempotency_key="first")
        assert replayed.status_code == 201
        assert replayed.headers["idempotent-replayed"] == "true"
        assert replayed.json()["id"] == first

        # A closed session frees its place.
        assert client.delete(f"/v1/sessions/{first}").json()["status"] == "closed"
        third = create(client, idempotency_key="third")
        assert third.status_code == 201, third.text
        assert wait_status(client, third.json()["id"], "waiting")["status"] == "waiting"
        assert_refused(create(client), 2)


def test_failed_sessions_do_not_count_and_the_limit_is_in_the_openapi_document(
    tmp_path: Path,
) -> None:
    server = Server([limited_file(tmp_path)], tmp_path, args=["--max-sessions", "1"])
    with server, server.client() as client:
        for _ in range(3):
            failed = create(client, inputs={"acme.mode": {"fail": True}}).json()["id"]
            assert wait_status(client, failed, "waiting", "failed")["status"] == "failed"
        session_id = create(client).json()["id"]
        wait_status(client, session_id, "waiting")
        assert_refused(create(client), 1)

        document = client.get("/openapi.json").json()
        answer = document["paths"]["/v1/sessions"]["post"]["responses"]["503"]
        assert answer["description"].startswith(
            "the server already has its limit of 1 open sessions (--max-sessions"
        )
        assert answer["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }
        assert answer["headers"]["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}


def test_resumed_sessions_count_and_are_never_dropped_for_the_limit(tmp_path: Path) -> None:
    server = Server([limited_file(tmp_path)], tmp_path, args=["--max-sessions", "2"])
    try:
        server.start()
        with server.client() as client:
            ids = [create(client).json()["id"] for _ in range(2)]
            for session_id in ids:
                wait_status(client, session_id, "waiting")
        server.kill()
        server.args = ["--max-sessions", "1"]  # fewer places than sessions left open
        server.start()
        with server.client() as client:
            listed = wait_for(
                lambda: [s["status"] for s in client.get("/v1/sessions").json()["sessions"]],
                what="the sessions",
            )
            assert listed == ["waiting", "waiting"]
            assert_refused(create(client), 1)
            client.delete(f"/v1/sessions/{ids[0]}")
            assert_refused(create(client), 1)  # still one open: the limit
            client.delete(f"/v1/sessions/{ids[1]}")
            assert create(client).status_code == 201
    finally:
        server.stop()


def test_max_sessions_below_one_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [*RUNNER_CLI, "serve", str(limited_file(tmp_path)), "--max-sessions", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--max-sessions" in done.stderr
    help_text = subprocess.run(
        [*RUNNER_CLI, "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "[default: 100; x>=1]" in help_text
