"""The runner command as a user runs it: a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RUNNER_CLI, cli_package_dir

import runner


def runner_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUNNER_CLI, *args], capture_output=True, text=True, timeout=60)


def test_the_cli_under_test_is_the_installed_wheel_in_ci() -> None:
    """scripts/test points RUNNER_CLI at the built wheel's ``runner``: under CI
    the suite's CLI tests must run that, not this checkout."""
    import os

    if not os.environ.get("CI") and not os.environ.get("RUNNER_CLI"):
        pytest.skip("RUNNER_CLI is not set outside scripts/test; this run uses the checkout")
    assert os.environ.get("RUNNER_CLI"), "CI is set but RUNNER_CLI is not: run scripts/test"
    package = cli_package_dir()
    checkout = Path(__file__).resolve().parents[2]
    assert (package / "__init__.py").is_file() and checkout not in package.parents, package
    assert "site-packages" in package.parts


def test_version() -> None:
    result = runner_cli("--version")
    assert result.returncode == 0
    assert runner.__version__ in result.stdout


def test_help_does_not_import_docker() -> None:
    code = (
        "import sys; from runner.cli.main import main\n"
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
    example = Path(__file__).parents[2] / "examples" / "seed_workspace.py"
    result = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "DangerousLocalWarning" in result.stderr
    assert (tmp_path / "saved-notes.md").read_text() == "Run the tests with pytest.\n"
