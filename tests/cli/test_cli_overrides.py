"""The command line chooses the backend and the output format, the file stays as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RUNNER_CLI, TEST_IMAGE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def runner(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "TMPDIR": str(cwd)},
    )


def docker_file_with_options(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\n"
        "agent:\n"
        "  model: m\n"
        "  environment:\n"
        "    sandbox: docker\n"
        "    memory: 1g\n"
        "    pids_limit: 100\n"
        "    hooks:\n"
        "      - name: h\n"
        "        on_create: [{run: 'echo hello > out.txt'}]\n"
        "        on_destroy: [{save: out.txt, to: out.txt}]\n"
    )
    return path


def test_sandbox_local_runs_a_docker_file_here_and_says_what_it_ignored(tmp_path) -> None:
    config = docker_file_with_options(tmp_path)
    result = runner("run", str(config), "--sandbox", "local", "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--sandbox local: ignoring memory, pids_limit of the file" in result.stderr
    assert "sandbox local ready" in result.stderr
    # The file was written for docker: its commands now run here, said once (issue 31).
    assert result.stderr.count("no isolation") == 1
    assert "runner: warning: --sandbox local runs this file's commands" in result.stderr
    assert (tmp_path / "out" / "out.txt").read_text() == "hello\n"


def test_a_file_that_chose_local_gets_no_isolation_warning(tmp_path) -> None:
    # Issue 31: the file's own choice is not warned about (it used to be, on every run).
    config = tmp_path / "agent.yaml"
    config.write_text(
        "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: local\n"
        "    hooks:\n      - {name: h, on_create: [{run: 'true'}]}\n"
    )
    loud = runner("run", str(config), cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert "warning" not in loud.stderr
    assert loud.stderr.startswith("runner: session ")
    quiet = runner("run", str(config), "--quiet", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


def test_render_takes_the_same_overrides(tmp_path) -> None:
    config = docker_file_with_options(tmp_path)
    result = runner("render", str(config), "--sandbox", "none", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "# no hook steps run (no sandbox, or no hooks)\n"


def test_image_applies_only_to_backends_with_images(tmp_path) -> None:
    config = docker_file_with_options(tmp_path)
    result = runner("run", str(config), "--sandbox", "local", "--image", "x:1", cwd=tmp_path)
    assert result.returncode == 2
    assert "--image applies to sandbox docker or mistral, not local" in result.stderr


@pytest.mark.docker
def test_image_replaces_the_files_image(tmp_path, docker_client) -> None:
    config = docker_file_with_options(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_DOCKER_IMAGE"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "run",
            str(config),
            "--image",
            TEST_IMAGE,
            "--output-dir",
            "out",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "out.txt").read_text() == "hello\n"


BROKEN = "version: 1\nagent:\n  model: m\n  enviroment: {sandbox: local}\n"


@pytest.mark.parametrize("kind", ["text", "github", "json"])
def test_validate_formats(tmp_path, kind) -> None:
    broken = tmp_path / "broken, odd:name.yaml"
    broken.write_text(BROKEN)
    good = EXAMPLES / "quickstart.yaml"
    result = runner("validate", "--format", kind, str(good), str(broken), cwd=tmp_path)
    assert result.returncode == 2
    if kind == "text":
        assert f"{broken}:4:3: unknown key 'enviroment'" in result.stderr
        assert f"{good}: ok" in result.stdout
    elif kind == "github":
        (line,) = result.stdout.splitlines()
        escaped = str(broken).replace(":", "%3A").replace(",", "%2C")
        assert line.startswith(f"::error file={escaped},line=4,col=3::unknown key 'enviroment'")
    else:
        report = json.loads(result.stdout)
        assert report["ok"] is False
        files = {entry["file"]: entry["problems"] for entry in report["files"]}
        assert files[str(good)] == []
        (problem,) = files[str(broken)]
        assert (problem["line"], problem["column"]) == (4, 3)
        assert problem["message"].startswith("unknown key 'enviroment'")
        assert problem["path"] == "agent.enviroment"
