"""For the tests that hold two ways of running a command to the same
result: the Python helper against the shell helper (``test_shell_channel``,
``test_exec_spawner``), output streamed against not (``test_streamed_output``).

``observed`` is everything a caller of ``execute`` can see of a result, as
one tuple to compare; ``open_session`` a session on a test backend with
that environment's options.
"""

from __future__ import annotations

from typing import Any

import runner as agents


async def open_session(backend: Any, **options: Any) -> Any:
    """A started (not yet entered) session on ``backend.environment(**options)``."""
    env = backend.environment(**options)
    return await agents.Agent(model="m", environment=env).start_session()


def observed(result: Any) -> tuple[Any, ...]:
    """What a caller sees of an ``execute`` result (its duration aside)."""
    return (
        result.exit_code,
        result.stdout,
        result.stderr,
        result.timed_out,
        result.output_truncated,
    )
