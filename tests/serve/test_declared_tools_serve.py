"""Issue 29: declared tools are journaled and replayed under ``runner serve``
like the built-ins.

``runner serve`` is SIGKILLed while a declared tool's command blocks; after
the restart the turn goes on: the declared call that had finished is replayed
from the journal (its counter says it ran once), the cut-off one runs again,
and the model is not asked again for the replies it had given.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from serve_process import Server, lines, process_alive, wait_for, wait_status
from test_serve_faults import send_and_kill


def test_a_declared_tool_call_that_finished_is_not_run_again_after_a_restart(
    tmp_path: Path,
) -> None:
    from chat_server import ChatServer, assistant

    go = tmp_path / "GO"
    replies = [
        assistant(None, ("call00001", "count", {"name": "step-1"})),
        assistant(None, ("call00002", "wait_for_go", {"name": "step-2"})),
        assistant("Counted."),
    ]
    with ChatServer(replies) as model:
        config = tmp_path / "tools.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                agent:
                  name: tools
                  model: local-model
                  base_url: {model.url}
                  builtin_tools: []
                  tools:
                    - name: count
                      description: Count a run.
                      parameters:
                        type: object
                        properties: {{name: {{type: string, pattern: "^[a-z0-9-]+$"}}}}
                        required: [name]
                      run: echo ran >> {{{{ args.name }}}}.count
                    - name: wait_for_go
                      description: Count, then wait for the go file.
                      parameters:
                        type: object
                        properties: {{name: {{type: string, pattern: "^[a-z0-9-]+$"}}}}
                        required: [name]
                      run: >-
                        echo $$ > {{{{ args.name }}}}.pid; echo ran >> {{{{ args.name }}}}.count;
                        touch in-step-2; while [ ! -f {go} ]; do sleep 0.05; done
                      timeout_seconds: 120
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
                when=lambda: (workspace / "in-step-2").exists(),
                what="the declared tool's second call",
            )
            blocked = int((workspace / "step-2.pid").read_text())
            server.start()
            wait_for(lambda: not process_alive(blocked), what="the cut-off command to end")
            wait_for(lambda: lines(workspace / "step-2.count") == 2, what="the call to run again")
            go.touch()
            with server.client() as client:
                session = wait_status(client, session_id, "waiting", "failed")
                assert session["status"] == "waiting", session["error"]
                assert session["result"]["turn"]["text"] == "Counted."
                assert lines(workspace / "step-1.count") == 1  # replayed, not run again
                closed = client.delete(f"/v1/sessions/{session_id}").json()
                assert closed["status"] == "closed", closed["error"]
        finally:
            go.touch()
            server.stop()
    assert len(model.requests) == 3  # the two replies before the kill were replayed
    tools = [t["function"]["name"] for t in model.requests[-1]["body"]["tools"]]
    assert tools == ["count", "wait_for_go"]
