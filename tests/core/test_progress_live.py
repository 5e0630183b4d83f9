"""Progress of a running step (issue 31, item 2): a line when it starts, and
on a terminal a live line with its elapsed time, replaced by its outcome.

Run for real: the CLI in a pipe (a CI log) and under a pseudo-terminal
(``os.openpty``), as a user's terminal runs it.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import textwrap
import time
from pathlib import Path

from conftest import RUNNER_CLI

STEPS = textwrap.dedent(
    """\
    version: 1
    agent:
      model: local-model
      environment:
        sandbox: local
        hooks:
          - name: build
            on_create:
              - run: echo compiling
              - run: sleep 1.2
    """
)


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "steps.yaml"
    path.write_text(STEPS)
    return path


def test_a_log_gets_a_line_when_a_step_starts_and_one_when_it_ends(tmp_path: Path) -> None:
    done = subprocess.run(
        [*RUNNER_CLI, "run", str(_file(tmp_path))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    started = lines.index("    [2] sleep 1.2 ...")
    ended = next(i for i, line in enumerate(lines) if line.startswith("    [2] sleep 1.2 ok ("))
    assert started < ended
    assert "\x1b" not in done.stderr  # plain lines: no cursor control in a log


def test_a_terminal_shows_the_running_step_with_its_elapsed_time(tmp_path: Path) -> None:
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", str(_file(tmp_path))],
        cwd=tmp_path,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"},
    )
    os.close(terminal)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(controller)
    assert process.wait(timeout=30) == 0, shown.decode(errors="replace")
    text = shown.decode(errors="replace")
    # the live line, redrawn with a growing time, then replaced by the outcome
    times = [float(t) for t in re.findall(r"\[2\] sleep 1\.2 \.\.\.  (\d+\.\d)s", text)]
    assert len(times) >= 2 and times[-1] > times[0] and times[-1] >= 0.8, text
    assert re.search(r"\[2\] sleep 1\.2 ok \(1\.\d\ds\)", text), text
    (tmp_path / "capture.txt").write_text(text)
