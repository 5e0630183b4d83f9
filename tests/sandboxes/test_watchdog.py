"""The local command's watchdog, both kinds (GNU ``timeout`` and the Python
fallback), started as ``LocalSandbox`` starts it and then left alone, as
a killed runner leaves it: its process group dies at the deadline, and an
ordinary exit status passes through.  (The server killed mid-step:
``tests/serve/test_serve_durability.py``.)"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from serve_process import process_alive, wait_for

from runner.sandboxes.watchdog import gnu_timeout, watched

#: GNU ``timeout`` where it is installed (every Linux this runs on); the
#: fallback, forced, everywhere.
KINDS = ["gnu", "python"]


def start(kind: str, script: str, timeout: float) -> subprocess.Popen[bytes]:
    assert kind == "python" or gnu_timeout() is not None
    return subprocess.Popen(
        watched(["sh", "-c", script], timeout, python=kind == "python"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )


def group_members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid and process_alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_the_watchdog_kills_the_whole_group_at_the_deadline(kind: str) -> None:
    watchdog = start(kind, "sleep 600 & echo $!; sleep 600", 0.5)
    assert watchdog.stdout is not None
    child = int(watchdog.stdout.readline())
    try:
        wait_for(lambda: watchdog.poll() is not None, what="the watchdog to fire")
        wait_for(lambda: not group_members(watchdog.pid), what="the group to be gone")
        assert not process_alive(child)  # started in the background: killed too
    finally:
        for pid in group_members(watchdog.pid):
            os.kill(pid, signal.SIGKILL)
        watchdog.stdout.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("script", "status"), [("echo hi; exit 3", 3), ("kill -TERM $$", 143)])
def test_the_commands_exit_status_passes_through(kind: str, script: str, status: int) -> None:
    watchdog = start(kind, script, 60)
    out, _ = watchdog.communicate(timeout=60)
    code = watchdog.returncode
    assert (128 - code if code < 0 else code) == status
    assert out == (b"hi\n" if status == 3 else b"")
