"""``runner serve``: the HTTP API, against a real server process and a real client."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import textwrap
from pathlib import Path

import httpx
import jsonschema
import pytest
from agent_files import agent_yaml
from conftest import RUNNER_CLI
from serve_process import TOKEN, Server, sse_events, wait_status

from runner.core.events import events_schema

SECRET_INPUT = "canary-input-5f3a9c1e7b"
SECRET_ENV = "canary-env-8d2b6e4f0a"
BAD_REPOSITORY = "acme.repository.repository=not a repo"


def agent_file(tmp_path: Path, *, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    return agent_yaml(
        tmp_path,
        "agent.yaml",
        f"""\
            version: 1
            inputs:
              acme.repository:
                as: repo
                no_leading_dash: true
                schema:
                  type: object
                  properties:
                    repository: {{type: string, pattern: "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"}}
                  required: [repository]
              acme.login:
                as: login
                secret: true
                required: false
                schema:
                  type: object
                  properties:
                    password: {{type: string, default: none-given}}
            secrets:
              API_KEY:
                from_env: SERVE_TEST_API_KEY
            agent:
              name: helper
              model: local-model
              base_url: {base_url}
              instructions: Answer briefly.
              environment:
                sandbox: local
                hooks:
                  - name: seed
                    on_create:
                      - run: printf '%s\\n' {{{{ repo.repository }}}} > REPOSITORY
                      - run: printf '%s' "$KEY" > key.txt
                        secrets: {{KEY: API_KEY}}
                      - write: login.txt
                        content: "{{{{ login.password }}}}"
                    on_destroy:
                      - save: REPOSITORY
                        to: saved-repository.txt
            """,
    )


@pytest.fixture
def server(tmp_path: Path):
    with Server(
        [agent_file(tmp_path)], tmp_path, env={"SERVE_TEST_API_KEY": SECRET_ENV}
    ) as running:
        yield running


def create(client: httpx.Client, repository: str = "acme/api", **body: object) -> httpx.Response:
    return client.post(
        "/v1/sessions",
        json={"agent": "helper", "inputs": {"acme.repository": {"repository": repository}}, **body},
    )


def test_requests_without_the_token_or_with_a_wrong_one_get_401(server: Server) -> None:
    for token in (None, "wrong-token-0123456789", TOKEN + "x", TOKEN[:-1]):
        with server.client(token) as client:
            for method, path in [
                ("GET", "/openapi.json"),
                ("GET", "/v1/sessions"),
                ("POST", "/v1/sessions"),
                ("GET", "/v1/sessions/sess_" + "0" * 32),
            ]:
                response = client.request(method, path, json={"agent": "helper"})
                assert response.status_code == 401, (token, method, path)
                assert response.json()["error"] == "unauthorized"
                assert response.headers["www-authenticate"] == "Bearer"
    with server.client() as client:
        assert client.get("/v1/sessions").json() == {"sessions": []}  # nothing was created


def test_openapi_document_describes_every_route(server: Server) -> None:
    with server.client() as client:
        document = client.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert {
        path: sorted(ops.keys() - {"parameters"}) for path, ops in document["paths"].items()
    } == {
        "/openapi.json": ["get"],
        "/v1/sessions": ["get", "post"],
        "/v1/sessions/{id}": ["delete", "get"],
        "/v1/sessions/{id}/messages": ["post"],
        "/v1/sessions/{id}/events": ["get"],
        "/healthz": ["get"],
        "/readyz": ["get"],
        "/metrics": ["get"],
    }
    operations = [
        op for ops in document["paths"].values() for key, op in ops.items() if key != "parameters"
    ]
    ids = [op["operationId"] for op in operations]
    assert len(set(ids)) == len(ids) == 10
    assert all("405" in op["responses"] for op in operations)
    listing = document["paths"]["/v1/sessions"]["get"]
    assert [p["name"] for p in listing["parameters"]] == ["limit", "after"]
    create_schema = document["components"]["schemas"]["CreateSession"]
    assert create_schema["properties"]["agent"]["enum"] == ["helper"]
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_a_session_is_created_listed_read_streamed_and_deleted(server: Server) -> None:
    with server.client() as client:
        created = create(client)
        assert created.status_code == 201
        session_id = created.json()["id"]
        assert created.json()["status"] in ("starting", "waiting")
        session = wait_status(client, session_id, "waiting")
        assert session["agent"] == "helper" and session["error"] is None
        assert session["inputs"]["acme.repository"] == {"repository": "acme/api"}
        assert session["owner"] == server.url
        # What GET answers is what the OpenAPI document says a Session is.
        schema = client.get("/openapi.json").json()["components"]["schemas"]["Session"]
        assert sorted(session) == sorted(schema["properties"])
        listed = client.get("/v1/sessions").json()["sessions"]
        assert [s["id"] for s in listed] == [session_id]
        workspace = server.workspaces()[0]
        assert (workspace / "REPOSITORY").read_text() == "acme/api\n"

        deleted = client.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code == 200 and deleted.json()["status"] == "closed"
        saved = server.output_dir / session_id / "saved-repository.txt"
        assert saved.read_text() == "acme/api\n"  # on_destroy ran, writing under DIR/<id>/
        assert not workspace.exists()  # the sandbox was deleted
        assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"

        events = sse_events(client, session_id)  # ends: the session is closed
    schema = events_schema()
    for event in events:
        jsonschema.validate(event, schema)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "session_starting" and kinds[-1] == "session_closed"
    assert kinds.index("session_started") < kinds.index("session_closing")
    assert [e["step"] for e in events if e["event"] == "step_finished"] == [0, 1, 2, 0]


def test_the_event_stream_resumes_after_last_event_id(server: Server) -> None:
    with server.client() as client:
        session_id = create(client).json()["id"]
        wait_status(client, session_id, "waiting")
        client.delete(f"/v1/sessions/{session_id}")
        every = sse_events(client, session_id)
        client.headers["Last-Event-ID"] = "3"
        rest = sse_events(client, session_id)
    assert rest == every[3:]


def test_a_message_runs_a_turn_with_the_model(tmp_path: Path) -> None:
    from chat_server import ChatServer, assistant

    replies = [
        assistant(None, ("c1", "bash", {"command": "cat REPOSITORY"})),
        assistant("It is acme/api."),
    ]
    with ChatServer(replies) as model:
        config = agent_file(tmp_path, base_url=model.url)
        env = {"SERVE_TEST_API_KEY": SECRET_ENV}
        with Server([config], tmp_path, env=env) as server, server.client() as client:
            session_id = create(client).json()["id"]
            wait_status(client, session_id, "waiting")
            answer = client.post(
                f"/v1/sessions/{session_id}/messages", json={"text": "Which repo?"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["turn"] == {
                "status": "completed",
                "text": "It is acme/api.",
                "error": None,
            }
            assert answer.json()["status"] == "waiting"
            assert client.get(f"/v1/sessions/{session_id}").json()["result"]["turn"]["text"] == (
                "It is acme/api."
            )
            client.delete(f"/v1/sessions/{session_id}")
            events = sse_events(client, session_id)
    turn = next(e for e in events if e["event"] == "turn")
    assert (turn["status"], turn["text"]) == ("completed", "It is acme/api.")
    assert model.requests[0]["body"]["messages"][-1] == {"role": "user", "content": "Which repo?"}


def test_the_same_idempotency_key_and_body_give_the_same_session(server: Server) -> None:
    with server.client() as client:
        first = create(client, idempotency_key="deploy-42")
        again = create(client, idempotency_key="deploy-42")
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.json()["id"] == first.json()["id"]
        assert again.headers["idempotent-replayed"] == "true"
        assert "idempotent-replayed" not in first.headers
        other = create(client, "acme/web", idempotency_key="deploy-42")
        assert other.status_code == 409
        assert other.json()["error"] == "idempotency_conflict"
        assert first.json()["id"] in other.json()["message"]
        assert len(client.get("/v1/sessions").json()["sessions"]) == 1
        wait_status(client, first.json()["id"], "waiting")
    assert len(server.workspaces()) == 1  # one sandbox, not three


def test_invalid_inputs_get_400_with_the_clis_message_and_create_nothing(
    server: Server, tmp_path: Path
) -> None:
    cli = subprocess.run(
        [*RUNNER_CLI, "run", str(server.files[0]), "--quiet", "--input", BAD_REPOSITORY],
        capture_output=True,
        text=True,
        timeout=60,
        env={**server.env, "SERVE_TEST_API_KEY": SECRET_ENV},
        cwd=tmp_path,
    )
    assert cli.returncode == 2
    cli_message = cli.stderr.strip().splitlines()[-1].removeprefix("runner: ")
    with server.client() as client:
        response = create(client, "not a repo")
        assert response.status_code == 400
        assert response.json() == {"error": "bad_input", "message": cli_message}
        missing = client.post("/v1/sessions", json={"agent": "helper", "inputs": {}})
        assert missing.status_code == 400
        assert "needs session input 'acme.repository'" in missing.json()["message"]
        unknown = client.post("/v1/sessions", json={"agent": "helper", "inputs": {"acme.repo": {}}})
        assert unknown.json()["message"] == (
            "inputs: unknown input 'acme.repo'; did you mean 'acme.repository'?"
        )
        reserved = client.post(
            "/v1/sessions", json={"agent": "helper", "inputs": {"runner.secrets": {}}}
        )
        assert reserved.status_code == 400  # the server's own secrets cannot be overridden
        no_agent = client.post("/v1/sessions", json={"agent": "nobody"})
        assert no_agent.status_code == 400 and no_agent.json()["error"] == "unknown_agent"
        not_json = client.post("/v1/sessions", content=b"{not json")
        assert not_json.status_code == 400 and not_json.json()["error"] == "bad_request"
        assert client.get("/v1/sessions").json() == {"sessions": []}
    assert server.workspaces() == []


def test_an_unknown_session_or_route_gets_404(server: Server) -> None:
    missing = "sess_" + "ab" * 16
    with server.client() as client:
        for method, path in [
            ("GET", f"/v1/sessions/{missing}"),
            ("DELETE", f"/v1/sessions/{missing}"),
            ("GET", f"/v1/sessions/{missing}/events"),
            ("GET", "/v2/anything"),
        ]:
            response = client.request(method, path)
            assert response.status_code == 404, (method, path)
            assert response.json()["error"] == "not_found"
        message = client.post(f"/v1/sessions/{missing}/messages", json={"text": "hi"})
        assert message.status_code == 404


def test_an_oversized_body_gets_413_before_it_is_read(server: Server) -> None:
    with server.client() as client:
        big = {
            "agent": "helper",
            "inputs": {"acme.repository": {"repository": "a/" + "b" * (2 << 20)}},
        }
        response = client.post("/v1/sessions", json=big)
        assert response.status_code == 413
        assert response.json()["error"] == "payload_too_large"
        assert client.get("/v1/sessions").json() == {"sessions": []}


def test_a_body_announced_too_large_is_refused_without_reading_it(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(
            b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 3000000\r\n\r\n{"
        )
        answer = b""
        while b"\r\n\r\n" not in answer:  # the answer comes with 2,999,999 bytes unsent
            answer += raw.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_a_chunked_body_over_the_limit_gets_413(server: Server) -> None:
    def chunks():
        yield b'{"agent": "helper", "inputs": {"x": "'
        for _ in range(40):
            yield b"a" * 65536
        yield b'"}}'

    with server.client() as client:
        response = client.post("/v1/sessions", content=chunks())
        assert response.status_code == 413
        assert client.get("/v1/sessions").json() == {"sessions": []}


def test_serve_refuses_a_non_loopback_address_without_a_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [*RUNNER_CLI, "serve", str(agent_file(tmp_path)), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "RUNNER_SERVE_TOKEN"},
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token: set RUNNER_SERVE_TOKEN" in result.stderr
    assert not (tmp_path / "runner-serve.db").exists()


def test_a_secret_never_reaches_a_response_an_event_or_the_database(tmp_path: Path) -> None:
    from chat_server import ChatServer, assistant

    replies = [
        assistant(None, ("c1", "bash", {"command": "cat key.txt login.txt"})),
        assistant(f"The key is {SECRET_ENV} and the password {SECRET_INPUT}."),
    ]
    seen: list[bytes] = []
    with ChatServer(replies) as model:
        config = agent_file(tmp_path, base_url=model.url)
        env = {"SERVE_TEST_API_KEY": SECRET_ENV}
        with Server([config], tmp_path, env=env) as server, server.client() as client:
            inputs = {
                "acme.repository": {"repository": "acme/api"},
                "acme.login": {"password": SECRET_INPUT},
            }
            created = client.post("/v1/sessions", json={"agent": "helper", "inputs": inputs})
            seen.append(created.content)
            session_id = created.json()["id"]
            wait_status(client, session_id, "waiting")
            workspace = server.workspaces()[0]
            # The hooks did get both values...
            assert (workspace / "key.txt").read_text() == SECRET_ENV
            assert (workspace / "login.txt").read_text() == SECRET_INPUT
            turn = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Show me"})
            seen.append(turn.content)
            assert turn.json()["turn"]["text"] == "The key is *** and the password ***."
            for path in (f"/v1/sessions/{session_id}", "/v1/sessions"):
                seen.append(client.get(path).content)
            stored = client.get(f"/v1/sessions/{session_id}").json()["inputs"]["acme.login"]
            assert stored == {"$secret": "held in the server's memory only; never stored"}
            seen.append(client.delete(f"/v1/sessions/{session_id}").content)
            with client.stream("GET", f"/v1/sessions/{session_id}/events") as stream:
                seen.append(stream.read())
            database = server.database_bytes()
    # ... and the model saw them (the tool result), but nothing the server keeps or answers does.
    assert SECRET_ENV in json.dumps(model.requests[1]["body"])
    assert b'"turn"' in seen[-1] and database
    for blob in [*seen, database]:
        assert SECRET_ENV.encode() not in blob
        assert SECRET_INPUT.encode() not in blob


def test_a_failing_on_create_fails_the_session_naming_only_the_hook_and_type(
    tmp_path: Path,
) -> None:
    config = tmp_path / "failing.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              name: failing
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: first
                    on_create: [{run: echo ok > first.txt}]
                    on_destroy: [{save: first.txt, to: first.txt}]
                  - name: broken
                    on_create: [{run: echo "details only in events" >&2; exit 3}]
            """
        )
    )
    with Server([config], tmp_path) as server, server.client() as client:
        session_id = client.post("/v1/sessions", json={"agent": "failing"}).json()["id"]
        failed = wait_status(client, session_id, "failed")
        events = sse_events(client, session_id)
        refused = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "hi"})
    assert failed["error"] == "hook broken.on_create failed: StepFailedError"
    step_failed = next(e for e in events if e["event"] == "step_failed")
    # The step's message is in the server's log (in debug only), not in events.
    assert step_failed["error_type"] == "StepFailedError" and "error" not in step_failed
    # The hook that had completed got its on_destroy; the sandbox is gone.
    assert (server.output_dir / session_id / "first.txt").read_text() == "ok\n"
    assert server.workspaces() == []
    assert refused.status_code == 409


