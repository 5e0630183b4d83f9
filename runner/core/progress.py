"""Human-readable progress on stderr, from the lifecycle's events.

One line per step and per hook point, with its status and duration, so a CI
log shows where time went and what failed.  Secret inputs are already masked
in the events themselves.

**Terminal safety.**  Much of what these lines show comes from the sandbox or
from input values: a failing step's stderr, step titles, hook error messages.
Printed raw, that text could retitle the terminal (OSC), move the cursor,
clear the screen, or print a fake ``    [1] tests passed ok`` line.  So every
line goes through :func:`terminal_safe` before it is written:

- C0 controls (U+0000-U+001F), DEL (U+007F) and C1 controls (U+0080-U+009F)
  are shown as ``\\xNN`` (ESC is ``\\x1b``), except tab, carriage return and
  newline, shown as ``\\t``, ``\\r`` and ``\\n``;
- bidirectional overrides, embeddings, isolates and marks (U+061C, U+200E,
  U+200F, U+202A-U+202E, U+2066-U+2069), the Unicode line and paragraph
  separators (U+2028, U+2029) and lone surrogates are shown as ``\\uNNNN``.

**Newlines: one event, one line.**  A newline inside a field (a multi-line
stderr excerpt, a multi-line exception message) is shown as a visible ``\\n``
on the same line, never as a line break, so sandbox text cannot start a line
of its own and pass for a progress line.  The CLI's closing ``runner: ...``
messages and the ``--parallel`` summary table use the same function.
Backslashes are left as they are (titles such as ``printf '%s\\n'`` stay
readable), so the display is not reversible: the exact text, control
characters included, is in the ``--json`` events and in the results, which
are never escaped here (JSON escapes control characters itself).

**The agent's final answer** (``runner run --prompt``, and each set's answer
under ``--input-sets``) is text the model wrote, often quoting the sandbox.
On a terminal it goes through the same escaping, except that it keeps its
newlines and tabs (``terminal_safe(text, keep_lines=True)``): it is a
multi-line text on stdout, not a progress line on stderr.  Written to a file
or a pipe, it is written exactly as it is.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, TextIO

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: The same without newline and tab, for multi-line text (the final answer).
_UNSAFE_IN_TEXT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every terminal control, newline and bidi control shown as
    a visible escape; ``keep_lines`` keeps newlines and tabs as they are."""
    return (_UNSAFE_IN_TEXT if keep_lines else _UNSAFE).sub(_escape, text)


#: Seconds between two "still running" lines of one running step in a log
#: (``RUNNER_PROGRESS_INTERVAL`` sets it; 0: none).  Half a minute: a CI log
#: of a 4-minute clone gets 8 lines saying it is alive, not hundreds.
DEFAULT_INTERVAL = 30.0
#: The most of an output line the progress keeps (the terminal crops it further).
_LINE_CHARS = 400


