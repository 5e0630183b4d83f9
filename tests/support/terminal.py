"""Running the CLI as a user's terminal runs it: on a pseudo-terminal.

``os.openpty`` gives the child a real terminal for stdin, stdout and stderr
(``isatty`` is true, as in an interactive shell); the test reads what the
terminal received, escape sequences included, and can look at it.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import RUNNER_CLI

#: The escape sequences rich's live display writes itself: hide and show the
#: cursor, erase the line, move up one line, dim and reset.  Anything else
#: starting with ESC that reaches the terminal came from somewhere else.
RICH_SEQUENCES = re.compile(rb"\x1b\[(?:\?25[lh]|2K|1A|2m|0m)")


def run_on_a_terminal(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    timeout: float = 120,
    on_output: Callable[[bytes], Any] | None = None,
) -> tuple[int, bytes]:
    """``runner ARGS`` with stdin, stdout and stderr on one pseudo-terminal:
    (exit code, every byte the terminal received, CR LF left as written).
    ``on_output(shown_so_far)`` is called after each read: a test answers
    what the terminal showed (writes a file a step waits for) instead of
    guessing how long a redraw takes."""
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(
            [*RUNNER_CLI, *args],
            cwd=cwd,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env={
                **os.environ,
                "TERM": "xterm-256color",
                "COLUMNS": "120",
                "TMPDIR": str(cwd),
                **(env or {}),
            },
        )
    finally:
        os.close(terminal)
    shown = bytearray()
    try:
        while True:  # until every writer closed the terminal
            ready, _, _ = select.select([controller], [], [], timeout)
            if not ready:
                process.kill()
                raise AssertionError(f"the runner wrote nothing for {timeout} s: {bytes(shown)!r}")
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            shown += chunk
            if on_output is not None:
                on_output(bytes(shown))
    finally:
        os.close(controller)
    return process.wait(timeout=timeout), bytes(shown)


def without_rich(shown: bytes) -> bytes:
    """What the terminal received, less the sequences rich writes itself."""
    return RICH_SEQUENCES.sub(b"", shown)