def test_without_a_token_set_loopback_gets_a_generated_one(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path)], tmp_path, token=None)
    with server:
        printed = re.search(r"this run's token is (\S+)", server.stderr())
        assert printed is not None
        with server.client(printed.group(1)) as client:
            assert client.get("/v1/sessions").status_code == 200
        with server.client(None) as client:
            assert client.get("/v1/sessions").status_code == 401


def test_the_event_stream_is_live_until_the_session_closes(tmp_path: Path) -> None:
    env = {"SERVE_TEST_API_KEY": SECRET_ENV}
    database = tmp_path / "elsewhere" / "sessions.db"
    database.parent.mkdir()
    with Server([agent_file(tmp_path)], tmp_path, env=env, db=database) as server:
        with server.client() as client, server.client() as other:
            session_id = create(client).json()["id"]
            kinds = []
            # Events come as they happen: well before the 15 s keep-alive line.
            client.timeout = httpx.Timeout(5.0)
            with client.stream("GET", f"/v1/sessions/{session_id}/events") as stream:
                for line in stream.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    kinds.append(json.loads(line[len("data: ") :])["event"])
                    if kinds[-1] == "session_started":  # the session is still open
                        assert other.delete(f"/v1/sessions/{session_id}").status_code == 200
            assert kinds[-1] == "session_closed"
            assert kinds.index("session_started") < kinds.index("session_closing")
        assert SECRET_ENV.encode() not in server.database_bytes()
    assert database.stat().st_size > 0  # --db chose the file
    assert not (server.output_dir / "runner-serve.db").exists()