class ProgressPrinter:
    """An event listener that writes progress lines to ``stream``, and an
    output listener (:meth:`output`, for ``core.output.listen_output``).

    A step's line is written when it starts (``[2] make test ...``) and
    again with its outcome when it ends, so a CI log shows what runs now.
    While a step (or an agent's tool call) runs, its output lines arrive
    whole and scrubbed of secrets (``core.output``):

    - ``live`` (a terminal, one session): the start line is a live one
      instead, redrawn four times a second by rich: the step's title, its
      elapsed time and its last output line, replaced by the outcome line;
    - otherwise (a log): every ``interval`` seconds a step runs, a plain
      ``[2] build still running (30.0s)`` line, written by a thread of
      its own (a silent step must show it is alive too); no output content,
      which a CI log keeps for ever (``-v`` prints it);
    - ``verbose`` (``runner run -v``): every output line, as ``      | line``
      (above the live line on a terminal).

    Every line written, output included, goes through :func:`terminal_safe`.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        prefix: str = "",
        live: bool = False,
        verbose: bool = False,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self.stream = stream
        self.prefix = prefix
        self.live = live
        self.verbose = verbose
        self.interval = interval
        self._status: Any = None
        #: What runs now (a step's start line, or a tool call's), since when,
        #: and its last output line (shown on the live line).
        self._running: str | None = None
        self._started = 0.0
        self._last_line = ""
        #: Set when what runs now ends: stops its "still running" thread.
        self._ticking: threading.Event | None = None
        #: Lines come from the event loop and from that thread.
        self._lock = threading.RLock()

    def _write(self, text: str) -> None:
        # The whole line is escaped: the runner's own words hold no controls,
        # and every field (title, error, names) is covered, future ones too.
        with self._lock:
            self._stop_live()
            self.stream.write(terminal_safe(self.prefix + text) + "\n")
            self.stream.flush()

    def _begin(self, text: str, *, announce: bool = True) -> None:
        """Something long may run now: a live line on a terminal, else (when
        ``announce``) its start line."""
        self._end()
        self._running = text
        self._started = time.monotonic()
        self._last_line = ""
        if self.live:
            self._start_live()
            return
        if announce:
            self._write(text)
        if 0 < self.interval < float("inf"):
            self._ticking = threading.Event()
            threading.Thread(
                target=self._tick,
                args=(self._ticking, text.removesuffix(" ..."), self._started),
                name="runner-progress",
                daemon=True,
            ).start()

    def _tick(self, stop: threading.Event, what: str, started: float) -> None:
        """Until ``stop``: a plain line every ``interval`` seconds."""
        while not stop.wait(self.interval):
            with self._lock:
                if stop.is_set():  # it ended while this thread waited for the lock
                    return
                self._write(f"{what} still running ({time.monotonic() - started:.1f}s)")

    def _end(self) -> None:
        with self._lock:
            self._running = None
            if self._ticking is not None:
                self._ticking.set()
                self._ticking = None
            self._stop_live()

    def _start_live(self) -> None:
        """A transient line with the elapsed time and the last output line
        (rich: no markup is read, the text is already terminal-safe)."""
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        printer = self
        line = terminal_safe(self.prefix + (self._running or ""))
        started = self._started

        class Elapsed:
            def __rich__(self) -> Text:
                text = Text(f"{line}  {time.monotonic() - started:.1f}s", no_wrap=True)
                if printer._last_line and not printer.verbose:
                    text.append(f"  | {printer._last_line}", style="dim")
                text.overflow = "ellipsis"
                return text

        console = Console(file=self.stream, force_terminal=True, highlight=False)
        self._status = Live(
            Elapsed(),
            console=console,
            refresh_per_second=4,
            transient=True,
        )
        self._status.start()

    def _stop_live(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        """Remove a live line still shown, stop the "still running" lines
        (the run ended or was interrupted)."""
        self._end()

    def output(self, stream: str, line: str) -> None:
        """One whole output line (scrubbed) of the command running now."""
        if self.verbose:
            text = terminal_safe(f"{self.prefix}      | {line}")
            with self._lock:
                if self._status is not None:
                    from rich.text import Text

                    self._status.console.print(Text(text), soft_wrap=True)
                else:
                    self.stream.write(text + "\n")
                    self.stream.flush()
        if self._running is None or not self.live:
            return  # a log shows no output content unless -v
        # What a terminal would leave of a line redrawn with carriage returns.
        shown = terminal_safe(line.rsplit("\r", 1)[-1] or line)[:_LINE_CHARS]
        if shown.strip():
            self._last_line = shown

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        duration = event.get("duration_seconds")
        took = f" ({duration:.2f}s)" if duration is not None else ""
        if kind == "step_started":
            self._begin(f"    [{event['step'] + 1}] {event['title']} ...")
        elif kind == "tool_called":
            # the agent's commands: live on a terminal, and no new line in a log
            self._begin(f"  tool {event['tool']} ...", announce=False)
        elif kind == "tool_finished":
            self._end()
        elif kind == "session_starting":
            self._write(f"runner: session {event['session_id']} (agent {event['agent']})")
        elif kind == "sandbox_created":
            self._write(f"  sandbox {event['backend']} ready{took}")
        elif kind == "hook_started":
            self._write(f"  {event['hook']}.{event['point']}")
        elif kind == "hook_finished":
            self._write(f"  {event['hook']}.{event['point']} ok{took}")
        elif kind == "hook_failed":
            self._write(
                f"  {event['hook']}.{event['point']} FAILED{took}: "
                f"{event['error_type']}: {event['error']}"
            )
        elif kind == "hook_cancelled":
            self._write(f"  {event['hook']}.{event['point']} cancelled{took}")
        elif kind == "step_finished":
            self._end()
            status = "skipped" if event.get("skipped") else "ok"
            self._write(f"    [{event['step'] + 1}] {event['title']} {status}{took}")
        elif kind == "step_failed":
            self._end()
            self._write(f"    [{event['step'] + 1}] {event['title']} FAILED{took}")
        elif kind == "session_closing":
            # the end of `runner run` is the usual close: no reason to show
            reason = event["reason"]
            self._write("  closing" if reason == "left async with" else f"  closing ({reason})")
        elif kind == "sandbox_deleted":
            self._write("  sandbox deleted")
        elif kind == "turn":
            calls = len(event["tool_calls"])
            self._write(f"  turn {event['status']}{took}, {calls} tool call(s)")
