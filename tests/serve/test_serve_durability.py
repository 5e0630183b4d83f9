"""``runner serve`` after a SIGKILL: every open session is found again, its
sandbox re-attached (or the session failed cleanly), and a finished step is
not run again.  Counter files in the workspace prove how often each step ran."""

from __future__ import annotations

import os
import shutil
import signal
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from agent_files import agent_yaml
from serve_process import Server, lines, processes_with_home, sse_events, wait_for, wait_status

BLOCK = "touch {flag}; while [ ! -f {go} ]; do sleep 0.05; done"


def durable_file(tmp_path: Path) -> Path:
    return agent_yaml(
        tmp_path,
        "durable.yaml",
        f"""\
            version: 1
            inputs:
              acme.login:
                as: login
                secret: true
                required: false
                schema:
                  type: object
                  properties:
                    password: {{type: string, default: none-given}}
            agent:
              name: durable
              model: local-model
              environment:
                sandbox: local
                default_exec_timeout_seconds: 120
                hooks:
                  - name: counted
                    on_create:
                      - run: echo "$RUNNER_STEP_ID" >> create-1.count
                      - run: echo "$RUNNER_STEP_ID" >> create-2.count; {BLOCK.format(flag="creating", go=tmp_path / "GO_CREATE")}
                      - run: echo "$RUNNER_STEP_ID" >> create-3.count
                      - write: login.txt
                        content: "{{{{ login.password }}}}"
                    on_destroy:
                      - run: echo "$RUNNER_STEP_ID" >> destroy-1.count
                      - run: echo "$RUNNER_STEP_ID" >> destroy-2.count; {BLOCK.format(flag="destroying", go=tmp_path / "GO_DESTROY")}
                      - save: create-1.count
                        to: create-1.count
                      - save: create-2.count
                        to: create-2.count
                      - save: create-3.count
                        to: create-3.count
                      - save: destroy-1.count
                        to: destroy-1.count
                      - save: destroy-2.count
                        to: destroy-2.count
            """,
    )


@pytest.fixture
def server(tmp_path: Path):
    running = Server([durable_file(tmp_path)], tmp_path)
    yield running
    # Let the commands a killed server left blocked end (the GO files are outside
    # the workspaces, so they see them even once their workspace was deleted).
    for go in ("GO_CREATE", "GO_DESTROY"):
        (tmp_path / go).touch()
    running.stop()


def start_session(server: Server, agent: str = "durable", **inputs: object) -> tuple[str, Path]:
    with server.client() as client:
        created = client.post("/v1/sessions", json={"agent": agent, "inputs": inputs})
        assert created.status_code == 201, created.text
    workspace = wait_for(lambda: server.workspaces(), what="the workspace")[0]
    return created.json()["id"], workspace


def test_a_session_killed_mid_on_create_resumes_without_rerunning_finished_steps(
    server: Server,
) -> None:
    server.start()
    session_id, workspace = start_session(server)
    wait_for(lambda: (workspace / "creating").exists(), what="step 2 of on_create to start")
    server.kill()

    server.start()
    assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
    with server.client() as client:
        assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "starting"
        # The unfinished step 2 runs again (it had not finished); steps 1 never again.
        wait_for(lambda: lines(workspace / "create-2.count") == 2, what="step 2 to run again")
        (server.workdir / "GO_CREATE").touch()
        session = wait_status(client, session_id, "waiting", "failed")
        assert session["status"] == "waiting", session["error"]
        assert server.workspaces() == [workspace]  # re-attached, not a new sandbox
        assert lines(workspace / "create-1.count") == 1
        assert lines(workspace / "create-3.count") == 1
        (server.workdir / "GO_DESTROY").touch()
        closed = client.delete(f"/v1/sessions/{session_id}").json()
        # the resume is in the session's events, with its attempt and server
        resumed = [e for e in sse_events(client, session_id) if e["event"] == "session_resumed"]
        assert [(e["attempt"], e["status"], e["server"]) for e in resumed] == [
            (1, "starting", server.url)
        ]
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]
    assert [lines(saved / f"destroy-{n}.count") for n in (1, 2)] == [1, 1]
    assert not workspace.exists()


