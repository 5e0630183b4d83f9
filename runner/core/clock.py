"""Time helpers for hooks.

Hooks use these instead of ``datetime.now()``/``asyncio.sleep`` so the same hook
code runs unchanged in environments that replay it (as the seed documents ask).
"""

from __future__ import annotations

import contextvars
from datetime import UTC, datetime
from typing import Protocol

import anyio


class Clock(Protocol):
    """Where ``now()`` and ``sleep()`` get time from while a hook replays
    (``runner serve``'s journal: the recorded time, and only the sleep left)."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


#: The clock of the hook running in this context; None: the real one.
current_clock: contextvars.ContextVar[Clock | None] = contextvars.ContextVar(
    "runner_clock", default=None
)


def now() -> datetime:
    """The current time as an aware UTC datetime (the recorded one on replay)."""
    clock = current_clock.get()
    return clock.now() if clock is not None else datetime.now(UTC)


async def sleep(seconds: float) -> None:
    """Sleep without blocking the event loop, on any anyio backend (on replay,
    only the time left of the sleep that was recorded)."""
    clock = current_clock.get()
    if clock is not None:
        await clock.sleep(seconds)
    else:
        await anyio.sleep(seconds)