def test_serve_stops_on_a_broken_file_with_its_problems(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nagent:\n  model: m\n  nonsense: true\n")
    result = subprocess.run(
        [*RUNNER_CLI, "serve", str(broken), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert f"runner: 1 problem(s) in {broken}" in result.stderr
    assert f"{broken}:4:" in result.stderr


def test_a_session_closes_at_its_sandboxs_ttl(tmp_path: Path) -> None:
    config = tmp_path / "short.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              name: short
              model: local-model
              environment:
                sandbox: local
                ttl_seconds: 1
                hooks:
                  - name: notes
                    on_create: [{run: echo kept > NOTES.md}]
                    on_destroy: [{save: NOTES.md, to: NOTES.md}]
            """
        )
    )
    with Server([config], tmp_path) as server, server.client() as client:
        session_id = client.post("/v1/sessions", json={"agent": "short"}).json()["id"]
        closed = wait_status(client, session_id, "closed", "failed")
        events = sse_events(client, session_id)
    assert closed["status"] == "closed", closed["error"]
    assert (server.output_dir / session_id / "NOTES.md").read_text() == "kept\n"
    closing = next(e for e in events if e["event"] == "session_closing")
    assert closing["reason"] == "ttl_seconds=1 expired"
    assert server.workspaces() == []


def test_a_second_server_on_the_same_database_refuses_to_start(server: Server) -> None:
    out = str(server.output_dir)
    second = subprocess.run(
        [*RUNNER_CLI, "serve", str(server.files[0]), "--port", "0", "--output-dir", out],
        capture_output=True,
        text=True,
        timeout=60,
        env=server.env,
    )
    assert second.returncode == 2
    assert (
        f"another runner serve is using {server.output_dir / 'runner-serve.db'}; "
        "give this one its own --db" in second.stderr
    )
    with server.client() as client:  # the first one is unharmed
        assert client.get("/v1/sessions").status_code == 200


def test_the_openapi_document_is_a_file_with_this_servers_agents_filled_in() -> None:
    """runner/schemas/openapi.json ships in the package; the server fills in
    its agents and --max-sessions (issue 27: the document as a file)."""
    import json
    from importlib import resources

    from runner.serve.app import openapi

    shipped = resources.files("runner").joinpath("schemas/openapi.json").read_text("utf-8")
    assert json.loads(shipped)["openapi"] == "3.1.0"
    document = openapi(["review", "triage"], 7)
    create = document["components"]["schemas"]["CreateSession"]["properties"]
    assert create["agent"]["enum"] == ["review", "triage"]
    text = json.dumps(document)
    assert "its limit of 7 open sessions" in text and "{max_sessions}" not in text
    assert "error stopping" in text
