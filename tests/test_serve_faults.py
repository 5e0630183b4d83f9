"""``runner serve`` killed (SIGKILL) in the middle of a model turn, then started
again: the turn is reported failed ("send the message again"), the session
goes on taking messages with its conversation up to the last finished turn,
every finished tool call ran once (counter files in the workspace prove it),
and nothing is left behind: the command the turn was running is killed at
the restart, and once the session is closed no process or folder of its
sandbox remains.

The model is a local chat-completions server (``chat_server.ChatServer``)
whose scripted replies call the ``bash`` tool; the second call blocks until a
file appears, so the kill happens at a known point (the test waits for the
command to say it started, never for a fixed time).  A second test kills the
server while it awaits a slow model reply (it waits for the request to arrive).
"""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import httpx
import pytest
from serve_process import (
    Server,
    lines,
    process_alive,
    processes_with_home,
    wait_for,
    wait_status,
)


def bash(call_id: str, command: str):  # type: ignore[no-untyped-def]
    from chat_server import assistant

    return assistant(None, (call_id, "bash", {"command": command}))


def test_a_server_killed_mid_turn_reports_the_turn_failed_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    from chat_server import ChatServer, assistant

    go = tmp_path / "GO"
    replies = [
        assistant("Noted: 42."),  # turn 1, finished before the kill
        bash("call00001", "echo ran >> step-1.count"),  # turn 2: one finished tool call,
        bash(  # then one cut off by the kill
            "call00002",
            f"echo $$ > step-2.pid; echo ran >> step-2.count; touch in-step-2; "
            f"while [ ! -f {go} ]; do sleep 0.05; done; echo ran >> step-2-after.count",
        ),
        bash("call00003", "echo ran >> step-3.count"),  # turn 3, after the restart
        assistant("Done again."),
    ]
    with ChatServer(replies) as model:
        config = tmp_path / "turns.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                agent:
                  name: turns
                  model: local-model
                  base_url: {model.url}
                  instructions: Answer briefly.
                  environment:
                    sandbox: local
                    default_exec_timeout_seconds: 120
                """
            )
        )
        server = Server([config], tmp_path)
        try:
            server.start()
            with server.client() as client:
                session_id = client.post("/v1/sessions", json={}).json()["id"]
                wait_status(client, session_id, "waiting")
                first = client.post(
                    f"/v1/sessions/{session_id}/messages", json={"text": "Keep 42."}
                )
                assert first.json()["turn"]["text"] == "Noted: 42."
            (workspace,) = server.workspaces()
            home = workspace.parent / "home"

            def kill_mid_turn() -> None:
                wait_for(lambda: (workspace / "in-step-2").exists(), what="the 2nd tool call")
                server.kill()

            killer = threading.Thread(target=kill_mid_turn)
            killer.start()
            try:
                with server.client() as client, pytest.raises(httpx.TransportError):
                    client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Count."})
            finally:
                killer.join()
            blocked = int((workspace / "step-2.pid").read_text())
            assert process_alive(blocked)  # the kill left the command running

            server.start()
            assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
            with server.client() as client:
                session = wait_status(client, session_id, "waiting", "failed")
                assert session["status"] == "waiting", session["error"]
                assert session["result"] == {
                    "turn": {
                        "status": "failed",
                        "text": None,
                        "error": "the server stopped during this turn; send the message again",
                    }
                }
                # The command the cut-off turn was running was killed at the restart.
                wait_for(lambda: not process_alive(blocked), what="the cut-off command to end")
                assert processes_with_home(home) == []
                assert server.workspaces() == [workspace]  # re-attached, not a new sandbox

                again = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Again."})
                assert again.status_code == 200, again.text
                assert again.json()["turn"] == {
                    "status": "completed",
                    "text": "Done again.",
                    "error": None,
                }
                # Every finished tool call ran once; the cut-off one never ran on.
                counts = {
                    name: lines(workspace / f"{name}.count")
                    for name in ("step-1", "step-2", "step-2-after", "step-3")
                }
                assert counts == {"step-1": 1, "step-2": 1, "step-2-after": 0, "step-3": 1}
                closed = client.delete(f"/v1/sessions/{session_id}").json()
                assert closed["status"] == "closed", closed["error"]
        finally:
            go.touch()
            server.stop()
    # The conversation went on from the last finished turn: the cut-off turn's
    # messages were never stored, the model sees the new message after turn 1.
    assert model.requests[3]["body"]["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Keep 42."},
        {"role": "assistant", "content": "Noted: 42."},
        {"role": "user", "content": "Again."},
    ]
    assert not workspace.parent.exists()
    assert list(server.tmp.iterdir()) == []
    assert processes_with_home(home) == []


def test_a_server_killed_while_awaiting_the_model_reports_the_turn_failed(
    tmp_path: Path,
) -> None:
    from chat_server import ChatServer, Reply, assistant

    slow = assistant("too late")
    replies = [
        bash("call00001", "echo ran >> step-1.count"),
        # The model's second answer is slow: the kill lands while the server
        # awaits it (the test waits for the request to arrive, not for a time).
        Reply(slow.body, delay_seconds=60),
        assistant("Back."),
    ]
    with ChatServer(replies) as model:
        config = tmp_path / "turns.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                agent:
                  name: turns
                  model: local-model
                  base_url: {model.url}
                  environment:
                    sandbox: local
                """
            )
        )
        server = Server([config], tmp_path)
        try:
            server.start()
            with server.client() as client:
                session_id = client.post("/v1/sessions", json={}).json()["id"]
                wait_status(client, session_id, "waiting")
            (workspace,) = server.workspaces()

            def kill_while_awaiting_the_model() -> None:
                wait_for(lambda: len(model.requests) == 2, what="the 2nd model request")
                server.kill()

            killer = threading.Thread(target=kill_while_awaiting_the_model)
            killer.start()
            try:
                with server.client() as client, pytest.raises(httpx.TransportError):
                    client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Count."})
            finally:
                killer.join()

            server.start()
            with server.client() as client:
                session = wait_status(client, session_id, "waiting", "failed")
                assert session["status"] == "waiting", session["error"]
                assert session["result"]["turn"]["error"] == (
                    "the server stopped during this turn; send the message again"
                )
                again = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Again."})
                assert again.json()["turn"]["text"] == "Back."
                assert lines(workspace / "step-1.count") == 1
                assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
        finally:
            server.stop()
    assert model.requests[2]["body"]["messages"] == [{"role": "user", "content": "Again."}]
    assert list(server.tmp.iterdir()) == []
