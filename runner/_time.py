"""Time helpers for hooks.

Hooks use these instead of ``datetime.now()``/``asyncio.sleep`` so the same hook
code runs unchanged in environments that replay it (as the seed documents ask).
"""

from __future__ import annotations

from datetime import UTC, datetime

import anyio


def now() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


async def sleep(seconds: float) -> None:
    """Sleep without blocking the event loop, on any anyio backend."""
    await anyio.sleep(seconds)
