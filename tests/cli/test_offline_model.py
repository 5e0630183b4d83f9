"""``runner run --prompt`` with no model endpoint reachable (issue 31): one
line that names what to set, the exit code README documents, never a
traceback.  The real CLI, offline: the endpoint is a loopback port that
nothing listens on (bound, then closed), so the test does not depend on
whether this machine has a network.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(tmp_path: Path, agent: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nagent:\n  model: some-model\n  max_retries: 1\n"
        f"{agent}  environment:\n    sandbox: local\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("MISTRAL_API_KEY", "OPENAI_API_KEY")}
    return subprocess.run(
        [*RUNNER_CLI, "run", "-q", str(path), "--prompt", "hi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**clean, "TMPDIR": str(tmp_path), **env},
    )


@pytest.mark.parametrize(
    ("agent", "env", "names"),
    [
        (
            "",
            {"MISTRAL_API_KEY": "not-a-key", "MISTRAL_SERVER_URL": "http://127.0.0.1:PORT/v1"},
            "set the agent's base_url to a reachable OpenAI-compatible server "
            "(MISTRAL_SERVER_URL for another Mistral API address)",
        ),
        (
            "  base_url: http://127.0.0.1:PORT/v1\n",
            {},
            "start the server, or set the agent's base_url to where it runs",
        ),
    ],
    ids=["mistral-api", "base-url"],
)
def test_an_unreachable_model_is_one_line_naming_what_to_set(
    tmp_path: Path, agent: str, env: dict[str, str], names: str
) -> None:
    port = str(closed_port())
    done = run(
        tmp_path,
        agent.replace("PORT", port),
        {key: value.replace("PORT", port) for key, value in env.items()},
    )
    assert done.returncode == 1, done.stderr  # README: a turn that failed
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"runner: turn failed: model error: ModelError: cannot reach the model at "
        f"http://127.0.0.1:{port}/v1/chat/completions (connection failed: ConnectError, "
        "after 2 attempts); "
    ), line
    assert line.endswith(names), line
    assert "Traceback" not in done.stderr


def test_no_key_for_the_mistral_api_is_one_line_naming_it(tmp_path: Path) -> None:
    done = run(tmp_path, "", {})
    assert done.returncode == 2, done.stderr  # README: a configuration error
    assert done.stderr == (
        "runner: model 'some-model' runs on the Mistral API, which needs MISTRAL_API_KEY; "
        "set it, or give the agent a base_url for an OpenAI-compatible server\n"
    )
