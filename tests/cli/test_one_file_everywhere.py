"""Refusals a user causes are one line (issue 31, item 4), and one file runs
everywhere it can (item 5): the real ``runner`` on the local sandbox."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import RUNNER_CLI


def runner(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "TMPDIR": str(cwd)},
    )


def write(tmp_path: Path, environment: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text("version: 1\nagent:\n  model: m\n  environment:\n" + environment)
    return path


# --- item 4: one line, never a traceback -------------------------------------------------

MISSING_SAVE = """\
    sandbox: local
    hooks:
      - name: h
        on_destroy:
          - save: not-there.md
            to: out.md
"""


def test_a_missing_save_file_is_one_line_naming_it_and_missing_ok(tmp_path) -> None:
    result = runner("run", str(write(tmp_path, MISSING_SAVE)), "-q", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    expected = (
        "sandbox hook h.on_destroy failed: StepFailedError: step 1 (save not-there.md -> out.md) "
        "failed: not-there.md does not exist in the sandbox, so nothing was saved; add "
        "missing_ok: true to the step if it may be absent"
    )
    assert lines[-1] == f"runner: {expected}"
    # The lifecycle logs the failure too (with the session id): no traceback with it.
    assert all(expected in line for line in lines), lines
    assert not (tmp_path / "out.md").exists()


def test_missing_ok_skips_the_missing_file(tmp_path) -> None:
    config = write(
        tmp_path, MISSING_SAVE.replace("to: out.md", "to: out.md\n            missing_ok: true")
    )
    result = runner("run", str(config), "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_a_timeout_names_the_limit_and_the_step_key(tmp_path) -> None:
    config = write(
        tmp_path,
        "    sandbox: local\n    hooks:\n      - name: h\n        on_create:\n"
        "          - run: sleep 30\n            timeout_seconds: 0.5\n",
    )
    result = runner("run", str(config), "-q", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "runner: hook h.on_create failed: StepFailedError: step 1 (sleep 30) failed: command "
        "timed out after 0.5s (the step's timeout_seconds; raise it for a longer command)"
    ]


def test_a_timeout_by_the_default_names_default_exec_timeout_seconds(tmp_path) -> None:
    config = write(
        tmp_path,
        "    sandbox: local\n    default_exec_timeout_seconds: 0.5\n    hooks:\n"
        "      - name: h\n        on_create: [{run: sleep 30}]\n",
    )
    result = runner("run", str(config), "-q", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "runner: hook h.on_create failed: StepFailedError: step 1 (sleep 30) failed: command "
        "timed out after 0.5s (the environment's default_exec_timeout_seconds; give the step "
        "timeout_seconds: N for a longer command)"
    ]


# --- item 5: one file runs everywhere it can ---------------------------------------------

DOCKER_FILE = """\
    sandbox: docker
    image: python:3.12-slim
    hooks:
      - name: deps
        cache: true
        on_create:
          - run: echo installed > deps.txt
        on_destroy:
          - save: deps.txt
            to: deps.txt
      - name: after
        on_create: [{run: 'true'}]
"""

WARNING = (
    "runner: warning: --sandbox local runs this file's commands (written for sandbox docker) "
    "on this machine with your rights, with no isolation; -q silences this"
)


def test_a_cached_docker_file_runs_on_the_local_sandbox_with_notices(tmp_path) -> None:
    config = write(tmp_path, DOCKER_FILE)
    result = runner("run", str(config), "--sandbox", "local", "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[:3] == [
        "runner: --sandbox local: ignoring image of the file",
        "runner: --sandbox local cannot snapshot: cached hook deps (cache: true) runs its "
        "on_create in every session, as with --no-cache",
        WARNING,
    ]
    assert result.stderr.count("no isolation") == 1
    assert (tmp_path / "out" / "deps.txt").read_text() == "installed\n"


def test_quiet_silences_the_notices_and_the_warning(tmp_path) -> None:
    config = write(tmp_path, DOCKER_FILE)
    result = runner(
        "run", str(config), "--sandbox", "local", "-q", "--output-dir", "o", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_render_takes_the_cache_override_too(tmp_path) -> None:
    result = runner("render", str(write(tmp_path, DOCKER_FILE)), "--sandbox", "local", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cached hook deps (cache: true) runs its on_create in every session" in result.stderr
    assert "no isolation" not in result.stderr  # render runs nothing


def test_no_warning_when_the_file_itself_chose_local(tmp_path) -> None:
    config = write(
        tmp_path, "    sandbox: local\n    hooks:\n      - {name: h, on_create: [{run: 'true'}]}\n"
    )
    for args in ((), ("--sandbox", "local")):
        result = runner("run", str(config), *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "no isolation" not in result.stderr
        assert "warning" not in result.stderr


def test_the_warning_comes_after_the_inputs_are_found_valid(tmp_path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        "version: 1\ninputs:\n  t.v:\n    as: v\n    schema:\n      type: object\n"
        "      properties: {x: {type: string, minLength: 1}}\n      required: [x]\n"
        "agent:\n  model: m\n  environment:\n    sandbox: docker\n    hooks:\n"
        "      - name: h\n        on_create: [{run: 'echo {{ v.x }}'}]\n"
    )
    for given in ((), ("--input", "t.v.x=")):
        result = runner("run", str(config), "--sandbox", "local", "--json", *given, cwd=tmp_path)
        assert result.returncode == 2
        (line,) = result.stderr.splitlines()  # the input error only: no warning before it
        assert line.startswith("runner: agent default_agent"), line
        (event,) = [json.loads(e) for e in result.stdout.splitlines()]
        assert event["event"] == "result" and event["exit_code"] == 2
    good = runner("run", str(config), "--sandbox", "local", "--input", "t.v.x=a", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert good.stderr.splitlines()[0] == WARNING


def test_a_python_hook_with_cache_on_the_local_sandbox_is_one_notice(tmp_path) -> None:
    (tmp_path / "cached_hooks.py").write_text(
        "import runner\n\n\nclass Deps(runner.SandboxHook):\n    cache = True\n\n"
        "    async def on_create(self, ctx):\n        await ctx.sandbox.execute('true')\n"
    )
    config = write(tmp_path, "    sandbox: local\n    hooks:\n      - python: cached_hooks:Deps\n")
    notice = (
        "warning: hook Deps is cached (cache = True), but the local sandbox cannot snapshot "
        "a workspace: its on_create runs in every session"
    )
    result = runner("run", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"runner: {notice}"
    assert result.stderr.count("cannot snapshot") == 1
    assert runner("run", str(config), "-q", cwd=tmp_path).stderr == ""
    checked = runner("validate", str(config), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.splitlines() == [f"runner: {config}: {notice}"]
