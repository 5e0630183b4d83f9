"""Resuming sessions a stopped server left open: after a restart, a SIGTERM
past its drain, or (PostgreSQL) another server's death.

``Recovery`` is the part of ``Sessions`` that finds those sessions, lets
each backend end what was left running (``SandboxEnvironment.recover``),
re-attaches each sandbox through the backend contract (``reattach``;
``discard`` for one that cannot resume) and picks every session up where
its journal says it was: a finished step or hook point never runs again.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..core.events import emit, listen
from ..engine.hook_points import LifecyclePlan
from ..engine.lifecycle import resume_sandbox
from ..sandboxes.registry import backend_class
from .live import SECRET_REFERENCE, AgentFile, Live, agent_hash, resolve_inputs_of
from .store.base import FINAL_STATUSES, TURN, SessionRow, Store

logger = logging.getLogger("runner.serve.service")

#: How many sessions a server takes over at one look (PostgreSQL), at most.
TAKEOVER_BATCH = 8
#: Looks in a row that find sessions no server holds, and no fewer than the
#: look before (no server took one), before a server takes them beyond its
#: share: a server counted as live that takes none (draining, or not serving
#: their agent) must not leave them waiting for ever.
STALLED_LOOKS = 5
#: The longest pause between two tries of a backend that does not answer.
REATTACH_MAX_DELAY = 8.0


class Recovery:
    """Finding and resuming the open sessions no live server holds (a mixin
    of ``Sessions``, whose state and session methods it uses)."""

    store: Store
    agents: dict[str, AgentFile]
    live: dict[str, Live]
    owner: str
    max_sessions: int
    draining: bool
    reattach_timeout: float
    tg: anyio.abc.TaskGroup
    _mine: set[str]
    #: Sessions no server held at this server's last look, and how many
    #: looks in a row found them without any fewer (``_share``).
    _unheld_before = 0
    _stalled = 0

    if TYPE_CHECKING:

        def _compile(self, agent: AgentFile, session_id: str) -> Any: ...
        def _fail(self, session_id: str, reason: str) -> None: ...
        def _set(self, session_id: str, **fields: Any) -> None: ...
        def _recorder(self, session_id: str, live: Live) -> Callable[[dict], None]: ...
        def _opened(
            self, session_id: str, live: Live, sandbox: Any, plan: LifecyclePlan
        ) -> None: ...
        async def _start(self, session_id: str, live: Live) -> None: ...
        async def _guarded_start(
            self, session_id: str, live: Live, work: Callable[[], Awaitable[None]]
        ) -> None: ...
        async def _in_session(
            self, session_id: str, live: Live, work: Callable[[], Awaitable[Any]]
        ) -> Any: ...
        async def _turn(self, session_id: str, live: Live, text: str) -> dict[str, Any]: ...
        def _finish_close(self, session_id: str, session: Any) -> None: ...

    async def resume_all(self) -> list[str]:
        """Pick up every session a stopped server left open (on PostgreSQL:
        those no live server holds); returns their ids.

        First the store's durable containers that no open session records are
        removed: a pool's unclaimed ones, or one created just before the stop,
        before the server could record it (that session then starts afresh).
        On PostgreSQL, only the containers of the sessions taken (other servers'
        pools and sessions are theirs)."""
        rows = self._claim_open()
        await self._resume_rows(rows)
        return [row.id for row in rows]

    async def watch_claims(self, interval: float) -> None:
        """On PostgreSQL, every ``interval`` seconds: check this server still
        holds its sessions (else raise ``StoreError``: stop), and take over the
        open sessions no live server holds (their server died)."""
        while True:
            await anyio.sleep(interval)
            self.store.check_alive()
            rows = self._claim_open()
            if rows:
                logger.warning(
                    "taking over %d session(s) a stopped server left: %s",
                    len(rows),
                    ", ".join(row.id for row in rows),
                )
                await self._resume_rows(rows)

    def _claim_open(self) -> list[SessionRow]:
        """Claim the open sessions no server holds; their rows as they are now.

        On PostgreSQL, no more than this server's share (``_share``), so that
        the live servers split a dead server's sessions, and never beyond
        ``--max-sessions`` held at once; a draining server takes none."""
        taken: list[SessionRow] = []
        if self.draining:
            return taken
        every = self.store.open_ids()
        ids = [
            session_id
            for session_id, agent in every
            if session_id not in self._mine and (self.store.exclusive or agent in self.agents)
        ]
        room = None
        if not self.store.exclusive:
            ids = self.store.unheld(ids)
            room = self._share(len(every), len(ids))
        for session_id in ids:
            if room is not None and len(taken) >= room:
                break
            if not self.store.claim(session_id):
                continue
            row = self.store.session(session_id)  # read again now that it is ours
            if row is None or row.status in FINAL_STATUSES:
                self.store.release(session_id)  # it finished meanwhile
                continue
            self.store.take(session_id, self.owner)
            row.owner, row.server_id = self.owner, self.store.server_id
            self._mine.add(session_id)
            taken.append(row)
        return taken

    def _share(self, open_sessions: int, unheld: int) -> int:
        """How many of the ``unheld`` sessions this server takes at this look:
        up to an even share of all ``open_sessions`` among the live servers
        (less what it holds), so that two survivors of a dead server each
        take half of its sessions, whichever looks first; all it has room
        for once ``STALLED_LOOKS`` looks saw no other server take any.
        Never beyond ``--max-sessions`` nor ``TAKEOVER_BATCH``."""
        room = min(TAKEOVER_BATCH, self.max_sessions - len(self._mine))
        if unheld and unheld >= self._unheld_before:
            self._stalled += 1
        else:
            self._stalled = 0
        self._unheld_before = unheld
        if self._stalled >= STALLED_LOOKS:
            return max(room, 0)
        live = max(1, self.store.live_servers())
        even = -(-open_sessions // live)  # rounded up: the shares cover them all
        return max(min(room, even - len(self._mine)), 0)

    async def _resume_rows(self, rows: list[SessionRow]) -> None:
        """Before any step runs again, each backend ends what the stopped
        server left running (containers no session records, processes of a
        cut-off command); then every session resumes."""
        exclusive = self.store.exclusive
        names = (
            {agent.backend for agent in self.agents.values()}
            if exclusive
            else {row.backend for row in rows}
        )
        for name in sorted(names):
            mine = [row for row in rows if row.backend == name]
            try:
                backend = backend_class(name)
            except KeyError:
                continue  # failed by _resume: no server serves it
            said = await backend.recover(
                [row.sandbox for row in mine if row.sandbox],
                owner=self.store.id,
                sessions=None if exclusive else {row.id for row in mine},
            )
            for line in said:
                logger.warning("%s", line)
        for row in rows:
            self.tg.start_soon(self._resume_guarded, row)

    async def _resume_guarded(self, row: SessionRow) -> None:
        """Resume one session; whatever goes wrong fails that session only (not
        the server, nor, on PostgreSQL, every server that takes it over next)."""
        from .store.base import StoreError

        try:
            await self._resume(row)
        except (StoreError, anyio.get_cancelled_exc_class()):
            raise
        except Exception as exc:
            logger.exception("resuming session %s failed", row.id)
            with contextlib.suppress(Exception):
                self._fail(row.id, f"cannot resume: {type(exc).__name__}: {exc}")

    async def _resume(self, row: SessionRow) -> None:
        session_id = row.id
        agent = self.agents.get(row.agent)
        if agent is None:
            await self._delete_orphan(row)
            self._fail(session_id, f"agent {row.agent!r} is not served by this server")
            return
        secret = [i for i, v in row.inputs.items() if v == SECRET_REFERENCE]
        if secret:
            reason = (
                f"the server restarted and the secret input(s) {', '.join(secret)} were held "
                "only in its memory (secret values are never stored): the session cannot resume"
            )
            await self._delete_orphan(row)
            self._fail(session_id, reason)
            return
        if agent_hash(agent) != row.file_hash:
            await self._delete_orphan(row)
            if agent.python is not None:
                why = (
                    f"the hooks of {agent.reference} changed since the session started: "
                    "its journal of finished hook points cannot be replayed on other hooks"
                )
            else:
                why = (
                    f"{agent.path} changed since the session started: "
                    "its journal of finished steps cannot be replayed on another file"
                )
            self._fail(session_id, f"the server restarted and {why}")
            return
        try:
            compiled = self._compile(agent, session_id)
            inputs = resolve_inputs_of(compiled, row.inputs)
        except Exception as exc:
            await self._delete_orphan(row)
            self._fail(session_id, f"cannot resume: {exc}")  # input errors never quote a secret
            return
        live = Live(compiled=compiled, inputs=inputs, agent_name=agent.name)
        self.live[session_id] = live
        attempt = 1 + sum(
            1 for _, event in self.store.events(session_id) if event["event"] == "session_resumed"
        )
        with listen(self._recorder(session_id, live)):  # resumes are visible in its events
            emit(
                "session_resumed",
                session_id=session_id,
                attempt=attempt,
                status=row.status,
                server=self.owner,
            )
        if row.sandbox is None:  # stopped before its sandbox existed: start afresh
            # one made but not yet recorded goes first (a cloud instance)
            await _discard_unrecorded(compiled.agent.environment, session_id)
            await self._start(session_id, live)
            return
        sandbox, problem = await _reattach(
            compiled.agent.environment, row, retry_for=self.reattach_timeout
        )
        if sandbox is None:
            self._fail(session_id, f"the server restarted and {problem}")
            return
        live.sandbox = sandbox  # its Python hooks get a journaling wrapper of it
        plan = compiled.agent.plan
        if row.status == "starting":
            completed = self.store.finished_hooks(session_id, "on_create")

            async def work() -> None:
                await resume_sandbox(
                    sandbox,
                    plan,
                    inputs,
                    completed=completed,
                    cleanup_timeout_seconds=compiled.agent.environment.cleanup_timeout_seconds,
                )
                self._opened(session_id, live, sandbox, plan)
                emit("session_started", session_id=session_id, agent=agent.name)

            await self._guarded_start(session_id, live, work)
        elif row.status == "closing":
            created = self.store.finished_hooks(session_id, "on_create")
            destroyed = self.store.finished_hooks(session_id, "on_destroy")
            owed = LifecyclePlan(
                tuple(h for i, h in enumerate(plan.hooks) if i in created and i not in destroyed)
            )
            self._opened(session_id, live, sandbox, owed)
            closing = live.session
            assert closing is not None
            await self._in_session(session_id, live, lambda: closing.close(reason="resumed"))
            self._finish_close(session_id, closing)
        else:
            self._opened(session_id, live, sandbox, plan)
            session = live.session
            assert session is not None
            if row.conversation:
                session.restore_conversation(row.conversation)
            if row.status == "running":
                message = self.store.finished_step(session_id, TURN, "turn:message", 0)
                if message is None:  # stopped before the turn was recorded
                    turn = {
                        "status": "failed",
                        "text": None,
                        "error": "the server stopped during this turn; send the message again",
                    }
                    self._set(session_id, status="waiting", result={"turn": turn})
                    return
                # The turn goes on: its recorded replies and tool calls replayed,
                # the cut-off call run again, then on with the model.
                async with live.lock:
                    await self._turn(session_id, live, message["text"])

    async def _delete_orphan(self, row: SessionRow) -> None:
        """Delete the sandbox of a session that cannot resume (no hook runs)."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the local backend's no-isolation warning
                environment = backend_class(row.backend)()
        except Exception as exc:
            logger.error("cannot delete the %s sandbox of %s: %s", row.backend, row.id, exc)
            return
        if row.sandbox is None:  # killed while creating it: found by its name
            await _discard_unrecorded(environment, row.id)
            return
        await _discard(environment, row)


