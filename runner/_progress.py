"""Human-readable progress on stderr, from the lifecycle's events.

One line per step and per hook point, with its status and duration, so a CI
log shows where time went and what failed.  Secret inputs are already masked
in the events themselves.
"""

from __future__ import annotations

from typing import Any, TextIO


class ProgressPrinter:
    """An event listener that writes progress lines to ``stream``."""

    def __init__(self, stream: TextIO, *, prefix: str = "") -> None:
        self.stream = stream
        self.prefix = prefix

    def _write(self, text: str) -> None:
        self.stream.write(self.prefix + text + "\n")
        self.stream.flush()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        duration = event.get("duration_seconds")
        took = f" ({duration:.2f}s)" if duration is not None else ""
        if kind == "session_starting":
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
            status = "skipped" if event.get("skipped") else "ok"
            self._write(f"    [{event['step'] + 1}] {event['title']} {status}{took}")
        elif kind == "step_failed":
            self._write(f"    [{event['step'] + 1}] {event['title']} FAILED{took}")
        elif kind == "session_closing":
            self._write(f"  closing ({event['reason']})")
        elif kind == "sandbox_deleted":
            self._write("  sandbox deleted")
        elif kind == "turn":
            calls = len(event["tool_calls"])
            self._write(f"  turn {event['status']}{took}, {calls} tool call(s)")
