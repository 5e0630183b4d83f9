"""``runner serve``: a session whose sandbox vanishes while it is open (its
local workspace deleted from outside; Docker: ``test_serve_docker.py``)
fails with a ``sandbox_gone`` event, instead of waiting on for messages
that can only fail."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from agent_files import agent_yaml
from chat_server import ChatServer, assistant
from jsonschema import Draft202012Validator
from serve_process import Server, sse_events, wait_for, wait_status

from runner.core.events import events_schema


def chat_file(tmp_path: Path, model_url: str) -> Path:
    return agent_yaml(
        tmp_path,
        "chat.yaml",
        f"""\
            version: 1
            agent:
              name: chat
              model: local-model
              base_url: {model_url}
              environment:
                sandbox: local
            """,
    )


def test_a_session_whose_workspace_is_deleted_during_a_turn_fails(tmp_path: Path) -> None:
    go = tmp_path / "GO"
    block = f"touch started; while [ ! -f {go} ]; do sleep 0.05; done"
    replies = [assistant(None, ("call00001", "bash", {"command": block})), assistant("Done.")]
    with (
        ChatServer(replies) as model,
        Server([chat_file(tmp_path, model.url)], tmp_path) as server,
        server.client() as client,
    ):
        session_id = client.post("/v1/sessions", json={"agent": "chat"}).json()["id"]
        wait_status(client, session_id, "waiting")
        [workspace] = server.workspaces()
        answer: list[dict] = []
        sending = threading.Thread(
            target=lambda: answer.append(
                client.post(f"/v1/sessions/{session_id}/messages", json={"text": "go"}).json()
            )
        )
        sending.start()
        try:
            wait_for(lambda: (workspace / "started").exists(), what="the tool call to start")
            shutil.rmtree(workspace.parent)  # from outside, while the turn runs
        finally:
            go.touch()
            sending.join()
        failed = wait_status(client, session_id, "failed", "waiting")
        gone = f"workspace {workspace} no longer exists"
        assert failed["status"] == "failed"
        assert failed["error"] == f"the session's sandbox is gone ({gone})"
        assert answer[0]["turn"]["status"] == "failed"
        events = sse_events(client, session_id)
        assert [e["reason"] for e in events if e["event"] == "sandbox_gone"] == [gone]
        schema = Draft202012Validator(events_schema())
        for event in events:  # the new kind as documented, and the rest
            schema.validate(event)
        again = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "hi"})
        assert again.status_code == 409


def test_a_message_to_a_session_whose_workspace_was_deleted_fails_the_session(
    tmp_path: Path,
) -> None:
    with (
        ChatServer([]) as model,
        Server([chat_file(tmp_path, model.url)], tmp_path) as server,
        server.client() as client,
    ):
        session_id = client.post("/v1/sessions", json={"agent": "chat"}).json()["id"]
        wait_status(client, session_id, "waiting")
        [workspace] = server.workspaces()
        shutil.rmtree(workspace.parent)
        refused = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "hi"})
        assert refused.status_code == 409
        gone = f"workspace {workspace} no longer exists"
        assert gone in refused.json()["message"]
        failed = client.get(f"/v1/sessions/{session_id}").json()
        assert (failed["status"], failed["error"]) == (
            "failed",
            f"the session's sandbox is gone ({gone})",
        )
        events = sse_events(client, session_id)
        assert [e["reason"] for e in events if e["event"] == "sandbox_gone"] == [gone]
    assert model.requests == []  # no turn ran in a sandbox that is not there
