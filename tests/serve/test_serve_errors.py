"""Errors where the seeds put them: a deployed session that fails in a hook
tells its clients (events, the session's ``error``) and its database only the
hook and the exception type; the full error, scrubbed of secrets, is in the
server's log, and only with ``RUNNER_DEBUG=1`` (or ``AGENTS_SDK_DEBUG=1``).
Against a real ``runner serve`` process."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from agent_files import agent_yaml
from conftest import RUNNER_CLI
from serve_process import Server, sse_events, wait_status

DETAIL = "detail-42-in-the-debug-log"
#: The command that prints DETAIL (a step's title is its command: not DETAIL itself).
PRINT_DETAIL = "echo detail-$((40 + 2))-in-the-debug-log"
SECRET = "canary-secret-3b9d0f2a61"


def failing_file(tmp_path: Path, *, point: str) -> Path:
    """An agent whose hook ``broken`` fails at ``point``, its message holding
    ``DETAIL`` and the secret input."""
    failing = f"run: {PRINT_DETAIL} {{{{ login.password }}}} >&2; exit 3"
    hooks = (
        f"on_create:\n  - {failing}\n"
        if point == "on_create"
        else f"on_create:\n  - run: 'true'\non_destroy:\n  - {failing}\n"
    )
    return agent_yaml(
        tmp_path,
        "failing.yaml",
        """\
            version: 1
            inputs:
              acme.login:
                as: login
                secret: true
                schema:
                  type: object
                  properties: {password: {type: string}}
                  required: [password]
            agent:
              name: failing
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: broken
            """,
        textwrap.indent(hooks, "        "),
    )


def run_failing(tmp_path: Path, *, point: str, env: dict[str, str]) -> tuple[dict, list, Server]:
    inputs = {"acme.login": {"password": SECRET}}
    server = Server([failing_file(tmp_path, point=point)], tmp_path, env=env)
    with server, server.client() as client:
        session_id = client.post(
            "/v1/sessions", json={"agent": "failing", "inputs": inputs}
        ).json()["id"]
        if point == "on_destroy":
            wait_status(client, session_id, "waiting")
            client.delete(f"/v1/sessions/{session_id}")
        failed = wait_status(client, session_id, "failed")
        events = sse_events(client, session_id)
        listed = client.get("/v1/sessions").text
    assert DETAIL not in json.dumps(events) and DETAIL not in listed
    assert DETAIL.encode() not in server.database_bytes()
    assert SECRET not in server.stderr()
    return failed, events, server


@pytest.mark.parametrize("point", ["on_create", "on_destroy"])
def test_a_hook_error_reaches_clients_as_hook_and_type_only(tmp_path: Path, point: str) -> None:
    quiet = {name: "" for name in ("RUNNER_DEBUG", "AGENTS_SDK_DEBUG")}
    failed, events, server = run_failing(tmp_path, point=point, env=quiet)
    assert failed["error"] == f"hook broken.{point} failed: StepFailedError"
    hook_failed = next(e for e in events if e["event"] == "hook_failed")
    assert hook_failed["hook"] == "broken" and hook_failed["point"] == point
    assert hook_failed["error_type"] == "StepFailedError" and "error" not in hook_failed
    step_failed = next(e for e in events if e["event"] == "step_failed")
    assert "error" not in step_failed
    # Without the debug switch the log names the hook, not what it said.
    assert DETAIL not in server.stderr()


@pytest.mark.parametrize("switch", ["RUNNER_DEBUG", "AGENTS_SDK_DEBUG"])
@pytest.mark.parametrize("point", ["on_create", "on_destroy"])
def test_the_full_hook_error_is_in_the_log_with_the_debug_switch(
    tmp_path: Path, point: str, switch: str
) -> None:
    env = {"RUNNER_DEBUG": "", "AGENTS_SDK_DEBUG": "", switch: "1"}
    failed, _, server = run_failing(tmp_path, point=point, env=env)
    assert failed["error"] == f"hook broken.{point} failed: StepFailedError"
    log = server.stderr()
    assert DETAIL in log
    assert f"{DETAIL} ***" in log  # scrubbed of the secret input


def test_serve_refuses_to_start_when_a_backend_needs_a_missing_extra(tmp_path: Path) -> None:
    # koyeb-sdk hidden from the server: importlib finds no module ``koyeb``.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['koyeb'] = None\n")
    config = tmp_path / "cloud.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              name: cloud
              model: local-model
              environment:
                sandbox: mistral
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(hide), "RUNNER_SERVE_TOKEN": "t" * 20}
    result = subprocess.run(
        [*RUNNER_CLI, "serve", str(config), "--port", "0", "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert f"{config}: sandbox: mistral: MistralSandbox needs the 'koyeb' extra" in result.stderr
    assert "pip install 'sandbox-runner[koyeb]'" in result.stderr
    assert not (tmp_path / "out" / "runner-serve.db").exists()
