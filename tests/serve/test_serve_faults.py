"""``runner serve`` killed (SIGKILL) in the middle of a model turn, then started
again: the turn goes on where it was.  Its recorded model replies and tool
results are replayed (the model is not asked again for them, a finished tool
call does not run again), the call that was cut off runs again (the first
run's command is killed at the restart), and the model is asked on from
there with the whole conversation.  Counter files in the workspace prove how
often each tool call ran; once the session is closed no process or folder of
its sandbox remains.

The model is a local chat-completions server (``chat_server.ChatServer``)
whose scripted replies call the ``bash`` tool; the second call blocks until a
file appears, so the kill happens at a known point (the test waits for the
command to say it started, never for a fixed time).  A second test kills the
server while it awaits a slow model reply (it waits for the request to arrive).
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable
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


def send_and_kill(
    server: Server, session_id: str, text: str, *, when: Callable[[], bool], what: str
) -> None:
    """Send a message, and SIGKILL the server once ``when()`` holds (from another
    thread): the request dies with the server."""

    def kill() -> None:
        wait_for(when, what=what)
        server.kill()

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        with server.client() as client, pytest.raises(httpx.TransportError):
            client.post(f"/v1/sessions/{session_id}/messages", json={"text": text})
    finally:
        killer.join()


def bash(call_id: str, command: str):  # type: ignore[no-untyped-def]
    from chat_server import assistant

    return assistant(None, (call_id, "bash", {"command": command}))


def test_a_server_killed_mid_turn_goes_on_with_the_turn_after_a_restart(
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
        assistant("Counted."),  # turn 2, asked on after the restart
        bash("call00003", "echo ran >> step-3.count"),  # turn 3
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

            send_and_kill(
                server,
                session_id,
                "Count.",
                when=lambda: (workspace / "in-step-2").exists(),
                what="the 2nd tool call",
            )
            blocked = int((workspace / "step-2.pid").read_text())
            assert process_alive(blocked)  # the kill left the command running

            server.start()
            assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
            # The command the cut-off call was running was killed at the restart;
            # the call runs again (its counter says 2), in the same sandbox.
            wait_for(lambda: not process_alive(blocked), what="the cut-off command to end")
            wait_for(lambda: lines(workspace / "step-2.count") == 2, what="the call to run again")
            assert server.workspaces() == [workspace]  # re-attached, not a new sandbox
            go.touch()
            with server.client() as client:
                session = wait_status(client, session_id, "waiting", "failed")
                assert session["status"] == "waiting", session["error"]
                assert session["result"] == {
                    "turn": {"status": "completed", "text": "Counted.", "error": None}
                }
                again = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Again."})
                assert again.status_code == 200, again.text
                assert again.json()["turn"] == {
                    "status": "completed",
                    "text": "Done again.",
                    "error": None,
                }
                # The finished tool call ran once; the cut-off one twice, finishing once.
                counts = {
                    name: lines(workspace / f"{name}.count")
                    for name in ("step-1", "step-2", "step-2-after", "step-3")
                }
                assert counts == {"step-1": 1, "step-2": 2, "step-2-after": 1, "step-3": 1}
                closed = client.delete(f"/v1/sessions/{session_id}").json()
                assert closed["status"] == "closed", closed["error"]
        finally:
            go.touch()
            server.stop()
    # Six requests for six replies: the two of turn 2 that were recorded before
    # the kill were replayed, not asked for again.
    assert len(model.requests) == 6
    # Asked on after the restart with the whole turn so far (the replayed
    # calls, the cut-off call's new result), then turn 3 after turn 2.
    resumed = model.requests[3]["body"]["messages"]
    assert [m["role"] for m in resumed] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert resumed[3] == {"role": "user", "content": "Count."}
    assert [m["tool_calls"][0]["id"] for m in (resumed[4], resumed[6])] == [
        "call00001",
        "call00002",
    ]
    assert resumed[7]["content"].startswith("exit code 0")
    assert model.requests[4]["body"]["messages"][: len(resumed)] == resumed
    assert model.requests[4]["body"]["messages"][len(resumed) :] == [
        {"role": "assistant", "content": "Counted."},
        {"role": "user", "content": "Again."},
    ]
    assert not workspace.parent.exists()
    assert list(server.tmp.iterdir()) == []
    assert processes_with_home(home) == []


def test_a_server_killed_while_awaiting_the_model_asks_it_again_after_a_restart(
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

            send_and_kill(
                server,
                session_id,
                "Count.",
                when=lambda: len(model.requests) == 2,
                what="the 2nd model request",
            )

            server.start()
            with server.client() as client:
                session = wait_status(client, session_id, "waiting", "failed")
                assert session["status"] == "waiting", session["error"]
                # The reply that never came is asked for again; the finished
                # tool call before it is replayed, not run again.
                assert session["result"]["turn"] == {
                    "status": "completed",
                    "text": "Back.",
                    "error": None,
                }
                assert lines(workspace / "step-1.count") == 1
                assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
        finally:
            server.stop()
    assert len(model.requests) == 3
    assert model.requests[2]["body"]["messages"] == model.requests[1]["body"]["messages"]
    assert [m["role"] for m in model.requests[2]["body"]["messages"]] == [
        "user",
        "assistant",
        "tool",
    ]
    assert list(server.tmp.iterdir()) == []


def test_a_turn_journal_cut_off_by_a_kill_holds_no_secret(tmp_path: Path) -> None:
    """The journal of a turn in flight stays in the database when the server is
    killed: a tool call that printed a secret (a ``secrets:`` value the hook
    put in a file) must be recorded scrubbed, in every form it could be stored."""
    import base64
    import json

    from chat_server import ChatServer, assistant

    secret = "s3cr3t-'quote' $dollar \\back"
    go = tmp_path / "GO"
    replies = [
        bash("call00001", "cat .token; printf '%s' \"$(cat .token)\" | base64"),
        bash("call00002", f"touch in-step-2; while [ ! -f {go} ]; do sleep 0.05; done"),
        assistant("Done."),
    ]
    with ChatServer(replies) as model:
        config = tmp_path / "secret.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                secrets:
                  token: {{from_env: TURN_TOKEN}}
                agent:
                  name: turns
                  model: local-model
                  base_url: {model.url}
                  environment:
                    sandbox: local
                    default_exec_timeout_seconds: 120
                    hooks:
                      - name: seed
                        on_create:
                          - secret_file: .token
                            secret: token
                """
            )
        )
        server = Server([config], tmp_path, env={"TURN_TOKEN": secret})
        try:
            server.start()
            with server.client() as client:
                session_id = client.post("/v1/sessions", json={}).json()["id"]
                wait_status(client, session_id, "waiting")
            (workspace,) = server.workspaces()

            send_and_kill(
                server,
                session_id,
                "Show.",
                when=lambda: (workspace / "in-step-2").exists(),
                what="the 2nd tool call",
            )
            stored = server.database_bytes()
            # The first tool call was journaled, and its live output (what the
            # model was sent) did hold the secret: raw and in base64.
            assert b"turn:sandbox" in stored
            (output,) = [
                m["content"] for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"
            ]
            assert secret in output
            assert base64.b64encode(secret.encode()).decode() in output
            for form in (
                secret.encode(),
                json.dumps(secret)[1:-1].encode(),
                base64.b64encode(secret.encode()),
            ):
                assert form not in stored, form
        finally:
            go.touch()
            server.stop()
