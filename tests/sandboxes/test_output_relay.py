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
    room = re.search(r"^room\(\) \{\n.*?^\}\n", source, re.S | re.M)
    assert note is not None and relay is not None and room is not None
    functions = note.group(0) + relay.group(0) + room.group(0)
    return "set -f\n" + functions + 'relay 7 stdout "$1" 3>"$2" >/dev/null\n'


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


def start(tmp_path: Path, shell: list[str] | None = None) -> tuple[subprocess.Popen[bytes], Notes]:
    """The relay in ``shell`` (dash), fed through a pipe, its notes on a FIFO."""
    fifo = tmp_path / "notes"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [*(shell or ["dash"]), "-c", relay_script(), "sh", str(tmp_path / "out"), str(fifo)],
        stdin=subprocess.PIPE,
    )
    return process, Notes(fifo)


def write(process: subprocess.Popen[bytes], data: bytes) -> None:
    assert process.stdin is not None
    process.stdin.write(data)
    process.stdin.flush()


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_piece_that_comes_while_the_last_is_sent_is_offered_at_once(
    tmp_path: Path, shell: list[str]
) -> None:
    if shutil.which(shell[0]) is None:
        pytest.skip(f"no {shell[0]} on this machine")
    process, notes = start(tmp_path, shell)
    try:
        write(process, b"one\n")
        first = notes.next(10)
        assert first is not None and first[:5] == ["7", "chunk", "stdout", "4", "false"]
        assert Path(first[5]).read_bytes() == b"one\n"
        # the writer is still sending "one" when "two" comes; then the command is quiet
        write(process, b"two\n")
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


def test_what_the_writer_cannot_take_yet_waits_and_past_64_kib_the_oldest_goes(
    tmp_path: Path,
) -> None:
    """A writer that sends nothing: 64 KiB are offered, the next wait, and
    once what waits would pass 64 KiB the oldest of it is dropped; the
    piece offered after a drop says ``gap: true`` (the runner drops the line
    it cut).  The command is never held up."""
    process, notes = start(tmp_path)
    try:
        offered = []
        for _ in range(5):  # 2 offered, 2 wait, the fifth drops those two
            write(process, b"x" * 29999 + b"\n")
            note = notes.next(1)
            if note is not None:
                offered.append(note)
        assert [n[3] for n in offered] == ["30000", "30000"], offered
        for note in offered:
            os.remove(note[5])  # sent, at last
        write(process, b"after\n")
        after = notes.next(5)
        assert after is not None and after[3:5] == ["30006", "true"], after
        assert Path(after[5]).read_bytes() == b"x" * 29999 + b"\nafter\n"
    finally:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=10)
        os.close(notes.fd)


def test_the_last_piece_waits_for_the_writer_at_the_end(tmp_path: Path) -> None:
    """Output that ends while the writer is behind: its last piece is offered
    once the writer has room, before the relay ends (the answer comes after
    it), not dropped: ``echo tail`` after 3 MB of output showed (the
    streamed-result test caught a relay that dropped it)."""
    process, notes = start(tmp_path)
    try:
        write(process, b"y" * 39999 + b"\n")
        first = notes.next(1)
        assert first is not None and first[3] == "40000", first
        write(process, b"y" * 39999 + b"\n")
        assert notes.next(1) is None  # 80,000 bytes would pass 64 KiB: it waits
        write(process, b"tail\n")
        assert process.stdin is not None
        process.stdin.close()
        assert notes.next(0.5) is None  # no room yet
        assert process.poll() is None  # the relay waits for the writer
        os.remove(first[5])
        last = notes.next(5)
        assert last is not None and Path(last[5]).read_bytes() == b"y" * 39999 + b"\ntail\n"
        assert process.wait(timeout=10) == 0
    finally:
        os.close(notes.fd)
