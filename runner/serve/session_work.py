"""Where a session's work runs: in the server's tasks, its events recorded.

Each start, turn and close runs in a task of the server (it outlives the
request), inside a context that records the session's events (scrubbed of
its secrets; a hook's error message only to the log, ``_error_to_log``)
into the store and wakes the clients following them (``changed``).  The
work under way is counted, so a SIGTERM can ``drain`` it.  A session whose
sandbox vanished (``sandbox_gone``) is failed (``_fail_gone``).  A mixin of
``Sessions``, split from ``sessions`` (issue 27).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.from_thread

from ..core.events import add_secrets, emit, listen, scrubbed
from ..engine.inputs import secret_strings
from .journal import follow_hook_clock, record_hook_point
from .live import ApiError, Live
from .store.base import Store

logger = logging.getLogger("runner.serve.service")

#: What a ``503`` beyond ``--max-sessions`` or while stopping tells the
#: client to wait (seconds).
RETRY_AFTER_SECONDS = 5


class WorkCancelled(Exception):
    """The work's scope was cancelled (a ``DELETE`` during ``on_create``)."""


class SessionWork:
    """Running a session's work and recording its events (see the module's docstring)."""

    # Set by Sessions.__init__.
    store: Store
    tg: anyio.abc.TaskGroup
    draining: bool
    busy: int
    #: Sessions stopped between two steps by a drain (``between_steps``).
    parked: int = 0
    _idle: anyio.Event
    _changed: dict[str, anyio.Event]
    _loop_thread: int
    on_event: Callable[[dict[str, Any]], None] | None

    if TYPE_CHECKING:

        def _fail(self, session_id: str, reason: str) -> None: ...

    def changed(self, session_id: str) -> anyio.Event:
        return self._changed.setdefault(session_id, anyio.Event())

    def _notify(self, session_id: str) -> None:
        event = self._changed.pop(session_id, None)
        if event is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
        else:  # an event emitted from a worker thread
            anyio.from_thread.run_sync(event.set)

    def _recorder(self, session_id: str, live: Live) -> Callable[[dict], None]:
        plan = live.compiled.agent.plan

        def record(event: dict[str, Any]) -> None:
            if event.get("session_id") not in (None, session_id):
                return
            event = _error_to_log(session_id, event)
            self.store.add_event(session_id, event)
            if self.on_event is not None:
                self.on_event(event)
            if event["event"] in ("hook_started", "hook_finished", "hook_failed", "hook_cancelled"):
                follow_hook_clock(self.store, plan, session_id, event, live.sandbox)
            if event["event"] == "hook_finished":
                record_hook_point(self.store, plan, session_id, event)
            elif event["event"] == "hook_failed" and event["point"] == "on_create":
                # The lifecycle now unwinds (on_destroy of the completed hooks,
                # then delete): a restart must finish that, not run on_create.
                self.store.update(session_id, status="closing")
            self._notify(session_id)

        return record

    def _set(self, session_id: str, **fields: Any) -> None:
        self.store.update(session_id, **fields)
        self._notify(session_id)

    async def _in_session(
        self,
        session_id: str,
        live: Live,
        work: Callable[[], Awaitable[Any]],
        *,
        scope: anyio.CancelScope | None = None,
    ) -> Any:
        """Run ``work`` in a task of the server (it outlives the request), with
        the session's events recorded and its secrets scrubbed; return its result.
        Inside ``scope``, if given: cancelling it stops ``work`` (after its own
        unwinding), and this raises ``WorkCancelled``."""
        done = anyio.Event()
        outcome: list[Any] = []

        async def task() -> None:
            self._work_started()
            with listen(self._recorder(session_id, live)):
                add_secrets(secret_strings(live.inputs.values()))
                try:
                    with scope or anyio.CancelScope():
                        outcome.append(("ok", await work()))
                    if not outcome:  # the scope's own cancellation, caught by it
                        outcome.append(("error", WorkCancelled()))
                except BaseException as exc:
                    outcome.append(("error", exc))
                    if not isinstance(exc, Exception):
                        raise
                finally:
                    done.set()
                    self._work_ended()

        self.tg.start_soon(task)
        await done.wait()
        kind, value = outcome[0]
        if kind == "error":
            raise value
        return value

    def _work_started(self) -> None:
        self.busy += 1
        if self._idle.is_set():
            self._idle = anyio.Event()

    def _work_ended(self) -> None:
        self.busy -= 1
        if self.busy == 0:
            self._idle.set()

    async def between_steps(self, session_id: str) -> None:
        """Called before each YAML step of an ``on_create`` runs (the journal
        has recorded the one before).  While the server drains, the session
        stops here, parked: it no longer counts as running work, so the drain
        ends once the steps running elsewhere have finished and been recorded,
        and the process then exits as a SIGKILL would (``parked``).  Another
        server, or the next start, goes on with this step: it has not begun."""
        if not self.draining:
            return
        logger.info("session %s stops before its next step: the server is draining", session_id)
        self.parked += 1
        self._work_ended()
        try:
            await anyio.sleep_forever()
        finally:
            self._work_started()
            self.parked -= 1

    async def drain(self, timeout: float) -> bool:
        """Stop taking sessions and messages (503), and wait up to ``timeout``
        seconds for the running starts, turns and closes; True if none is left.
        A start waits for its running YAML step only: then it is ``parked``
        (``between_steps``).  (SIGTERM: what a rolling restart sends.)"""
        self.draining = True
        with anyio.move_on_after(timeout):
            await self._idle.wait()
        return self.busy == 0

    async def _fail_gone(self, session_id: str, live: Live, why: str) -> None:
        """Fail a session whose sandbox vanished (no ``on_destroy``: there is
        nothing to run it in); what is left of it (a stopped container) is
        removed."""
        self._fail(session_id, f"the session's sandbox is gone ({why})")
        if live.sandbox is not None:
            try:
                await live.sandbox.delete()
            except Exception as exc:
                logger.warning("removing what is left of session %s's sandbox: %s", session_id, exc)

    async def _refuse_if_sandbox_gone(self, session_id: str, live: Live) -> None:
        """Before a message: a session whose sandbox vanished fails, and the
        message is refused (409), rather than run a turn in nothing."""
        gone = await self._in_session(session_id, live, lambda: sandbox_gone(session_id, live))
        if gone is not None:
            await self._fail_gone(session_id, live, gone)
            raise ApiError(
                409,
                "conflict",
                f"cannot send a message: session {session_id} failed: its sandbox is gone ({gone})",
            )

    def _refuse_while_draining(self) -> None:
        if self.draining:
            raise ApiError(
                503,
                "stopping",
                "this server is stopping; retry (another server, or this one once it "
                "is back, takes the session)",
                headers=[("retry-after", str(RETRY_AFTER_SECONDS))],
            )


