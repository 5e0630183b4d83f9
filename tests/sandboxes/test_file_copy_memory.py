"""A Docker ``read_file`` holds the file once, and only while the caller does
(issue 30, item 2).

Over the exec channel the first piece's header gives the file's size, so
the pieces go straight into one buffer of that size, handed out without a
copy (no host temporary file, no join of pieces).  The bytes come back
beside the worker thread's result, not as it: an idle anyio worker keeps
its last result alive, which kept a second copy of a large file after the
caller had dropped it.  Memory is read from ``/proc/self/status``
(``VmHWM``, reset through ``clear_refs``); nothing is timed.
"""

from __future__ import annotations

import ctypes
import gc

import pytest

import runner as agents

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SIZE = 48 << 20


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _settle() -> None:
    """Give freed memory back to the system, so RSS counts only what is held."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        pytest.skip("this kernel does not let a process reset its peak RSS")


async def test_a_large_read_holds_the_file_once_then_lets_it_go(docker_backend) -> None:
    env = docker_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        made = await box.execute(f"head -c {SIZE} /dev/urandom > big.bin")
        assert made.ok, made
        for _ in range(2):  # the second read meets whatever the first left behind
            _settle()
            _reset_peak()
            before = _status_kib("VmRSS:")
            data = await box.read_file("big.bin")
            grew = (_status_kib("VmHWM:") - before) * 1024
            assert len(data) == SIZE
            assert grew <= 1.1 * SIZE, f"peak RSS grew {grew / SIZE:.2f}x the file"
            del data
            _settle()
            left = (_status_kib("VmRSS:") - before) * 1024
            assert left < SIZE / 4, f"{left / SIZE:.2f}x the file still held after it was dropped"


def test_a_file_that_changed_size_meanwhile_comes_out_as_it_arrived() -> None:
    """The buffer is sized from the first piece's header: a file cut short
    while being read comes out at the length that arrived, one that grew at
    its full length, an empty one empty."""
    from runner.sandboxes.docker.files import FileBuffer

    shrunk = FileBuffer()
    shrunk.expect(100)
    shrunk.write(b"a" * 40)
    assert shrunk.value() == b"a" * 40
    grown = FileBuffer()
    grown.expect(10)
    grown.write(b"b" * 8)
    grown.write(b"c" * 22)
    assert grown.value() == b"b" * 8 + b"c" * 22
    empty = FileBuffer()
    empty.expect(0)
    assert empty.value() == b""
