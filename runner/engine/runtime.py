"""``local_runtime()``: a scope that owns the sessions started inside it.

Leaving the block closes every session still open that was started in it
(most recent first), whether the block ended normally, raised, or was
cancelled.  The runtime also runs each session's TTL timer, so a session
whose ``ttl_seconds`` passes is closed on time (outside a runtime, an expired
session is closed the next time it is used).
"""

from __future__ import annotations

import contextvars
import logging
from types import TracebackType

import anyio
import anyio.abc

from .session import Session

logger = logging.getLogger("runner")

_current: contextvars.ContextVar[LocalRuntime | None] = contextvars.ContextVar(
    "runner_local_runtime", default=None
)


def current_runtime() -> LocalRuntime | None:
    return _current.get()


class LocalRuntime:
    """The object ``local_runtime()`` returns; use it with ``async with``."""

    def __init__(self) -> None:
        self.sessions: list[Session] = []
        self._task_group: anyio.abc.TaskGroup | None = None
        self._token: contextvars.Token[LocalRuntime | None] | None = None

    def adopt(self, session: Session) -> None:
        """Own ``session``: close it on exit, and at its TTL."""
        self.sessions.append(session)
        if session.deadline is not None and self._task_group is not None:
            self._task_group.start_soon(_close_at_expiry, session)

    async def __aenter__(self) -> LocalRuntime:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._token = _current.set(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._task_group is not None and self._token is not None
        _current.reset(self._token)
        try:
            with anyio.CancelScope(shield=True):
                for session in reversed(self.sessions):
                    await _close_logging_errors(session, reason="left local_runtime")
        finally:
            # Only TTL timers run in the group: stop them.  The body's own
            # exception is not passed in, so it propagates unwrapped.
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)


async def _close_logging_errors(session: Session, *, reason: str) -> None:
    try:
        await session.close(reason=reason)
    except Exception as exc:  # keep closing the others
        logger.error(
            "closing session %s failed: %s: %s",
            session.id,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )


async def _close_at_expiry(session: Session) -> None:
    try:
        await session.wait_for_expiry()
    except Exception as exc:
        logger.error(
            "closing expired session %s failed: %s: %s",
            session.id,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )


def local_runtime() -> LocalRuntime:
    """Open a runtime scope: ``async with local_runtime(): ...``."""
    return LocalRuntime()
