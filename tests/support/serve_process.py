"""A real ``runner serve`` process for the tests, and a client for it.

The server is the installed CLI (``conftest.RUNNER_CLI``) on a free loopback
port (``--port 0``; the port is read from the line it prints when it
listens).  Everything waits for conditions, never for fixed times.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from conftest import RUNNER_CLI

TOKEN = "test-token-0123456789abcdef"


def wait_for(condition: Callable[[], Any], *, what: str, timeout: float = 30.0) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Server:
    """``runner serve FILES`` in its own process; stderr goes to a file."""

    def __init__(
        self,
        files: list[Path],
        workdir: Path,
        *,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        token: str | None = TOKEN,
        db: Path | None = None,
        args: list[str] | None = None,
        max_open_files: int | None = None,
    ) -> None:
        self.files = files
        #: The server's RLIMIT_NOFILE, if given (its file descriptors run out).
        self.max_open_files = max_open_files
        #: More command-line arguments (``--agent``, ``--max-sessions``, ...);
        #: a short drain unless the test sets one (stop() waits 20 s at most).
        self.args = list(args or [])
        if "--drain-timeout" not in self.args:
            self.args += ["--drain-timeout", "5"]
        self.workdir = workdir
        self.output_dir = workdir / "out"
        self.tmp = workdir / "tmp"  # the local sandboxes' workspaces live here
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "TMPDIR": str(self.tmp), **(env or {})}
        self.env.pop("RUNNER_SERVE_TOKEN", None)
        if token is not None:
            self.env["RUNNER_SERVE_TOKEN"] = token
        self.host = host
        self.token = token
        self.db = db
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "server.log"
        self.url = ""

    def start(self) -> Server:
        self.log.write_bytes(b"")
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *RUNNER_CLI,
                    "serve",
                    *map(str, self.files),
                    "--host",
                    self.host,
                    "--port",
                    "0",
                    "--output-dir",
                    str(self.output_dir),
                    *(["--db", str(self.db)] if self.db else []),
                    *self.args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                cwd=self.workdir,
                preexec_fn=self._limit_files if self.max_open_files else None,
            )

        def listening() -> str | None:
            found = re.search(r"on (https?://127\.0\.0\.1:\d+) ", self.stderr())
            if found is None and self.process.poll() is not None:
                raise AssertionError(
                    f"the server exited {self.process.returncode}: {self.stderr()}"
                )
            return found.group(1) if found else None

        self.url = wait_for(listening, what="the server to listen")
        return self

    def _limit_files(self) -> None:
        import resource

        limit = self.max_open_files
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def terminate(self) -> int:
        """SIGTERM, as a rolling restart sends it; the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def drain_in_background(self) -> Draining:
        """SIGTERM from another thread (``terminate`` waits for the exit),
        returned once the server says it drains: the test acts meanwhile."""
        return Draining(self)

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind runs."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def database_bytes(self) -> bytes:
        """The SQLite file with its WAL and shared-memory files, as bytes."""
        db = self.db or self.output_dir / "runner-serve.db"
        return b"".join(
            Path(f"{db}{suffix}").read_bytes()
            for suffix in ("", "-wal", "-shm")
            if Path(f"{db}{suffix}").exists()
        )

    def workspaces(self) -> list[Path]:
        return sorted(self.tmp.glob("sandbox-runner-local-*/workspace"))


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_with_home(home: Path) -> list[int]:
    """This user's processes whose ``HOME`` is ``home`` (a local sandbox's
    commands and what they started)."""
    wanted = f"HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environ and process_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def lines(path: Path) -> int:
    """How many lines a counter file has (each run of a counted step adds one)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_status(client: httpx.Client, session_id: str, *statuses: str) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        last.update(client.get(f"/v1/sessions/{session_id}").json())
        return dict(last) if last["status"] in statuses else None

    try:
        return wait_for(reached, what=f"session {session_id} to be {' or '.join(statuses)}")
    except AssertionError as late:  # say where it stayed
        raise AssertionError(
            f"{late}; last {last.get('status')!r}: {last.get('error')!r}"
        ) from None


def sse_events(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    """Every event of a session's stream, read until the server ends it."""
    import json

    events = []
    with client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


class Draining:
    """A server's drain under way (``Server.drain_in_background``)."""

    def __init__(self, server: Server) -> None:
        self.exit_code: list[int] = []
        self.thread = threading.Thread(target=lambda: self.exit_code.append(server.terminate()))
        self.thread.start()
        wait_for(lambda: "stopping: no new sessions" in server.stderr(), what="the drain")

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float) -> list[int]:
        """Wait for the server's exit; its exit code, in a list (empty: still running)."""
        self.thread.join(timeout=timeout)
        return self.exit_code