async def sandbox_gone(session_id: str, live: Live) -> str | None:
    """Why the session's sandbox no longer exists (said by a ``sandbox_gone``
    event: called in the session's context), or None: it does, its backend
    cannot tell, or the question itself failed (a backend that does not
    answer decides nothing)."""
    if live.sandbox is None:
        return None
    try:
        why = await live.sandbox.gone()
    except Exception as exc:
        logger.warning("cannot tell whether session %s's sandbox exists: %s", session_id, exc)
        return None
    if why is not None:
        emit("sandbox_gone", session_id=session_id, reason=why)
    return why


def _error_to_log(session_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """A ``hook_failed`` or ``step_failed`` event as clients and the database
    get it: the hook (and step) and the exception type, no message.  The
    message (scrubbed) goes to the server's log at DEBUG, shown only with
    ``RUNNER_DEBUG=1`` (the seeds' rule for a deployed agent)."""
    if event.get("event") not in ("hook_failed", "step_failed") or "error" not in event:
        return event
    where = f"{event.get('hook')}.{event.get('point')}"
    if "step" in event:
        where += f" step {event['step'] + 1}"
    logger.debug(
        "session %s: hook %s failed: %s: %s",
        session_id,
        where,
        event.get("error_type"),
        scrubbed(event["error"]),
        extra={"session_id": session_id},
    )
    return {key: value for key, value in event.items() if key != "error"}
