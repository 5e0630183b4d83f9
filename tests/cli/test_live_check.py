"""``scripts/live-check`` run against the stand-ins, so the script itself cannot rot.

Against the real services it is run by hand (it costs money); here the same
script talks to tests/support/koyeb_server.py and tests/support/chat_server.py, which speak
the real protocols.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from chat_server import ChatServer, assistant
from conftest import TEST_IMAGE
from koyeb_server import FakeCloud, containers_left_by, point_sdk_at

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "live-check"


def live_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHON": sys.executable},
    )


def test_without_keys_it_says_what_was_not_checked() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KOYEB_API_TOKEN", "MISTRAL_API_KEY")}
    result = live_check(env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "live-check: KOYEB_API_TOKEN is not set: the cloud sandbox was NOT checked",
        "live-check: MISTRAL_API_KEY is not set: the Mistral API was NOT checked",
    ]


@pytest.mark.docker
def test_with_keys_it_checks_both_services(docker_client, monkeypatch) -> None:
    replies = [
        assistant(None, ("a1b2c3d4e", "bash", {"command": "cat FACT.txt"})),
        assistant("The secret colour is teal."),
    ]
    with FakeCloud(docker_client, TEST_IMAGE) as cloud, ChatServer(replies) as chat:
        point_sdk_at(monkeypatch, cloud)
        env = {**os.environ, "MISTRAL_API_KEY": "test-key", "MISTRAL_SERVER_URL": chat.url}
        result = live_check(env)
    assert containers_left_by(cloud, docker_client) == []
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "live-check: koyeb: 100 KiB of stderr came back whole, stdout apart",
        "live-check: koyeb: a binary file round trip",
        "live-check: koyeb: a missing cwd is exit 126, not an exception",
        "live-check: koyeb: the sandbox was deleted at close",
        "live-check: mistral: a turn with 1 tool call(s) completed",
    ]
    assert "test-key" not in result.stdout + result.stderr
