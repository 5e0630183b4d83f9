"""``runner serve --agent [NAME=]MODULE:ATTR``: a Python ``runner.Agent`` served
next to YAML agents, in a real server process over real HTTP.

The agents live in a module the tests write next to the server's working
directory (modules are imported from there first); their hooks count each
run in a file of the sandbox, so the counts prove what ran and how often.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI
from serve_process import Server, lines, sse_events, wait_for, wait_status

BLOCK = "touch {flag}; while [ ! -f {go} ]; do sleep 0.05; done"


def write_module(
    tmp_path: Path,
    *,
    chat_url: str = "http://127.0.0.1:9/v1",
    slow_hooks: str = "Counted(), Blocking()",
) -> None:
    go = tmp_path / "GO"
    (tmp_path / "py_agents.py").write_text(
        textwrap.dedent(
            f"""\
            from typing import Annotated

            import runner


            class Ticket(runner.SessionInput):
                input_id = "acme.ticket"
                number: int


            class Counted(runner.SandboxHook):
                async def on_create(self, ctx, *, ticket: Annotated[Ticket, runner.Depends()]):
                    await ctx.sandbox.execute(f"echo {{ticket.number}} >> first.count")

                async def on_destroy(self, ctx):
                    await ctx.sandbox.execute("echo ran >> {tmp_path / "destroyed.count"}")


            class Blocking(runner.SandboxHook):
                async def on_create(self, ctx):
                    await ctx.sandbox.execute(
                        "echo ran >> second.count; " + {BLOCK.format(flag="blocking", go=go)!r}
                    )


            class Stepwise(runner.SandboxHook):
                # Three sandbox calls; the second blocks (journaled one by one).
                async def on_create(self, ctx):
                    await ctx.sandbox.write_file("note.txt", "written once")
                    await ctx.sandbox.execute(
                        "echo ran >> call-2.count; " + {BLOCK.format(flag="blocking", go=go)!r}
                    )
                    note = (await ctx.sandbox.read_file("note.txt")).decode()
                    await ctx.sandbox.execute(f"echo '{{note}}' >> call-3.count")


            class Wandering(runner.SandboxHook):
                # Not deterministic: its first call differs on the second run.
                async def on_create(self, ctx):
                    import time

                    await ctx.sandbox.execute(f"echo {{time.time_ns()}} >> call-1.count")
                    await ctx.sandbox.execute(
                        "echo ran >> call-2.count; " + {BLOCK.format(flag="blocking", go=go)!r}
                    )


            support = runner.Agent(
                name="inner-name",
                model="local-model",
                base_url={chat_url!r},
                instructions="Be brief.",
                environment=runner.DangerousLocalSandbox(hooks=[Counted()]),
            )
            slow = runner.Agent(
                model="local-model",
                environment=runner.DangerousLocalSandbox(
                    hooks=[{slow_hooks}], default_exec_timeout_seconds=120
                ),
            )
            plain = runner.Agent(model="local-model", base_url={chat_url!r})
            not_an_agent = 42
            """
        )
    )
    # Python keeps using the cached bytecode of a source rewritten in the same
    # second with the same size (its check is mtime and size): a restarted
    # server would import the old hooks ("Counted(), Blocking()" swapped).
    shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)


def yaml_agent(tmp_path: Path) -> Path:
    path = tmp_path / "yaml-agent.yaml"
    path.write_text("version: 1\nagent:\n  name: yaml-agent\n  model: local-model\n")
    return path


@pytest.fixture
def go(tmp_path: Path):
    """The file that lets a blocked hook go on; made at the end whatever happens."""
    yield tmp_path / "GO"
    (tmp_path / "GO").touch()


def test_a_python_agent_is_served_next_to_a_yaml_agent(tmp_path: Path) -> None:
    from chat_server import ChatServer, assistant

    with ChatServer([assistant("Hello from Python.")]) as model:
        write_module(tmp_path, chat_url=model.url)
        server = Server(
            [yaml_agent(tmp_path)], tmp_path, args=["--agent", "support=py_agents:support"]
        )
        with server, server.client() as client:
            document = client.get("/openapi.json").json()
            create = document["components"]["schemas"]["CreateSession"]
            assert create["properties"]["agent"]["enum"] == ["support", "yaml-agent"]

            # Its inputs are those its hooks ask for: validated before anything exists.
            missing = client.post("/v1/sessions", json={"agent": "support"})
            assert missing.status_code == 400
            assert missing.json()["error"] == "bad_input"
            assert "acme.ticket" in missing.json()["message"]
            unknown = client.post(
                "/v1/sessions",
                json={"agent": "support", "inputs": {"acme.tikcet": {"number": 1}}},
            )
            assert unknown.status_code == 400
            assert "did you mean 'acme.ticket'?" in unknown.json()["message"]
            assert client.get("/v1/sessions").json()["sessions"] == []
            assert server.workspaces() == []

            created = client.post(
                "/v1/sessions", json={"agent": "support", "inputs": {"acme.ticket": {"number": 7}}}
            )
            assert created.status_code == 201, created.text
            session_id = created.json()["id"]
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
            assert session["agent"] == "support"
            assert session["inputs"] == {"acme.ticket": {"number": 7}}
            (workspace,) = server.workspaces()
            assert (workspace / "first.count").read_text() == "7\n"

            turn = client.post(f"/v1/sessions/{session_id}/messages", json={"text": "Hi?"})
            assert turn.status_code == 200, turn.text
            assert turn.json()["turn"] == {
                "status": "completed",
                "text": "Hello from Python.",
                "error": None,
            }
            closed = client.delete(f"/v1/sessions/{session_id}").json()
            assert closed["status"] == "closed", closed["error"]
            events = sse_events(client, session_id)
    assert model.requests[0]["body"]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi?"},
    ]
    starting = next(e for e in events if e["event"] == "session_starting")
    assert starting["agent"] == "support"  # the served name, not Agent.name
    assert lines(tmp_path / "destroyed.count") == 1
    assert not workspace.exists()


def test_a_python_agent_is_served_under_its_attribute_name_and_takes_no_inputs(
    tmp_path: Path,
) -> None:
    write_module(tmp_path)
    with Server([], tmp_path, args=["--agent", "py_agents:plain"]) as server:
        assert "serving plain on http://" in server.stderr()
        with server.client() as client:
            refused = client.post(
                "/v1/sessions", json={"agent": "plain", "inputs": {"acme.ticket": {}}}
            )
            assert refused.status_code == 400
            assert refused.json()["message"] == (
                "inputs: unknown input 'acme.ticket'; declared: none"
            )
            created = client.post("/v1/sessions", json={})  # the one agent served
            assert created.status_code == 201, created.text
            session = wait_status(client, created.json()["id"], "waiting", "failed")
            assert (session["agent"], session["status"]) == ("plain", "waiting")


BROKEN_MODULES = {
    "raises_at_import.py": "import runner\n\nraise RuntimeError('no model configured')\n",
    "needs_a_package.py": "import runner\nimport not_installed_anywhere_qq\n",
    # Factories (--agent MODULE:ATTR()); broken() raises at line 5.
    "factories.py": textwrap.dedent(
        """\
        import runner


        def broken():
            raise ValueError("no key for the model")


        async def later():
            return None


        def gives_int():
            return 5


        def make():
            return runner.Agent(model="local-model")
        """
    ),
}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "no_such_module_qq:agent",
            "--agent no_such_module_qq:agent: cannot import module 'no_such_module_qq': "
            "no module named 'no_such_module_qq' "
            "(looked in the current directory and the installed packages)",
        ),
        (
            "raises_at_import:agent",
            "--agent raises_at_import:agent: importing module 'raises_at_import' failed: "
            "RuntimeError: no model configured at {tmp}/raises_at_import.py:3",
        ),
        (
            "needs_a_package:agent",
            "--agent needs_a_package:agent: importing module 'needs_a_package' failed: "
            "ModuleNotFoundError: No module named 'not_installed_anywhere_qq' "
            "at {tmp}/needs_a_package.py:2",
        ),
        (
            "py_agents:missing",
            "--agent py_agents:missing: module 'py_agents' has no attribute 'missing'",
        ),
        (
            "py_agents:not_an_agent",
            "--agent py_agents:not_an_agent: py_agents:not_an_agent is int 42, not a "
            "runner.Agent (build one: runner.Agent(model=..., environment=...))",
        ),
        (
            "py_agents",
            "--agent 'py_agents': expected MODULE:ATTR or NAME=MODULE:ATTR, or MODULE:ATTR() "
            "for a factory (e.g. --agent support=mypackage.agents:support_agent)",
        ),
        (
            "factories:broken()",
            "--agent factories:broken(): calling factories:broken() failed: ValueError: "
            "no key for the model at {tmp}/factories.py:5",
        ),
        (
            "factories:later()",
            "--agent factories:later(): factories:later is an async function; a factory "
            "must be a plain function that returns the runner.Agent",
        ),
        (
            "factories:gives_int()",
            "--agent factories:gives_int(): factories:gives_int() returned int 5, not a "
            "runner.Agent (build one: runner.Agent(model=..., environment=...))",
        ),
        (
            "factories:make",
            "--agent factories:make: factories:make is the function make, not a "
            "runner.Agent; to call it at start, write --agent factories:make()",
        ),
        (
            "py_agents:not_an_agent()",
            "--agent py_agents:not_an_agent(): py_agents:not_an_agent is int, not a "
            "function to call",
        ),
        (
            "yaml-agent=py_agents:plain",
            "--agent yaml-agent=py_agents:plain: an agent named 'yaml-agent' is already "
            "served ({tmp}/yaml-agent.yaml)",
        ),
    ],
)
def test_an_agent_that_cannot_be_imported_stops_the_server_with_exit_2(
    tmp_path: Path, spec: str, message: str
) -> None:
    write_module(tmp_path)
    for name, text in BROKEN_MODULES.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [*RUNNER_CLI, "serve", str(yaml_agent(tmp_path)), "--agent", spec, "--port", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUNNER_SERVE_TOKEN": "t" * 20},
    )
    assert done.returncode == 2, done.stderr
    assert f"runner: {message.format(tmp=tmp_path)}" in done.stderr.splitlines()
    assert "serving" not in done.stderr
    assert not (tmp_path / "runner-serve.db").exists()


def test_serve_without_files_or_agents_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [*RUNNER_CLI, "serve"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "runner: give YAML FILES to serve, --agent MODULE:ATTR, or both" in done.stderr


def start_slow(server: Server) -> tuple[str, Path]:
    with server.client() as client:
        created = client.post(
            "/v1/sessions", json={"agent": "slow", "inputs": {"acme.ticket": {"number": 3}}}
        )
        assert created.status_code == 201, created.text
    workspace = wait_for(lambda: server.workspaces(), what="the workspace")[0]
    return created.json()["id"], workspace


def test_a_python_agents_session_resumes_after_sigkill_without_rerunning_finished_hooks(
    tmp_path: Path, go: Path
) -> None:
    write_module(tmp_path)
    server = Server([yaml_agent(tmp_path)], tmp_path, args=["--agent", "py_agents:slow"])
    try:
        server.start()
        session_id, workspace = start_slow(server)
        wait_for(lambda: (workspace / "blocking").exists(), what="the second hook to block")
        server.kill()

        server.start()  # the agent is imported again and found by its name
        assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
        # The cut-off hook point runs again (a Python hook point runs whole); the
        # finished one is not called again.
        wait_for(lambda: lines(workspace / "second.count") == 2, what="the hook to run again")
        go.touch()
        with server.client() as client:
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
            assert server.workspaces() == [workspace]
            assert lines(workspace / "first.count") == 1
            closed = client.delete(f"/v1/sessions/{session_id}").json()
        assert closed["status"] == "closed", closed["error"]
        assert lines(tmp_path / "destroyed.count") == 1
        assert not workspace.exists()
    finally:
        server.stop()


def test_a_python_agents_session_fails_cleanly_when_the_agent_is_no_longer_served(
    tmp_path: Path, go: Path
) -> None:
    write_module(tmp_path)
    go.touch()
    server = Server([yaml_agent(tmp_path)], tmp_path, args=["--agent", "py_agents:slow"])
    try:
        server.start()
        session_id, workspace = start_slow(server)
        with server.client() as client:
            wait_status(client, session_id, "waiting")
        server.kill()
        server.args = []
        server.start()
        with server.client() as client:
            failed = wait_status(client, session_id, "failed")
        assert failed["error"] == "agent 'slow' is not served by this server"
        wait_for(lambda: not workspace.exists(), what="the sandbox to be deleted")
        assert lines(tmp_path / "destroyed.count") == 0  # no hook runs on an orphan
    finally:
        server.stop()


def test_a_python_agents_session_fails_cleanly_when_its_hooks_changed(
    tmp_path: Path, go: Path
) -> None:
    write_module(tmp_path)
    go.touch()
    server = Server([], tmp_path, args=["--agent", "py_agents:slow"])
    try:
        server.start()
        session_id, workspace = start_slow(server)
        with server.client() as client:
            wait_status(client, session_id, "waiting")
        server.kill()
        write_module(tmp_path, slow_hooks="Blocking(), Counted()")  # the positions moved
        server.start()
        with server.client() as client:
            failed = wait_status(client, session_id, "failed")
        assert failed["error"] == (
            "the server restarted and the hooks of py_agents:slow changed since the session "
            "started: its journal of finished hook points cannot be replayed on other hooks"
        )
        wait_for(lambda: not workspace.exists(), what="the sandbox to be deleted")
    finally:
        server.stop()


def test_a_python_hook_cut_off_replays_its_finished_sandbox_calls(tmp_path: Path, go: Path) -> None:
    write_module(tmp_path, slow_hooks="Counted(), Stepwise()")
    server = Server([yaml_agent(tmp_path)], tmp_path, args=["--agent", "py_agents:slow"])
    try:
        server.start()
        session_id, workspace = start_slow(server)
        wait_for(lambda: (workspace / "blocking").exists(), what="the second call to block")
        (workspace / "note.txt").write_text("changed after the first run")
        server.kill()

        server.start()
        # The hook point runs again: its finished first call is replayed (not
        # run: the note keeps what the test wrote), the cut-off one runs again.
        wait_for(lambda: lines(workspace / "call-2.count") == 2, what="the call to run again")
        go.touch()
        with server.client() as client:
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
        assert (workspace / "note.txt").read_text() == "changed after the first run"
        # Call 3 ran once, live (it had not run before the kill): it read the file as it is.
        assert (workspace / "call-3.count").read_text() == "changed after the first run\n"
    finally:
        server.stop()


def test_a_python_hook_that_calls_differently_on_replay_fails_with_the_reason(
    tmp_path: Path, go: Path
) -> None:
    write_module(tmp_path, slow_hooks="Counted(), Wandering()")
    # The reason is in the server's log, with the debug switch (the seeds' rule).
    server = Server(
        [yaml_agent(tmp_path)],
        tmp_path,
        args=["--agent", "py_agents:slow"],
        env={"RUNNER_DEBUG": "1"},
    )
    try:
        server.start()
        session_id, workspace = start_slow(server)
        wait_for(lambda: (workspace / "blocking").exists(), what="the second call to block")
        server.kill()

        server.start()
        with server.client() as client:
            session = wait_status(client, session_id, "waiting", "failed")
            assert session["status"] == "failed"
            assert session["error"] == "hook Wandering.on_create failed: ReplayMismatchError"
            failed = [e for e in sse_events(client, session_id) if e["event"] == "hook_failed"]
        assert failed[-1]["error_type"] == "ReplayMismatchError" and "error" not in failed[-1]
        assert "sandbox call 1 was execute('echo " in server.stderr()
        assert "must make the same calls in the same order" in server.stderr()
        # The session unwound as after any failed on_create: the finished
        # hook's on_destroy ran, the sandbox is gone.
        assert lines(tmp_path / "destroyed.count") == 1
        assert not workspace.exists()
    finally:
        server.stop()


def test_a_factory_builds_the_agent_once_at_start(tmp_path: Path) -> None:
    (tmp_path / "factories.py").write_text(BROKEN_MODULES["factories.py"])
    server = Server([yaml_agent(tmp_path)], tmp_path, args=["--agent", "made=factories:make()"])
    try:
        server.start()
        assert "serving made, yaml-agent on " in server.stderr()
        with server.client() as client:
            spec = client.get("/openapi.json").json()
            assert "made" in json.dumps(spec)
            created = client.post("/v1/sessions", json={"agent": "made"})
            assert created.status_code == 201, created.text
            session = wait_status(client, created.json()["id"], "waiting", "failed")
            assert session["status"] == "waiting", session["error"]
            assert session["agent"] == "made"
    finally:
        server.stop()
