"""Every example runs here: the local ones always, the Docker ones on the test image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_IMAGE

from runner.sandboxes.docker.environment import LABEL_OWNER_PID

EXAMPLES = Path(__file__).parents[2] / "examples"


def run_example(name: str, *args: str, out: Path, docker: bool = False, docker_client=None):
    """Run ``runner run`` on an example; with Docker, check its process left no container."""
    env = {**os.environ}
    if docker:
        env["RUNNER_DOCKER_IMAGE"] = TEST_IMAGE
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner",
            "run",
            str(EXAMPLES / name),
            "--output-dir",
            str(out),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    stdout, stderr = process.communicate(timeout=300)
    if docker_client is not None:
        left = docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_OWNER_PID}={process.pid}"}
        )
        assert left == [], "the example's runner left containers behind"
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_git_identity_example(tmp_path) -> None:
    result = run_example("git-identity.yaml", out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "repo-log.txt").read_text() == "Review Bot <bot@example.com> Start\n"


def test_python_hooks_example_mixes_yaml_and_python_hooks(tmp_path) -> None:
    result = run_example(
        "python-hooks.yaml", "--input", "acme.repository.repository=acme/api", out=tmp_path
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["title"] == "Nightly review"
    assert report["repository"] == "acme/api@main"
    assert report["files"] == ["README.md"]
    order = [line.strip() for line in result.stderr.splitlines() if line.strip().endswith(")")]
    destroy = [line.split()[0] for line in order if ".on_destroy" in line]
    assert destroy == ["seed.on_destroy", "WriteReport.on_destroy", "export-report.on_destroy"]


@pytest.mark.docker
def test_seed_workspace_example_on_docker(tmp_path, docker_client) -> None:
    result = run_example(
        "seed-workspace.yaml", out=tmp_path, docker=True, docker_client=docker_client
    )
    assert result.returncode == 0, result.stderr
    assert "sandbox docker ready" in result.stderr
    assert (tmp_path / "saved-notes.md").read_text() == "Run the tests with pytest.\n"


@pytest.mark.docker
def test_record_repository_example_on_docker(tmp_path, docker_client) -> None:
    result = run_example(
        "record-repository.yaml",
        "--input",
        "acme.repository.provider=github",
        "--input",
        "acme.repository.repository=acme/api",
        "--input",
        "acme.repository.revision=main",
        "--json",
        out=tmp_path,
        docker=True,
        docker_client=docker_client,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    step = next(e for e in events if e["event"] == "step_finished")
    assert step["title"] == "printf '%s@%s\\n' 'acme/api' 'main' > REPOSITORY"
    assert step["exit_code"] == 0


@pytest.mark.docker
def test_ci_pipeline_example_on_docker(tmp_path, docker_client) -> None:
    result = run_example(
        "ci-pipeline.yaml",
        "--inputs",
        str(EXAMPLES / "ci" / "inputs.json"),
        "--json",
        out=tmp_path,
        docker=True,
        docker_client=docker_client,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "nightly" / "job.txt").read_text() == "nightly attempt 1\n"
    checks = (tmp_path / "nightly" / "checks.txt").read_text()
    assert checks.startswith("python: Python 3")
    assert json.loads(result.stdout.splitlines()[-1])["exit_code"] == 0