def test_a_step_run_again_after_a_restart_has_the_same_step_id(server: Server) -> None:
    """RUNNER_STEP_ID: what a command can de-duplicate its effect by (the
    count files hold the id each run of a step was given)."""
    server.start()
    first, workspace = start_session(server)
    wait_for(lambda: (workspace / "creating").exists(), what="step 2 of on_create to start")
    server.kill()
    server.start()
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        assert wait_status(client, first, "waiting")["status"] == "waiting"
        second = client.post("/v1/sessions", json={"agent": "durable", "inputs": {}}).json()["id"]
        assert wait_status(client, second, "waiting")["status"] == "waiting"
    [other] = [w for w in server.workspaces() if w != workspace]

    def ids(where: Path) -> list[list[str]]:
        return [(where / f"create-{n}.count").read_text().splitlines() for n in (1, 2, 3)]

    ran = ids(workspace)
    assert [len(runs) for runs in ran] == [1, 2, 1]
    assert ran[1][0] == ran[1][1]  # the cut-off step, run again: the same id
    mine = {runs[0] for runs in ran}
    theirs = {runs[0] for runs in ids(other)}
    assert len(mine) == 3 and len(theirs) == 3  # every step its own id
    assert not mine & theirs  # and every session
    assert all(first in step for step in mine)


def test_a_session_killed_mid_on_destroy_finishes_closing_after_a_restart(
    server: Server,
) -> None:
    server.start()
    session_id, workspace = start_session(server)
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        wait_status(client, session_id, "waiting")

    def kill_when_destroying() -> None:
        wait_for(lambda: (workspace / "destroying").exists(), what="on_destroy step 2")
        server.kill()

    killer = threading.Thread(target=kill_when_destroying)
    killer.start()
    try:
        with server.client() as client, pytest.raises(httpx.TransportError):
            client.delete(f"/v1/sessions/{session_id}")  # the server dies under it
    finally:
        killer.join()
    server.start()
    with server.client() as client:
        wait_for(lambda: lines(workspace / "destroy-2.count") == 2, what="step 2 to run again")
        (server.workdir / "GO_DESTROY").touch()
        closed = wait_status(client, session_id, "closed", "failed")
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"destroy-{n}.count") for n in (1, 2)] == [1, 2]
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 1, 1]
    assert not workspace.exists()


def test_a_waiting_session_is_found_and_reattached_after_a_restart(server: Server) -> None:
    server.start()
    session_id, workspace = start_session(server)
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        wait_status(client, session_id, "waiting")
    server.kill()
    server.start()
    with server.client() as client:
        listed = client.get("/v1/sessions").json()["sessions"]
        assert [(s["id"], s["status"]) for s in listed] == [(session_id, "waiting")]
        assert server.workspaces() == [workspace]
        (server.workdir / "GO_DESTROY").touch()
        closed = client.delete(f"/v1/sessions/{session_id}").json()
    assert closed["status"] == "closed", closed["error"]
    saved = server.output_dir / session_id
    assert [lines(saved / f"create-{n}.count") for n in (1, 2, 3)] == [1, 1, 1]
    assert not workspace.exists()  # the re-attached sandbox was the one deleted


def test_a_session_whose_sandbox_was_removed_fails_cleanly_after_a_restart(
    server: Server,
) -> None:
    server.start()
    session_id, workspace = start_session(server)
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        wait_status(client, session_id, "waiting")
    server.kill()
    shutil.rmtree(workspace.parent)
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
        assert failed["error"] == (
            f"the server restarted and its sandbox is gone (workspace {workspace} no longer exists)"
        )
        refused = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "hi"})
        assert refused.status_code == 409
        assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "failed"


def test_a_session_with_a_secret_input_fails_cleanly_after_a_restart(server: Server) -> None:
    server.start()
    session_id, workspace = start_session(server, **{"acme.login": {"password": "pw-7c1d0e"}})
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        wait_status(client, session_id, "waiting")
    server.kill()
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
    assert "secret input(s) acme.login were held only in its memory" in failed["error"]
    wait_for(lambda: not workspace.exists(), what="the sandbox to be deleted")
    assert b"pw-7c1d0e" not in server.database_bytes()


