"""A local command's watchdog: its process group dies at its timeout even if
the runner is gone.

``LocalSandbox`` kills a command's process group when its timeout passes;
but when the runner itself dies (a ``runner serve`` SIGKILLed mid-step),
nobody is left to do it, and the cut-off command ran on until a restart
found it, often while a resumed session ran the same step again.  So each
command is started under a watchdog, the leader of the command's own
process group, that kills the whole group ``WATCHDOG_GRACE_SECONDS`` after
the timeout (the runner, when alive, acts first and reports ``timed_out``).
The watchdog lives as long as its group, so the group's id cannot be
reused by a stranger before it fires.

GNU coreutils ``timeout`` is that watchdog where it is installed (it kills
its process group, itself included, and passes the command's exit status
through; a C program: ~1 ms per command); elsewhere a few lines of Python
(~15 ms).  A process that leaves the group (``setsid``) escapes both; the
next start still finds it by its ``HOME`` (``kill_left_running``).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys

#: How long after a command's timeout its watchdog kills the group: the
#: runner, when it is alive, kills it first and reports the timeout.
WATCHDOG_GRACE_SECONDS = 1.0

#: The fallback: fork, exec the command; SIGALRM at the deadline kills the
#: process group (the watchdog is its leader); else exit as the command did.
PYTHON_WATCHDOG = """\
import os, signal, sys
signal.signal(signal.SIGALRM, lambda *_: os.killpg(0, signal.SIGKILL))
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
pid = os.fork()
if pid == 0:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:  # as a shell (and GNU timeout) says it: 127
        os.write(2, ("%s: %s\\n" % (sys.argv[2], exc.strerror)).encode())
        os._exit(127)
status = os.waitpid(pid, 0)[1]
os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
"""


@functools.cache
def gnu_timeout() -> str | None:
    """The path of GNU coreutils' ``timeout``, or None (not installed, or
    another one: busybox's kills only the command, not its group)."""
    found = shutil.which("timeout")
    if found is None:
        return None
    try:
        said = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return found if "GNU coreutils" in said else None


def watched(argv: list[str], timeout: float, *, python: bool = False) -> list[str]:
    """``argv`` (its program found on ``PATH``) under a watchdog that kills
    its process group ``WATCHDOG_GRACE_SECONDS`` after ``timeout`` seconds
    (``python``: the fallback even where GNU ``timeout`` is found)."""
    seconds = f"{timeout + WATCHDOG_GRACE_SECONDS:.3f}"
    found = None if python else gnu_timeout()
    if found is not None:
        # -s KILL: the command cannot trap it; the group goes, timeout too.
        return [found, "-s", "KILL", seconds, *argv]
    return [sys.executable, "-I", "-S", "-c", PYTHON_WATCHDOG, seconds, *argv]
