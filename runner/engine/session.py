"""Sessions: one sandbox, its hooks' lifecycle, and a conversation.

A session is opened by ``Agent.start_session`` and closed exactly once, by
whichever comes first: ``cancel()``, leaving ``async with session``, leaving
``local_runtime()``, the end of a one-shot ``Agent.run``, or its sandbox's
``ttl_seconds``.  Closing runs the lifecycle's close (every ``on_destroy``,
then delete); closing again is a no-op.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import anyio

from ..core.errors import SessionTerminatedError
from ..core.events import emit
from ..core.redaction import scrub
from ..models.protocol import Completed
from ..sandboxes.base import Sandbox
from .hook_points import HookFailure, LifecyclePlan
from .inputs import SessionInput, secret_strings
from .lifecycle import close_sandbox

if TYPE_CHECKING:
    from ..models.protocol import Message, Model, TurnResult
    from .agent import Agent

logger = logging.getLogger("runner")

SessionStatus = Literal["running", "waiting", "terminated"]


class Session:
    """A started session.  Use ``async with`` (or ``cancel()``) so it always closes."""

    def __init__(
        self,
        *,
        agent: Agent,
        session_id: str,
        sandbox: Sandbox | None,
        plan: LifecyclePlan,
        inputs: Mapping[str, SessionInput],
        ttl_seconds: float | None,
    ) -> None:
        self.agent = agent
        self.id = session_id
        self.sandbox = sandbox
        self.inputs = dict(inputs)
        self._plan = plan
        self._status: SessionStatus = "waiting"
        self._conversation: list[Message] = []
        if agent.instructions:
            self._conversation.append({"role": "system", "content": agent.instructions})
        self._turn_lock = anyio.Lock()
        self._turn_scope: anyio.CancelScope | None = None
        self._closed = anyio.Event()
        self._closed_because: str | None = None
        #: The ``on_destroy`` failures of the close (logged, and kept for callers).
        self.destroy_failures: list[HookFailure] = []
        self.ttl_seconds = ttl_seconds
        self.deadline = anyio.current_time() + ttl_seconds if ttl_seconds else None
        #: Wraps the model and the sandbox each turn uses.  ``runner serve``
        #: journals them through it, so that a turn cut off by a restart
        #: replays the replies and tool results it had before going on.
        self.turn_wrapper: (
            Callable[[Model, Sandbox | None], tuple[Model, Sandbox | None]] | None
        ) = None

    @property
    def conversation(self) -> list[Message]:
        """The messages so far (a copy): what the next turn sends the model."""
        return list(self._conversation)

    def restore_conversation(self, messages: Sequence[Message]) -> None:
        """Continue from ``messages`` (a conversation kept from an earlier
        process: ``runner serve`` after a restart)."""
        self._conversation = [dict(message) for message in messages]

    @property
    def status(self) -> SessionStatus:
        """``"running"`` during a turn, ``"waiting"`` between turns, then ``"terminated"``."""
        return self._status

    @property
    def expired(self) -> bool:
        return self.deadline is not None and anyio.current_time() >= self.deadline

    async def run(self, message: str) -> TurnResult:
        """Run one turn: the message goes to the model, which may use the sandbox's tools."""
        await self._close_if_expired()
        if self._status == "terminated":
            raise SessionTerminatedError(f"session {self.id} is closed ({self._closed_because})")
        model = self.agent.resolve_model()
        async with self._turn_lock:
            if self._status == "terminated":
                raise SessionTerminatedError(
                    f"session {self.id} is closed ({self._closed_because})"
                )
            self._status = "running"
            before_turn = len(self._conversation)
            self._conversation.append({"role": "user", "content": message})
            result: TurnResult | None = None
            try:
                with anyio.CancelScope() as self._turn_scope:
                    result = await self._turn(model)
            finally:
                self._turn_scope = None
                if self._status == "running":
                    self._status = "waiting"
                if not isinstance(result, Completed):
                    # A failed turn leaves no unanswered message behind.
                    del self._conversation[before_turn:]
            if result is None:
                raise SessionTerminatedError(
                    f"session {self.id} was closed during the turn ({self._closed_because})"
                )
            return result

    async def _turn(self, model: Model) -> TurnResult:
        from ..models.turns import run_turn

        emit("turn_started", session_id=self.id)
        started = time.perf_counter()
        sandbox = self.sandbox
        if self.turn_wrapper is not None:
            model, sandbox = self.turn_wrapper(model, sandbox)
        mark = await self._mark_processes()
        try:
            result = await run_turn(
                model,
                self._conversation,
                sandbox,
                max_tool_calls=self.agent.max_tool_calls,
                tools=self.agent.tools,
                session_id=self.id,
                inputs=self.inputs,
            )
        finally:
            if mark is not None:
                await self._end_turn_processes(mark)
        secrets = secret_strings(self.inputs.values())
        text, error = getattr(result, "text", None), getattr(result, "error", None)
        emit(
            "turn",
            session_id=self.id,
            status=type(result).__name__.lower(),
            duration_seconds=time.perf_counter() - started,
            text=scrub(text, secrets) if text else text,
            error=scrub(error, secrets) if error else error,
            tool_calls=[{"name": c.name, "is_error": c.is_error} for c in result.tool_calls],
        )
        return result

    async def _mark_processes(self) -> object | None:
        """What runs in the sandbox before a turn (None: nothing is to be
        killed after it: ``keep_background_processes``, or no sandbox)."""
        if self.sandbox is None or self.agent.keep_background_processes:
            return None
        try:
            return await self.sandbox.mark_processes()
        except Exception as exc:  # the turn still runs; the close kills all anyway
            logger.warning(
                "could not list the processes running in session %s before a turn: %s: %s",
                self.id,
                type(exc).__name__,
                exc,
            )
            return None

    async def _end_turn_processes(self, mark: object) -> None:
        """Kill what the turn's tools started and left running (issue 26).
        Shielded: a turn cut short ends its processes too; a close under way
        kills every one anyway."""
        assert self.sandbox is not None
        with anyio.CancelScope(shield=True):
            if self._status == "terminated":
                return
            try:
                with anyio.fail_after(60):
                    killed = await self.sandbox.end_processes(since=mark)
            except Exception as exc:
                logger.warning(
                    "could not stop the processes the turn left running in session %s: %s: %s",
                    self.id,
                    type(exc).__name__,
                    exc,
                )
                return
            if killed:
                logger.info(
                    "killed %d process(es) the turn left running in session %s", killed, self.id
                )

    async def cancel(self) -> None:
        """Close the session: every ``on_destroy`` in reverse order, then delete the sandbox."""
        await self.close(reason="cancelled")

    async def close(self, *, reason: str = "closed") -> None:
        """Close once.  A second call waits for the first to finish; cleanup
        survives cancellation."""
        with anyio.CancelScope(shield=True):
            if self._status == "terminated":
                await self._closed.wait()
                return
            self._status = "terminated"
            self._closed_because = reason
            if self._turn_scope is not None:
                self._turn_scope.cancel()
            emit("session_closing", session_id=self.id, reason=reason)
            try:
                if self.sandbox is not None:
                    self.destroy_failures = await close_sandbox(
                        self.sandbox,
                        self._plan,
                        self.inputs,
                        cleanup_timeout_seconds=self.agent.environment.cleanup_timeout_seconds,
                    )
            finally:
                self._closed.set()
                emit("session_closed", session_id=self.id, reason=reason)

    async def _close_if_expired(self) -> None:
        if self._status != "terminated" and self.expired:
            await self.close(reason=f"ttl_seconds={self.ttl_seconds:g} expired")

    async def wait_for_expiry(self) -> None:
        """Sleep until the TTL and close the session then (used by ``local_runtime``)."""
        if self.deadline is None:
            return
        await anyio.sleep_until(self.deadline)
        await self._close_if_expired()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close(reason="left async with")

    def __repr__(self) -> str:
        return f"<Session {self.id} {self._status}>"
