"""A command's output as it comes over the exec channel, on its way to the
live progress (``core.output``).

The channel's reader thread receives the output frames of a command that
asked for them (``"stream": true``, sent only when someone listens: see
``core.output.output_lines``).  The listeners (the CLI's progress printer)
run on the event loop, as they do for the local sandbox, so each chunk is
handed over to the loop, never fed in the reader thread: one thread writes
the terminal, and chunks keep their order (the loop runs callbacks in the
order they were scheduled, and the command's answer wakes its task after
its last chunk).  Scrubbing and cutting into whole lines are
``OutputLines``'s, exactly as for the local sandbox, in the command's own
context, where the run's secrets are known.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from ...core.output import OutputLines


class ChannelOutput:
    """``on_output`` for ``ExecChannel.request``: feeds one command's
    ``OutputLines`` on the event loop that awaits the command."""

    def __init__(self, lines: OutputLines) -> None:
        self._lines = lines
        self._closed = False
        self._schedule = _scheduler()
        #: The command's context: the secrets to scrub live in it (the
        #: reader thread's own context knows none).
        self._context = contextvars.copy_context()

    def __call__(self, stream: str, chunk: bytes, gap: bool) -> None:
        """In the reader thread: one output frame."""
        if self._closed:  # its command's task is gone (cancelled): nobody to show it to
            return
        try:
            self._schedule(self._context.run, self._feed, stream, chunk, gap)
        except RuntimeError:  # the event loop closed meanwhile
            self._closed = True

    def _feed(self, stream: str, chunk: bytes, gap: bool) -> None:
        if self._closed:  # a chunk of a command whose task was cancelled
            return
        if gap:  # the helper dropped bytes before it: the line they cut is not shown
            self._lines.gap(stream)
        self._lines.feed(stream, chunk)

    def close(self) -> None:
        """On the loop, once the command answered (or failed): its last line."""
        if not self._closed:
            self._closed = True
            self._lines.close()


def _scheduler() -> Callable[..., Any]:
    """A function that runs ``callback(*args)`` on this event loop, called
    from another thread without waiting (asyncio); on anyio's other
    backend, trio, it waits for the loop to run it."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import anyio.from_thread
        import anyio.lowlevel

        token = anyio.lowlevel.current_token()
        return lambda callback, *args: anyio.from_thread.run_sync(callback, *args, token=token)
    return loop.call_soon_threadsafe
