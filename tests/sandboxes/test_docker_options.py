"""Options of the Docker sandbox that need no Docker engine: refusals at
construction, the default image, and the error when no engine answers.

They were under the ``docker`` marker (``tests/sandboxes/test_docker_sandbox.py``), so
``-m "not docker"`` dropped them although they run anywhere.
"""

from __future__ import annotations

import pytest
from conftest import TEST_IMAGE

import runner as agents
from runner.sandboxes.docker.environment import LocalDockerSandbox


def test_network_allow_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="cannot enforce Network.allow"):
        LocalDockerSandbox(network=agents.Network.allow(hosts=["packages.example.com"]))


def test_the_image_defaults_to_the_environment_variable(monkeypatch) -> None:
    monkeypatch.setenv("RUNNER_DOCKER_IMAGE", "my/offline:image")
    assert LocalDockerSandbox().image == "my/offline:image"
    monkeypatch.delenv("RUNNER_DOCKER_IMAGE")
    assert LocalDockerSandbox().image == "python:3.12-bookworm"


@pytest.mark.anyio
async def test_an_unreachable_daemon_says_how_to_start_docker(tmp_path) -> None:
    env = LocalDockerSandbox(image=TEST_IMAGE, docker_host=f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(agents.SandboxUnavailableError) as info:
        await agents.Agent(model="m", environment=env).start_session()
    assert "not reachable" in str(info.value)
    assert "dockerd" in str(info.value)
