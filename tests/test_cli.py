"""The runner command as a user runs it: a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import runner


def runner_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args], capture_output=True, text=True, timeout=60
    )


def test_version() -> None:
    result = runner_cli("--version")
    assert result.returncode == 0
    assert runner.__version__ in result.stdout


def test_help_does_not_import_docker() -> None:
    code = (
        "import sys; from runner.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('docker' in sys.modules, 'jinja2' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == "False False"


@pytest.mark.docker
def test_gc_runs_against_the_engine(docker_client) -> None:
    result = runner_cli("gc")
    assert result.returncode == 0, result.stderr
    assert "removed" in result.stderr


def test_the_python_quickstart_example_runs(tmp_path) -> None:
    example = Path(__file__).parent.parent / "examples" / "seed_workspace.py"
    result = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "DangerousLocalWarning" in result.stderr
    assert (tmp_path / "saved-notes.md").read_text() == "Run the tests with pytest.\n"
