"""The exec channel's bookkeeping of one request: what was asked and who
waits (``Pending``), and its answer while the body arrives (``Incoming``).

A ``Pending`` is shared by two threads: the caller waiting on ``done`` (or
an event loop woken by ``on_done``) and the channel's reader thread, which
fills it in.  Its callbacks run in the reader thread; what they raise is
kept for the caller to raise (``sink_error``), never left to kill the
reader.  Split from ``channel`` (issue 27).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Pending:
    request: dict[str, Any]  # what was asked: its answer is checked against it
    #: Where a read's body goes as it arrives (None: kept, returned as ``body``).
    sink: Callable[[bytes], object] | None = None
    #: Called (in the reader thread) with a read's checked header before its
    #: body arrives: the sink can size itself from the file's size.
    on_header: Callable[[dict[str, Any]], object] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    receiving: bool = False  # its answer's header has arrived
    header: dict[str, Any] | None = None
    body: bytes = b""
    sink_error: BaseException | None = None
    #: Called (in the reader thread) once ``done`` is set: wakes an event loop
    #: awaiting the answer (``request_async``).
    on_done: Callable[[], object] | None = None
    #: Its awaiting task was cancelled: the answer, when it comes, is dropped.
    abandoned: bool = False
    #: Called (in the reader thread) with each output frame of an exec that
    #: asked for its output as it comes: ``(stream, chunk, gap)``.
    on_output: Callable[[str, bytes, bool], object] | None = None

    def finish(self) -> None:
        self.done.set()
        if self.on_done is not None:
            self.on_done()


@dataclass
class Incoming:
    """An answer whose header has arrived and been checked; its body follows."""

    pending: Pending
    header: dict[str, Any]
    left: int
    body: bytearray = field(default_factory=bytearray)
    #: An output frame (a chunk of a command's output), not the answer.
    output: bool = False

    def take(self, data: memoryview) -> memoryview:
        """Use what of ``data`` is this body's; return the rest."""
        piece, rest = data[: self.left], data[self.left :]
        self.left -= len(piece)
        sink = self.pending.sink
        if sink is None or "error" in self.header or self.output:
            self.body += piece
        elif self.pending.sink_error is None:  # after a failed write, drain only
            try:
                sink(bytes(piece))
            except Exception as exc:  # the caller's to raise (a full disk, ...)
                self.pending.sink_error = exc
        return rest
