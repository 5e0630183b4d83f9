"""Output of running commands, line by line, to whoever listens.

A long step (a clone, a build) says where it is only through its output,
which ``execute`` returns when it ends.  A backend that reads the output as
it comes (the local sandbox does) feeds each chunk to :class:`OutputLines`,
which passes every **complete line** on to the listeners of the current
context (:func:`listen_output`): the CLI's live progress shows the last one,
and ``runner run -v`` prints each.  The Docker sandbox's exec channel
streams too (``sandboxes/docker/live_output.py``): its helper sends output
frames as the command writes, in chunks that may cut a line anywhere.

**Only whole lines, scrubbed.**  A command that prints a secret in pieces
(``printf 'hun'; sleep 1; printf 'ter2\\n'``) delivers it in two chunks;
shown chunk by chunk, neither piece would match a secret.  So nothing is
passed on before its line is complete (or the command ended), and then the
whole line goes through the same scrubbing as the events (``decode_output``
for the byte forms, ``scrubbed`` for every text form the redactor knows).
A line longer than :data:`MAX_LINE_BYTES` is dropped whole, never cut (a
cut could split a secret), and nothing is buffered without bound.

Nothing here runs unless someone listens: :func:`output_lines` returns None
then, and the backend keeps its one read loop.  ``--json`` gets no output
events: the events contract is unchanged, and the whole output is in the
results as before.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

from .events import decode_output, scrubbed

#: ``(stream, line)``: the stream is ``"stdout"`` or ``"stderr"``, the line
#: has no newline and is scrubbed, but not terminal-safe (the printer's job).
OutputListener = Callable[[str, str], None]
#: A listener and whether it wants every line (else the last of each read).
_Entry = tuple[OutputListener, bool]

#: A line longer than this is not shown (the whole output still is in the result).
MAX_LINE_BYTES = 64 * 1024

_listeners: contextvars.ContextVar[tuple[_Entry, ...]] = contextvars.ContextVar(
    "runner_output_listeners", default=()
)


@contextlib.contextmanager
def listen_output(listener: OutputListener, *, every_line: bool = True) -> Iterator[None]:
    """Call ``listener(stream, line)`` for the output lines of a command run
    inside the block (by a backend that streams its output).

    Without ``every_line``, only the last whole line of each chunk read is
    passed on: a display of the last line needs no more, and scrubbing (one
    pass per form of every secret) is then paid per read, not per line.
    """
    token = _listeners.set((*_listeners.get(), (listener, every_line)))
    try:
        yield
    finally:
        _listeners.reset(token)


class OutputLines:
    """One command's output, cut into lines, each scrubbed before it is passed on."""

    def __init__(self, listeners: tuple[_Entry, ...]) -> None:
        self._listeners = [listener for listener, _ in listeners]
        self._every_line = any(every for _, every in listeners)
        self._pending: dict[str, bytearray] = {}
        #: Streams whose current line grew past MAX_LINE_BYTES: skipped to its end.
        self._skipping: set[str] = set()

    def feed(self, stream: str, chunk: bytes) -> None:
        """Take one chunk as read; report each line it completes."""
        pending = self._pending.setdefault(stream, bytearray())
        pending += chunk
        if b"\n" not in chunk:
            if len(pending) > MAX_LINE_BYTES:
                self._skipping.add(stream)
                pending.clear()
            return
        *lines, rest = bytes(pending).split(b"\n")
        pending[:] = rest
        if stream in self._skipping:
            self._skipping.discard(stream)  # its first line ends the overlong one
            lines = lines[1:]
        for line in lines if self._every_line else lines[-1:]:
            self._report(stream, line)
        if len(pending) > MAX_LINE_BYTES:
            self._skipping.add(stream)
            pending.clear()

    def gap(self, stream: str) -> None:
        """Bytes of ``stream`` were not delivered here (a backend that drops
        what it cannot send in time): the line they were part of is not
        whole, so it is not shown; showing resumes after its newline."""
        self._pending.pop(stream, None)
        self._skipping.add(stream)

    def close(self) -> None:
        """The command ended: its last line, if it had no newline, is whole now."""
        for stream, pending in self._pending.items():
            if pending and stream not in self._skipping:
                self._report(stream, bytes(pending))
        self._pending.clear()

    def _report(self, stream: str, line: bytes) -> None:
        text = scrubbed(decode_output(line.removesuffix(b"\r")))
        for listener in self._listeners:
            listener(stream, text)


def output_lines() -> OutputLines | None:
    """A line splitter for one command's output, or None when nobody listens."""
    listeners = _listeners.get()
    return OutputLines(listeners) if listeners else None
