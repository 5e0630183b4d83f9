"""The server's log on stderr: text or JSON lines, hook errors in full only in debug.

The seeds' rule for a deployed agent: a client learns only which hook failed
and the exception type; the full error (secrets already scrubbed) is in the
server's log, and shown only with the debug switch, ``RUNNER_DEBUG=1`` (or
``AGENTS_SDK_DEBUG=1``, the seeds' spelling).  Without it the log is at
``INFO`` and a hook failure the engine logs keeps its hook and type only.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

#: Either one set to 1 (or true, yes, on) shows DEBUG records: hook errors in full.
DEBUG_VARIABLES = ("RUNNER_DEBUG", "AGENTS_SDK_DEBUG")
LOG_FORMATS = ("text", "json")

_handler: logging.Handler | None = None
_format = "text"


def debug_enabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return any(
        env.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in DEBUG_VARIABLES
    )


def configure(log_format: str = "text", *, debug: bool | None = None) -> None:
    """Send the ``runner`` loggers to stderr in ``log_format`` (once per process)."""
    global _handler, _format
    _format = log_format
    if debug is None:
        debug = debug_enabled()
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("runner: %(levelname)s %(name)s: %(message)s"))
    if not debug:
        handler.addFilter(_hook_errors_summarized)
    root = logging.getLogger("runner")
    if _handler is not None:
        root.removeHandler(_handler)
    _handler = handler
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    root.propagate = False
    for name in ("uvicorn", "asyncio"):  # their warnings, in the same format
        other = logging.getLogger(name)
        other.handlers = [handler]
        other.setLevel(logging.WARNING)
        other.propagate = False


def say(line: str) -> None:
    """A line for the operator (listening, stopping): ``runner: ...`` on
    stderr, or with ``--log-format json`` a log record like the others."""
    if _format == "json":
        logging.getLogger("runner.serve").info(line)
    else:
        print(f"runner: {line}", file=sys.stderr, flush=True)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message (and the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("session_id", "client", "method", "path", "status", "duration_ms"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _hook_errors_summarized(record: logging.LogRecord) -> bool:
    """Outside debug, a logged hook failure (``HookFailure``, from the engine)
    keeps its hook and exception type: its message and traceback stay out."""
    from ..engine.hook_points import HookFailure

    args = record.args if isinstance(record.args, tuple) else ()
    if any(isinstance(arg, HookFailure) for arg in args):
        record.args = tuple(
            f"sandbox hook {a.hook}.{a.point} failed: {a.error_type} "
            f"(the full error is logged with {DEBUG_VARIABLES[0]}=1)"
            if isinstance(a, HookFailure)
            else a
            for a in args
        )
        record.exc_info = None
        record.exc_text = None
    return True
