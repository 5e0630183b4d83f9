"""The shell helper's ``relay`` on its own: a piece of output is offered at
once, whatever the writer is doing (stop 44).

The relay (``helpers/exec_helper.sh``) reads a command's output a piece at a
time and offers each to the helper's writer, which sends it as an output
frame and removes its file.  It once kept one piece in flight: a piece that
came while the writer still sent the last waited in a buffer until the
command printed again, so a command that printed two lines and then waited
showed only the first (the flaky ``test_progress_live`` case).  Here the
function runs in a real ``dash`` and ``bash --posix`` on this machine, fed
through a pipe, its notes read from a FIFO as the writer reads them; the
test is the writer, and decides when a piece counts as sent.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from runner.sandboxes.docker.channel import helper_source

SHELLS = [["dash"], ["bash", "--posix"]]


def relay_script() -> str:
    """``note`` and ``relay`` from the helper, then a call of ``relay`` with
    its pieces in ``$1.cN`` and its notes on the FIFO ``$2``."""
    source = helper_source("exec_helper.sh")
    note = re.search(r"^note\(\) \{.*\}\n", source, re.M)
    relay = re.search(r"^relay\(\) \{\n.*?^\}\n", source, re.S | re.M)
    assert note is not None and relay is not None
    return "set -f\n" + note.group(0) + relay.group(0) + 'relay 7 stdout "$1" 3>"$2" >/dev/null\n'


class Notes:
    """The writer's side of the FIFO: one note (a list of words) at a time."""

    def __init__(self, fifo: Path) -> None:
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.buffer = b""

    def next(self, timeout: float) -> list[str] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if select.select([self.fd], [], [], left)[0]:
                self.buffer += os.read(self.fd, 4096)
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode().split()


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_piece_that_comes_while_the_last_is_sent_is_offered_at_once(
    tmp_path: Path, shell: list[str]
) -> None:
    if shutil.which(shell[0]) is None:
        pytest.skip(f"no {shell[0]} on this machine")
    fifo = tmp_path / "notes"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [*shell, "-c", relay_script(), "sh", str(tmp_path / "out"), str(fifo)],
        stdin=subprocess.PIPE,
    )
    notes = Notes(fifo)
    try:
        assert process.stdin is not None
        process.stdin.write(b"one\n")
        process.stdin.flush()
        first = notes.next(10)
        assert first is not None and first[:5] == ["7", "chunk", "stdout", "4", "false"]
        assert Path(first[5]).read_bytes() == b"one\n"
        # the writer is still sending "one" when "two" comes; then the command is quiet
        process.stdin.write(b"two\n")
        process.stdin.flush()
        time.sleep(0.5)
        os.remove(first[5])  # sent
        second = notes.next(5)
        assert second is not None, "the second piece waited for more output"
        assert Path(second[5]).read_bytes() == b"two\n"
        assert second[3:5] == ["4", "false"]
    finally:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=10)
        os.close(notes.fd)


def test_pieces_the_writer_cannot_take_are_dropped_and_the_next_says_so(tmp_path: Path) -> None:
    """A writer that sends nothing: at most 64 KiB wait, then pieces are
    dropped, and the first offered after a drop says ``gap: true`` (the
    runner drops the line it cut); the command is never held up."""
    fifo = tmp_path / "notes"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        ["dash", "-c", relay_script(), "sh", str(tmp_path / "out"), str(fifo)],
        stdin=subprocess.PIPE,
    )
    notes = Notes(fifo)
    try:
        assert process.stdin is not None
        offered = []
        for _ in range(3):  # 3 x 30000 bytes: the third would pass 64 KiB
            process.stdin.write(b"x" * 29999 + b"\n")
            process.stdin.flush()
            note = notes.next(2)
            if note is not None:
                offered.append(note)
            time.sleep(0.2)
        assert [n[3] for n in offered] == ["30000", "30000"], offered
        for note in offered:
            os.remove(note[5])  # sent, at last
        process.stdin.write(b"after\n")
        process.stdin.flush()
        after = notes.next(5)
        assert after is not None and after[3:5] == ["6", "true"], after
    finally:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=10)
        os.close(notes.fd)
