"""The Docker engine going away mid-session: a typed error, never a hang.

The test runs a private dockerd of its own (own socket, data and exec roots,
no container networking), so stopping it disturbs nothing else.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import pytest
from conftest import TEST_IMAGE

import runner as agents

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


class PrivateEngine:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="runner-engine-"))
        self.host = f"unix://{self.root}/docker.sock"
        self.process: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, **kwargs)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "dockerd",
                "--bridge=none",
                "--iptables=false",
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "pid"),
                "-H",
                self.host,
            ],
            stdout=(self.root / "log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        for _ in range(120):
            if self.cli("version").returncode == 0:
                return
            time.sleep(0.5)
        raise RuntimeError(
            "the private dockerd did not start: " + (self.root / "log").read_text()[-2000:]
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.process = None


@pytest.fixture
def engine(docker_client):
    if shutil.which("dockerd") is None:
        if os.environ.get("CI"):
            pytest.fail("dockerd is not installed")
        pytest.skip("dockerd is not installed")
    private = PrivateEngine()
    private.start()
    try:
        saved = subprocess.Popen(["docker", "save", TEST_IMAGE], stdout=subprocess.PIPE)
        loaded = private.cli("load", stdin=saved.stdout, timeout=300)
        saved.wait(timeout=300)
        assert loaded.returncode == 0, loaded.stderr
        yield private
    finally:
        private.stop()
        shutil.rmtree(private.root, ignore_errors=True)


async def test_an_engine_that_stops_mid_session_gives_typed_errors_and_no_hang(engine) -> None:
    env = agents.LocalDockerSandbox(image=TEST_IMAGE, docker_host=engine.host)
    session = await agents.Agent(model="m", environment=env).start_session()
    assert (await session.sandbox.execute("echo ok")).stdout == "ok\n"
    engine.stop()  # dockerd stops its containers as it shuts down
    with anyio.fail_after(60):
        lost = await session.sandbox.execute("echo during")
    assert lost.exit_code == 255
    assert "exec channel was lost" in lost.stderr
    with anyio.fail_after(60), pytest.raises(agents.SandboxUnavailableError, match="Docker engine"):
        await session.sandbox.execute("echo after")
    engine.start()
    with anyio.fail_after(60):
        await session.cancel()
    assert engine.cli("ps", "-aq", text=True).stdout.strip() == ""