async def _discard(environment: Any, row: SessionRow) -> None:
    """Delete the sandbox ``row`` records if it is still there (and is its session's)."""
    try:
        await environment.discard(row.sandbox or {}, session_id=row.id)
    except Exception as exc:
        logger.error("deleting the sandbox of %s failed: %s", row.id, exc)


async def _discard_unrecorded(environment: Any, session_id: str) -> None:
    """Delete the cloud instances named as the session's that it never recorded
    (the server was killed while creating one); a failure is logged only:
    the platform deletes them at their TTL."""
    try:
        deleted = await environment.discard_unrecorded(session_id)
    except Exception as exc:
        logger.error("%s", exc)
        return
    if deleted:
        logger.warning(
            "deleted %d cloud instance(s) session %s made but never recorded: %s",
            len(deleted),
            session_id,
            ", ".join(deleted),
        )


async def _attach_retrying(attach: Callable[[], Awaitable[Any]], retry_for: float) -> Any:
    """``attach()``, tried again while its backend does not answer
    (``SandboxUnreachableError``), with doubling pauses (0.5 s up to
    ``REATTACH_MAX_DELAY``), for up to ``retry_for`` seconds; then its error."""
    from ..core.errors import SandboxUnreachableError

    deadline = anyio.current_time() + retry_for
    delay = 0.5
    while True:
        try:
            return await attach()
        except SandboxUnreachableError as exc:
            left = deadline - anyio.current_time()
            if left <= 0:
                raise
            logger.warning("%s; trying again in %.1f s", exc, min(delay, left))
            await anyio.sleep(min(delay, left))
            delay = min(delay * 2, REATTACH_MAX_DELAY)


async def _reattach(environment: Any, row: SessionRow, *, retry_for: float = 0) -> tuple[Any, str]:
    """The sandbox of ``row`` again, or (None, why it cannot be found).

    A sandbox that cannot be re-attached (gone, stopped, another session's, a
    cloud instance that lost its disk) is deleted if it is still there and
    is this session's: nothing is left behind.  A backend that does not
    answer is tried again for ``retry_for`` seconds first.
    """
    from ..core.errors import SandboxUnavailableError

    record = row.sandbox or {}
    try:
        sandbox = await _attach_retrying(
            lambda: environment.reattach(record, session_id=row.id), retry_for
        )
    except SandboxUnavailableError as exc:
        await _discard(environment, row)
        return None, _why_not_attached(exc, retry_for)
    return sandbox, ""


def _why_not_attached(exc: Exception, retry_for: float) -> str:
    from ..core.errors import SandboxUnreachableError

    if isinstance(exc, SandboxUnreachableError):
        return f"its sandbox's backend did not answer for {retry_for:g} s ({exc})"
    return f"its sandbox is gone ({exc})"
