"""`runner render` output is a shell script whose only commands are the `run` commands.

Every other line (headers, write/save/upload descriptions) is a comment, even
when a templated value holds a newline: the output is piped into a real bash
here, and nothing but the run commands may happen.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

from runner.config.render import RenderedStep, plan_text

CONFIG = """\
version: 1
inputs:
  t.value:
    as: v
    schema:
      type: object
      properties:
        text: {type: string}
      required: [text]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: hostile
        on_create:
          - write: "{{ v.text }}"
            content: "{{ v.text }}"
          - run: echo {{ v.text }} > value.txt
          - upload: "files/{{ v.text }}"
            to: "{{ v.text }}"
          - run: |-
              echo first > lines.txt
              echo second >> lines.txt
          - run: echo continued\\
          - write: "{{ v.text }}"
            content: a trailing backslash must not join this line to the command
        on_destroy:
          - save: "{{ v.text }}"
            to: "saved/{{ v.text }}"
"""

HOSTILE = [
    "a\n$(touch CANARY)",
    "a\n;touch CANARY",
    "a\ntouch CANARY",
    "a\n`touch CANARY`",
    "a\r\ntouch CANARY",
    "a\n\ntouch CANARY\n",
    "$(touch CANARY);touch CANARY",
    "a\n#\ntouch CANARY",
    "a\\\ntouch CANARY",
]


def render(tmp_path: Path, value: str) -> str:
    config = tmp_path / "agent.yaml"
    config.write_text(CONFIG)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"t.value": {"text": value}}))
    result = subprocess.run(
        [*RUNNER_CLI, "render", str(config), "--inputs", str(inputs)],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode("utf-8")


@pytest.mark.parametrize("value", HOSTILE)
def test_piping_render_into_bash_runs_only_the_run_commands(tmp_path, value) -> None:
    output = render(tmp_path, value)
    quoted = "'" + value.replace("'", "'\"'\"'") + "'"
    # The run commands appear verbatim, their own newlines included.
    assert f"echo {quoted} > value.txt\n" in output
    assert "echo first > lines.txt\necho second >> lines.txt\n" in output
    assert "echo continued\\\n" in output
    shell = tmp_path / "shell"
    shell.mkdir()
    subprocess.run(["bash"], input=output.encode(), cwd=shell, check=True, timeout=30)
    assert sorted(p.name for p in shell.iterdir()) == ["lines.txt", "value.txt"]
    assert (shell / "value.txt").read_bytes().decode() == value + "\n"
    assert (shell / "lines.txt").read_text() == "first\nsecond\n"


def test_every_line_of_a_description_is_a_comment() -> None:
    steps = [
        RenderedStep("h\nx", "on_create", "write", "write a\nb\r\x1b[2Kc"),
        RenderedStep("h\nx", "on_create", "run", "echo one\necho two\n"),
    ]
    assert plan_text(steps) == textwrap.dedent(
        """\
        # h
        # x.on_create
        # write a
        # b\\r\\x1b[2Kc
        echo one
        echo two
        """
    )
    assert plan_text([]) == "# no hook steps run (no sandbox, or no hooks)\n"
