"""The sessions a server runs: start, turns, close, and resume after a restart.

Each session's work (its ``on_create``, each turn, its close) runs in a task
of the server's task group, inside a context that records the session's
events (already scrubbed of its secrets) into the store and wakes the
clients following them.  A client that disconnects does not stop that work.

Every state change is written to the store before the next step: the status
(``starting``, ``waiting``, ``running``, ``closing``, then ``closed`` or
``failed``), where the sandbox is (once it exists, before any ``on_create``),
each finished YAML step and hook point (``journal``).  At start-up,
:meth:`Sessions.resume_all` finds every session that was not closed and picks
it up where the journal says it was.

An agent is a YAML file, compiled again for each session, or a Python
``runner.Agent`` (``--agent``) whose one object every session shares; both
are found again by the name they are served under.  At most
``max_sessions`` sessions are open at once: one more is refused (503)
before anything is created.

Docker sessions get durable containers: labelled with the store's id
(``sandbox-runner.durable``), so neither ``runner gc`` nor another runner
removes them when this process dies, and a restarted server re-attaches
them (``LocalDockerSandbox.reattach``); their expiry still bounds them.
Mistral sessions record their cloud instance (ids, name, marker file; no
secret) and a restarted server re-attaches it (``MistralSandbox.reattach``);
nothing deletes an instance when the server dies, and the platform's
``delete_after_delay`` (the sandbox's ``ttl_seconds``) bounds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread

from ..core.events import scrubbed
from ..engine.inputs import SessionInput, closest
from ..engine.session import Session
from .journal import journal_steps
from .live import (
    SECRET_REFERENCE,
    AgentFile,
    ApiError,
    Live,
    PythonCompiled,
    agent_hash,
    resolve_inputs_of,
)
from .recovery import Recovery
from .session_work import RETRY_AFTER_SECONDS, sandbox_gone
from .starting import Starting
from .store.base import FINAL_STATUSES, TURN, NewSession, SessionRow, Store

logger = logging.getLogger("runner.serve.service")

#: How many open sessions (not closed or failed) a server holds by default
#: (``--max-sessions``): the bench runs 100 concurrent sessions without a
#: failure, and each open session holds a workspace or container with its
#: exec channel, so the default stays far from the usual 1024 descriptors.
DEFAULT_MAX_SESSIONS = 100
#: How long a restarted server keeps trying to re-attach a sandbox whose
#: backend does not answer (the Docker engine restarting, a cloud API outage),
#: by default, before it fails the session.
DEFAULT_REATTACH_TIMEOUT = 60.0


class Sessions(Starting, Recovery):
    def __init__(
        self,
        *,
        agents: Mapping[str, AgentFile],
        store: Store,
        output_dir: Path,
        task_group: anyio.abc.TaskGroup,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        owner: str = "",
        reattach_timeout: float = DEFAULT_REATTACH_TIMEOUT,
    ) -> None:
        #: How long a restarted server keeps trying a sandbox whose backend
        #: does not answer before it fails the session (``--reattach-timeout``).
        self.reattach_timeout = reattach_timeout
        self.agents = dict(agents)
        #: This server's address, recorded with the sessions it runs (on
        #: PostgreSQL, a client asking another server is sent here).
        self.owner = owner
        #: The sessions this server runs (claimed in the store), open ones only.
        self._mine: set[str] = set()
        self.max_sessions = max_sessions
        #: Set on SIGTERM: no new session or message; running work may finish.
        self.draining = False
        #: Called with every event stored (the metrics count them).
        self.on_event: Callable[[dict[str, Any]], None] | None = None
        #: Work running in this server's tasks (a start, a turn, a close).
        self.busy = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.store = store
        self.output_dir = output_dir
        self.tg = task_group
        self.live: dict[str, Live] = {}
        #: Clients following a session's events wait on these (one per session).
        self._changed: dict[str, anyio.Event] = {}
        self._loop_thread = threading.get_ident()
        #: Sessions being inserted (their commit awaited): counted by --max-sessions.
        self._creating = 0
        # The store's commits (its writer thread), and on PostgreSQL other
        # servers' commits, wake the clients following those sessions.
        loop = asyncio.get_running_loop()

        def committed(session_ids: set[str]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody follows
                loop.call_soon_threadsafe(self._wake, session_ids)

        store.on_commit = committed
        if hasattr(store, "on_commit_elsewhere"):
            store.on_commit_elsewhere = lambda session_id: committed({session_id})
        #: Per Docker agent with ``pool:``, the environment whose warm pool its
        #: sessions share (each session compiles the agent again).
        self._pools: dict[str, Any] = {}
        #: One Docker Engine client per engine address, shared by every session.
        #: A Python agent is built once, by its module: its sessions share it.
        self._python: dict[str, PythonCompiled] = {}
        for agent in self.agents.values():
            if agent.python is not None:
                # the steps of runner.load()ed hooks
                journal_steps(agent.python.plan, self.store, self.between_steps)
                self._make_durable(agent, agent.python.environment)
                self._python[agent.name] = PythonCompiled(agent.python)

    # --- helpers ------------------------------------------------------------

    def _wake(self, session_ids: set[str]) -> None:
        for session_id in session_ids:
            self._notify(session_id)

    async def _set_async(self, session_id: str, **fields: Any) -> None:
        """``_set`` for the event loop: it waits for the commit without blocking it."""
        await self.store.update_async(session_id, **fields)
        self._notify(session_id)

    def _compile(self, agent: AgentFile, session_id: str) -> Any:
        """Compile the agent's file for one session: its save: steps write under
        OUTPUT_DIR/<session id>/, and its steps are journaled.  A Python agent
        is not compiled: every session gets the one object (prepared once)."""
        from ..config import compile_file

        if agent.python is not None:
            return self._python[agent.name]
        assert agent.path is not None
        compiled = compile_file(agent.path, output_dir=self.output_dir / session_id)
        journal_steps(compiled.agent.plan, self.store, self.between_steps)
        self._make_durable(agent, compiled.agent.environment)
        return compiled

    def _make_durable(self, agent: AgentFile, environment: Any) -> None:
        """The environment's sandboxes belong to this store, not to the process
        (a restarted server re-attaches them); its pool is the agent's."""
        environment.make_durable(self.store.id)
        pooled = environment.pool_size or environment.seeded_pool_size
        if agent.python is not None:  # one environment for every session: its own pool
            if pooled:
                self._pools[agent.name] = environment
            return
        if pooled:
            source = self._pools.get(agent.name)
            if source is None:
                from ..config import compile_file

                assert agent.path is not None
                source = compile_file(agent.path, output_dir=self.output_dir).agent.environment
                source.make_durable(self.store.id)
                self._pools[agent.name] = source
            environment.share_pool(source)

    def warm_sandboxes(self) -> dict[tuple[str, str], int]:
        """(agent, pool kind) -> sandboxes ready to claim now, for each agent
        with a warm pool (the ``runner_warm_sandboxes`` gauge)."""
        return {
            (agent, kind): count
            for agent, environment in list(self._pools.items())
            for kind, count in environment.warm_counts().items()
        }

    def close_pools(self) -> None:
        """Remove the warm pools' idle containers (at a clean stop)."""
        for environment in self._pools.values():
            environment.close_pool()

    def row(self, session_id: str) -> SessionRow:
        row = self.store.session(session_id)
        if row is None:
            raise ApiError(404, "not_found", f"no session {session_id!r}")
        return row

    # --- create -------------------------------------------------------------

    def validate(
        self, body: Any, session_id: str
    ) -> tuple[AgentFile, Any, dict[str, SessionInput], dict, str]:
        """Check a create request; nothing is created.  Returns the agent, its
        compile for ``session_id``, the resolved inputs, the inputs to store
        (secrets as references) and the request's fingerprint."""
        if not isinstance(body, dict):
            raise ApiError(400, "bad_request", "the body must be a JSON object")
        unknown = set(body) - {"agent", "inputs", "idempotency_key"}
        if unknown:
            raise ApiError(400, "bad_request", f"unknown field(s): {', '.join(sorted(unknown))}")
        name = body.get("agent")
        if "agent" not in body and len(self.agents) == 1:
            name = next(iter(self.agents))
        if not isinstance(name, str) or name not in self.agents:
            served = ", ".join(sorted(self.agents))
            raise ApiError(400, "unknown_agent", f"unknown agent {name!r} (served: {served})")
        raw = body.get("inputs")
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise ApiError(400, "bad_input", "inputs must be an object of input_id: value")
        key = body.get("idempotency_key")
        if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 255):
            raise ApiError(
                400, "bad_request", "idempotency_key must be a string of 1-255 characters"
            )
        agent = self.agents[name]
        compiled = self._compile(agent, session_id)
        for input_id in raw:
            if input_id not in compiled.inputs:
                near = closest(input_id, list(compiled.inputs))
                hint = (
                    f"did you mean {near!r}?"
                    if near
                    else f"declared: {', '.join(sorted(compiled.inputs)) or 'none'}"
                )
                raise ApiError(400, "bad_input", f"inputs: unknown input {input_id!r}; {hint}")
        resolved = resolve_inputs_of(compiled, raw)
        stored = {
            input_id: SECRET_REFERENCE
            if compiled.inputs[input_id].input_class.__secret__
            else value
            for input_id, value in raw.items()
        }
        # Secret values take no part: nothing derived from them is stored.
        fingerprint = hashlib.sha256(
            json.dumps({"agent": name, "inputs": stored}, sort_keys=True).encode()
        ).hexdigest()
        return agent, compiled, resolved, stored, fingerprint

    async def create(self, body: Any) -> tuple[SessionRow, bool]:
        """Create (or, for a known idempotency key, find) a session; returns it and
        whether it is new.  Its ``on_create`` runs in the background."""
        self._refuse_while_draining()
        session_id = f"sess_{os.urandom(16).hex()}"
        agent, compiled, resolved, stored, fingerprint = self.validate(body, session_id)
        key = body.get("idempotency_key")
        if key is not None:
            existing = self.store.session_by_key(key)
            if existing is not None:
                return self._same(existing, fingerprint), False
        # No await between this count and the reservation (_creating): two
        # requests cannot both take the last place.  A replayed idempotency
        # key (above) creates nothing, so it is answered even at the limit.
        # (A session whose insert just committed may count twice for an
        # instant: never one too many.)
        if self.store.count_open() + self._creating >= self.max_sessions:
            raise ApiError(
                503,
                "too_many_sessions",
                f"this server already has {self.max_sessions} open sessions (--max-sessions); "
                "close one (DELETE /v1/sessions/{id}) or retry later",
                headers=[("retry-after", str(RETRY_AFTER_SECONDS))],
            )
        # Claimed before the row exists: another server looking for sessions
        # to take over never sees this one unclaimed.  (A new random id: no
        # one else can hold it.)
        self._creating += 1
        try:
            await self.store.read(self.store.claim, session_id)
            row = await self.store.create_session_async(
                NewSession(
                    id=session_id,
                    agent=agent.name,
                    inputs=stored,
                    idempotency_key=key,
                    fingerprint=fingerprint,
                    file_hash=agent_hash(agent),
                    backend=agent.backend,
                    owner=self.owner,
                )
            )
        finally:
            self._creating -= 1
        if row is None:  # a concurrent request took the key first
            self.store.release(session_id)
            return self._same(self.store.session_by_key(key), fingerprint), False  # type: ignore[arg-type]
        self._mine.add(session_id)
        live = Live(compiled=compiled, inputs=resolved, agent_name=agent.name)
        self.live[session_id] = live
        self.tg.start_soon(self._start, session_id, live)
        return row, True

    @staticmethod
    def _same(existing: SessionRow, fingerprint: str) -> SessionRow:
        if existing.fingerprint != fingerprint:
            raise ApiError(
                409,
                "idempotency_conflict",
                f"idempotency key {existing.idempotency_key!r} belongs to session {existing.id}, "
                "which was created with another agent or other inputs",
            )
        return existing

    def _fail(self, session_id: str, reason: str) -> None:
        self.live.pop(session_id, None)
        self._set(session_id, status="failed", error=reason)
        self._release(session_id)

    def _release(self, session_id: str) -> None:
        """The session is final: this server no longer holds it."""
        self._mine.discard(session_id)
        self.store.release(session_id)

    def runs_here(self, session_id: str) -> bool:
        """Whether this server runs the session (its events wake this process)."""
        return session_id in self._mine

    def _elsewhere(self, row: SessionRow, action: str) -> None:
        """Refuse (409) a request for an open session another server runs."""
        if row.status in FINAL_STATUSES or self.runs_here(row.id) or not row.owner:
            return
        if row.owner == self.owner:
            return
        raise ApiError(
            409,
            "owned_elsewhere",
            f"cannot {action}: session {row.id} is run by the server at {row.owner}; "
            "send this request there (if that server stopped, another one takes the "
            "session over within seconds: retry)",
        )

    # --- turns and close ----------------------------------------------------

    def _live(self, session_id: str, *, action: str) -> Live:
        row = self.row(session_id)
        self._elsewhere(row, action)
        live = self.live.get(session_id)
        if row.status in FINAL_STATUSES or live is None or live.session is None:
            why = f"is {row.status}" + (f" ({row.error})" if row.error else "")
            raise ApiError(409, "conflict", f"cannot {action}: session {session_id} {why}")
        return live

    async def message(self, session_id: str, text: str) -> dict[str, Any]:
        self._refuse_while_draining()
        live = self._live(session_id, action="send a message")
        try:
            live.compiled.agent.resolve_model()
        except Exception as exc:  # no key for the model: the CLI's usage error
            raise ApiError(400, "model_unavailable", str(exc)) from None
        async with live.lock:
            self._live(session_id, action="send a message")
            self._refuse_while_draining()  # the stop began while it waited for the lock
            await self._refuse_if_sandbox_gone(session_id, live)
            await self._set_async(session_id, status="running")
            return await self._turn(session_id, live, text)

    async def _turn(self, session_id: str, live: Live, text: str) -> dict[str, Any]:
        """Run one turn (the session is ``running``), journaled: its message is
        recorded first, then each model reply and tool call; a restart goes on
        from there (``_resume``).  The end stores the conversation and the
        result and drops the turn's journal, in one transaction."""
        session = live.session
        assert session is not None

        async def work() -> tuple[dict[str, Any], list[dict[str, Any]], str | None]:
            from ..models.protocol import Completed

            # Here, in the session's context, where scrubbed() knows its secrets.
            await self.store.finish_step_async(
                session_id, TURN, "turn:message", 0, {"text": scrubbed(text)}
            )
            try:
                result = await session.run(text)
                turn = {
                    "status": "completed" if isinstance(result, Completed) else "failed",
                    "text": scrubbed(getattr(result, "text", None)),
                    "error": scrubbed(getattr(result, "error", None)),
                }
            except Exception as exc:
                turn = {
                    "status": "failed",
                    "text": None,
                    "error": scrubbed(f"{type(exc).__name__}: {exc}"),
                }
            why = await sandbox_gone(session_id, live)
            if why is not None:
                error = f"the session's sandbox is gone ({why})"
                turn = {**turn, "status": "failed", "error": error}
            # Kept for a resumed session, scrubbed (here, in the session's
            # context) like every event: after a restart the model sees ***
            # where a secret was.
            return turn, scrubbed(session.conversation), why

        turn, conversation, gone = await self._in_session(session_id, live, work)
        if gone is not None:
            await self._fail_gone(session_id, live, gone)
            return turn
        if self.row(session_id).status == "running":
            await self.store.end_turn_async(
                session_id, conversation=conversation, result={"turn": turn}
            )
            self._notify(session_id)
        return turn

    async def close(self, session_id: str, *, reason: str = "deleted") -> SessionRow:
        row = await self.store.read(self.row, session_id)
        if row.status in FINAL_STATUSES:
            return row
        self._elsewhere(row, "close it")
        self._refuse_while_draining()
        starting = self.starting_here(session_id)
        if starting is not None:  # in on_create: cancelled, then closed
            await self._cancel_start(session_id, starting)
            if starting.session is None:
                return await self.store.read(self.row, session_id)
            # on_create ended before the cancel could reach it: closed as usual
        live = self.live.get(session_id)
        if live is None or live.session is None:
            raise ApiError(409, "conflict", f"session {session_id} is {row.status}; try again")
        await self._set_async(session_id, status="closing")
        session = live.session
        await self._in_session(session_id, live, lambda: session.close(reason=reason))
        self.live.pop(session_id, None)
        await self._set_async(session_id, **_closed(session))
        self._release(session_id)
        return await self.store.read(self.row, session_id)

    def _finish_close(self, session_id: str, session: Session) -> None:
        self.live.pop(session_id, None)
        self._set(session_id, **_closed(session))
        self._release(session_id)


def _closed(session: Session) -> dict[str, Any]:
    """The fields of a closed session: ``failed`` if an ``on_destroy`` failed
    (the hook and the type only, as in events: the engine logged the rest)."""
    failures = [f"hook {f.hook}.{f.point} failed: {f.error_type}" for f in session.destroy_failures]
    return {"status": "failed" if failures else "closed", "error": "; ".join(failures) or None}
