"""A session's start: its sandbox and every ``on_create``, in the background.

The start runs in the server's tasks (``SessionWork._in_session``) inside a
cancel scope of its own (``Live.start_scope``), which a ``DELETE`` during
``on_create`` cancels (``_cancel_start``): the running step is stopped (the
sandbox kills its command's process group), no further step runs, and the
lifecycle unwinds as after a failed ``on_create`` (``on_destroy`` of the
hooks whose ``on_create`` finished, in reverse order, then the sandbox is
deleted); the session ends ``closed`` (``failed`` if one of those
``on_destroy`` failed).  A mixin of ``Sessions``, split from ``sessions``
(issue 28).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..core.events import emit, listen
from ..core.redaction import scrub
from ..engine.hook_points import LifecyclePlan
from ..engine.inputs import secret_strings
from ..engine.lifecycle import open_sandbox
from ..engine.session import Session
from .journal import journal_turn
from .live import ApiError, Live
from .session_work import SessionWork, WorkCancelled

#: The reason a ``DELETE`` during ``on_create`` gives (``session_closing``/``_closed``).
CANCELLED_REASON = "deleted during on_create"


class Starting(SessionWork):
    """Starting a session, and cancelling a start (see the module's docstring).
    A start is session work (``SessionWork._in_session``) with a scope a
    ``DELETE`` can cancel."""

    live: dict[str, Live]

    if TYPE_CHECKING:

        def _release(self, session_id: str) -> None: ...
        async def _set_async(self, session_id: str, **fields: Any) -> None: ...
        def row(self, session_id: str) -> Any: ...
        async def close(self, session_id: str, *, reason: str = "deleted") -> Any: ...

    async def _start(self, session_id: str, live: Live) -> None:
        agent = live.compiled.agent

        def remember_sandbox(sandbox: Any) -> None:
            live.sandbox = sandbox
            # Committed before the first step or sandbox call (Store.settle).
            self.store.update_soon(session_id, sandbox=_sandbox_record(sandbox))

        async def work() -> None:
            emit("session_starting", session_id=session_id, agent=live.agent_name)
            ttl = agent.environment.ttl_seconds
            sandbox = await open_sandbox(
                agent.environment,
                agent.plan,
                live.inputs,
                session_id=session_id,
                expires_at=time.time() + ttl if ttl else None,  # a container's expiry label
                on_created=remember_sandbox,
            )
            self._opened(session_id, live, sandbox, agent.plan)
            emit("session_started", session_id=session_id, agent=live.agent_name)

        await self._guarded_start(session_id, live, work)

    async def _guarded_start(
        self, session_id: str, live: Live, work: Callable[[], Awaitable[None]]
    ) -> None:
        """Run a start (new or resumed); its outcome is the session's status:
        ``waiting``, ``failed`` (with why), or, cancelled by a ``DELETE``,
        ``closed``."""
        live.start_scope = anyio.CancelScope()
        try:
            await self._in_session(session_id, live, work, scope=live.start_scope)
        except WorkCancelled:
            self._cancelled(session_id, live)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self._fail(session_id, "the server stopped while the session was starting")
            raise
        except Exception as exc:
            self._fail(session_id, _start_error(exc, live))
        else:
            await self._set_async(session_id, status="waiting")
        finally:
            live.start_scope = None
            live.start_ended.set()

    def starting_here(self, session_id: str) -> Live | None:
        """The session, if this server is running its start (a ``DELETE``
        then cancels it)."""
        live = self.live.get(session_id)
        if live is None or live.session is not None or live.start_scope is None:
            return None
        return live

    async def _cancel_start(self, session_id: str, live: Live) -> None:
        """A ``DELETE`` during the start: stop it and wait for its unwinding
        (``on_destroy`` of the finished hooks, the sandbox deleted).  The
        cancel comes before any await: nothing more of ``on_create`` begins.
        A second ``DELETE`` waits for the first one's."""
        scope = live.start_scope
        assert scope is not None
        if not scope.cancel_called:
            scope.cancel()
            with listen(self._recorder(session_id, live)):
                emit("session_closing", session_id=session_id, reason=CANCELLED_REASON)
            await self._set_async(session_id, status="closing")
        await live.start_ended.wait()

    def _cancelled(self, session_id: str, live: Live) -> None:
        """The start was cancelled and has unwound: the session is closed
        (``failed`` if an ``on_destroy`` of the unwinding failed: the hook and
        the exception type, as for any close)."""
        self.live.pop(session_id, None)
        failed = [
            f"hook {event['hook']}.on_destroy failed: {event.get('error_type')}"
            for _, event in self.store.events(session_id)
            if event["event"] == "hook_failed" and event.get("point") == "on_destroy"
        ]
        with listen(self._recorder(session_id, live)):
            emit("session_closed", session_id=session_id, reason=CANCELLED_REASON)
        error = "; ".join(failed) or None
        self._set(session_id, status="failed" if failed else "closed", error=error)
        self._release(session_id)

    def _opened(self, session_id: str, live: Live, sandbox: Any, plan: LifecyclePlan) -> None:
        agent = live.compiled.agent
        live.sandbox = sandbox
        live.session = Session(
            agent=agent,
            session_id=session_id,
            sandbox=sandbox,
            plan=plan,
            inputs=live.inputs,
            ttl_seconds=None,  # the server keeps the TTL (_close_at_ttl), across restarts
        )
        live.session.turn_wrapper = journal_turn(self.store, session_id)
        ttl = agent.environment.ttl_seconds
        if ttl:
            self.tg.start_soon(self._close_at_ttl, session_id, ttl)

    async def _close_at_ttl(self, session_id: str, ttl: float) -> None:
        """Close the session ``ttl`` seconds after it was created (the sandbox's
        ``ttl_seconds``), counted from the stored creation time, so a session
        whose TTL passed while the server was down closes as soon as it resumes."""
        row = self.row(session_id)
        await anyio.sleep(max(0.0, row.created_at + ttl - time.time()))
        live = self.live.get(session_id)
        if live is None or live.session is None:
            return
        with contextlib.suppress(ApiError):  # closed or failed meanwhile
            await self.close(session_id, reason=f"ttl_seconds={ttl:g} expired")


def _start_error(exc: BaseException, live: Live) -> str:
    """Why a session failed to start.  As the seeds say of a deployed agent, a
    hook's failure names only the hook and the exception type; its full
    (scrubbed) message is in the server's log, at DEBUG (``_error_to_log``)."""
    hook = getattr(exc, "runner_hook", None)
    if hook:
        return f"hook {hook[0]}.{hook[1]} failed: {type(exc).__name__}"
    secrets = secret_strings(live.inputs.values())
    return f"the session failed to start: {type(exc).__name__}: {scrub(str(exc), secrets)}"


def _sandbox_record(sandbox: Any) -> dict[str, Any]:
    """Where a sandbox is, so a restarted server can find it again."""
    return {"created_at": time.time(), **sandbox.record()}