def test_now_and_sleep_replay_when_a_python_hook_runs_again_after_a_restart(
    tmp_path: Path,
) -> None:
    (tmp_path / "timed_hooks.py").write_text(
        textwrap.dedent(
            f"""\
            import runner


            class Timed(runner.SandboxHook):
                async def on_create(self, ctx):
                    stamp = runner.now().isoformat()
                    await runner.sleep(12)
                    # One call, cut off by the kill: it runs again (a finished
                    # call would be replayed, not run), with the replayed time.
                    await ctx.sandbox.execute(
                        f"echo {{stamp}} >> stamps.txt; date +%s.%N >> slept.txt; "
                        + {BLOCK.format(flag="timed", go=tmp_path / "GO")!r}
                    )
            """
        )
    )
    config = tmp_path / "timed.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              name: timed
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - python: timed_hooks:Timed
            """
        )
    )
    server = Server([config], tmp_path)
    try:
        server.start()
        session_id, workspace = start_session(server, "timed")
        wait_for(lambda: (workspace / "timed").exists(), what="the hook to block")
        server.kill()
        server.start()
        restarted = time.time()  # the server answers: the session resumes from here
        wait_for(lambda: lines(workspace / "slept.txt") == 2, what="the hook to run again")
        (tmp_path / "GO").touch()
        with server.client() as client:
            assert wait_status(client, session_id, "waiting", "failed")["status"] == "waiting"
    finally:
        (tmp_path / "GO").touch()
        server.stop()
    first, again = (workspace / "stamps.txt").read_text().splitlines()
    assert first == again  # runner.now() returned the recorded time
    slept_again = float((workspace / "slept.txt").read_text().splitlines()[1])
    # The 12 s sleep had passed before the kill: no sleeping again (a server
    # that slept again would write this line 12 s or more after it answered;
    # the 8 s are for a resume on a loaded machine, which CI once needed).
    assert slept_again - restarted < 8


def test_a_resumed_session_goes_on_with_its_conversation(tmp_path: Path) -> None:
    from chat_server import ChatServer, assistant

    config = tmp_path / "chat.yaml"
    replies = [assistant("Noted: 42."), assistant("It was 42.")]
    with ChatServer(replies) as model:
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                agent:
                  name: chat
                  model: local-model
                  base_url: {model.url}
                  instructions: Answer briefly.
                  environment:
                    sandbox: local
                """
            )
        )
        server = Server([config], tmp_path)
        try:
            server.start()
            session_id, _ = start_session(server, "chat")
            with server.client() as client:
                wait_status(client, session_id, "waiting")
                first = client.post(
                    f"/v1/sessions/{session_id}/messages", json={"text": "Keep 42."}
                )
                assert first.json()["turn"]["text"] == "Noted: 42."
            server.kill()
            server.start()
            with server.client() as client:
                again = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Which?"})
                assert again.status_code == 200, again.text
                assert again.json()["turn"]["text"] == "It was 42."
        finally:
            server.stop()
    assert model.requests[1]["body"]["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Keep 42."},
        {"role": "assistant", "content": "Noted: 42."},
        {"role": "user", "content": "Which?"},
    ]


def test_a_session_whose_file_changed_fails_cleanly_after_a_restart(server: Server) -> None:
    server.start()
    session_id, workspace = start_session(server)
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        wait_status(client, session_id, "waiting")
    server.kill()
    config = server.files[0]
    config.write_text(config.read_text().replace("create-1.count", "create-0.count"))
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
    assert failed["error"] == (
        f"the server restarted and {config} changed since the session started: "
        "its journal of finished steps cannot be replayed on another file"
    )
    wait_for(lambda: not workspace.exists(), what="the sandbox to be deleted")


def test_a_session_of_an_agent_no_longer_served_fails_cleanly(
    server: Server, tmp_path: Path
) -> None:
    server.start()
    session_id, workspace = start_session(server)
    (server.workdir / "GO_CREATE").touch()
    with server.client() as client:
        wait_status(client, session_id, "waiting")
    server.kill()
    other = tmp_path / "other.yaml"
    other.write_text("version: 1\nagent:\n  name: other\n  model: m\n")
    server.files = [other]
    server.start()
    with server.client() as client:
        failed = wait_status(client, session_id, "failed")
    assert failed["error"] == "agent 'durable' is not served by this server"
    wait_for(lambda: not workspace.exists(), what="the sandbox to be deleted")


def test_a_command_its_server_left_running_dies_at_its_own_timeout(tmp_path: Path) -> None:
    """The step's watchdog, not the next start, ends a cut-off command: the
    server is killed mid-step and never started again."""
    config = tmp_path / "long.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              name: long
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: long
                    on_create:
                      - run: touch started; sleep 600
                        timeout_seconds: 2
            """
        )
    )
    server = Server([config], tmp_path)
    try:
        server.start()
        _, workspace = start_session(server, "long")
        wait_for(lambda: (workspace / "started").exists(), what="the step to start")
        server.kill()
    finally:
        server.stop()
    home = workspace.parent / "home"
    try:
        wait_for(lambda: not processes_with_home(home), what="the watchdog to kill the command")
    finally:
        for pid in processes_with_home(home):  # not left behind when the test fails
            os.kill(pid, signal.SIGKILL)
