"""``DELETE /v1/sessions/{id}`` while the session's ``on_create`` runs: the
start is cancelled, not waited for (issue 28).

The running step is stopped (its process gone), no further step runs, the
hooks whose ``on_create`` finished get their ``on_destroy`` (as after any
failed create), the sandbox is deleted, and the session ends ``closed``.
Real parts: the installed CLI as the server, a local sandbox whose command
sleeps for ten minutes (the client's 30 s timeout would fail the test if
the DELETE waited for it), marker files on the host for each step run.
"""

from __future__ import annotations

from pathlib import Path

from agent_files import agent_yaml
from serve_process import Server, process_alive, processes_with_home, sse_events, wait_for


def cancel_file(tmp_path: Path, marks: Path) -> Path:
    return agent_yaml(
        tmp_path,
        "cancel.yaml",
        f"""\
            version: 1
            agent:
              name: cancel
              model: local-model
              environment:
                sandbox: local
                default_exec_timeout_seconds: 900
                hooks:
                  - name: first
                    on_create:
                      - run: echo ran >> {marks}/first-create
                    on_destroy:
                      - run: echo ran >> {marks}/first-destroy
                  - name: slow
                    on_create:
                      - run: echo $$ > {marks}/slow.pid; exec sleep 600
                      - run: echo ran >> {marks}/slow-after
                    on_destroy:
                      - run: echo ran >> {marks}/slow-destroy
                  - name: never
                    on_create:
                      - run: echo ran >> {marks}/never-create
                    on_destroy:
                      - run: echo ran >> {marks}/never-destroy
            """,
    )


def test_delete_during_on_create_stops_the_step_and_closes_the_session(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    server = Server([cancel_file(tmp_path, marks)], tmp_path, args=["--max-sessions", "1"])
    try:
        server.start()
        with server.client() as client:
            created = client.post("/v1/sessions", json={"inputs": {}})
            assert created.status_code == 201, created.text
            session_id = created.json()["id"]
            pid_file = marks / "slow.pid"
            pid = int(
                wait_for(
                    lambda: pid_file.read_text().strip() if pid_file.exists() else "",
                    what="the slow step",
                )
            )
            workspace = server.workspaces()[0]
            assert process_alive(pid)

            closed = client.delete(f"/v1/sessions/{session_id}")
            assert closed.status_code == 200, closed.text
            assert (closed.json()["status"], closed.json()["error"]) == ("closed", None)

            # The step's process is gone, and nothing else of the sandbox runs.
            assert not process_alive(pid)
            assert processes_with_home(workspace.parent / "home") == []
            # No further step or hook ran; on_destroy as after a failed create:
            # only for the hook whose on_create finished.
            assert sorted(p.name for p in marks.iterdir()) == [
                "first-create",
                "first-destroy",
                "slow.pid",
            ]
            # Nothing is left: no workspace, no temp dir.
            assert list(server.tmp.iterdir()) == []

            events = sse_events(client, session_id)  # ends: the session is closed
            kinds = [e["event"] for e in events]
            assert "session_started" not in kinds
            cancelled = [e for e in events if e["event"] == "hook_cancelled"]
            assert [(e["hook"], e["point"]) for e in cancelled] == [("slow", "on_create")]
            assert kinds.index("hook_cancelled") < kinds.index("sandbox_deleted")
            ends = [e for e in events if e["event"] in ("session_closing", "session_closed")]
            assert [(e["event"], e["reason"]) for e in ends] == [
                ("session_closing", "deleted during on_create"),
                ("session_closed", "deleted during on_create"),
            ]
            assert kinds[-1] == "session_closed"

            # Its place is free again (--max-sessions 1), and the server serves on.
            again = client.post("/v1/sessions", json={"inputs": {}})
            assert again.status_code == 201, again.text
            first = marks / "first-create"
            wait_for(lambda: first.read_text().count("ran") == 2, what="the next session's step")
            assert client.delete(f"/v1/sessions/{again.json()['id']}").json()["status"] == "closed"
    finally:
        server.stop()
