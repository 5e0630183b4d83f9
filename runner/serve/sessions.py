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

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread

from ..core.errors import SessionInputError
from ..core.events import add_secrets, emit, listen, scrubbed
from ..core.redaction import scrub
from ..engine.inputs import SessionInput, closest, secret_strings
from ..engine.lifecycle import LifecyclePlan, open_sandbox, resume_sandbox
from ..engine.session import Session
from ..sandboxes.registry import backend_class
from .journal import follow_hook_clock, journal_steps, journal_turn, record_hook_point
from .store.base import FINAL_STATUSES, TURN, SessionRow, Store

logger = logging.getLogger("runner.serve.service")

#: How many sessions a server takes over at one look (PostgreSQL), so that
#: the servers looking at the same time share a dead server's sessions.
TAKEOVER_BATCH = 8
#: How many open sessions (not closed or failed) a server holds by default
#: (``--max-sessions``): the bench runs 100 concurrent sessions without a
#: failure, and each open session holds a workspace or container with its
#: exec channel, so the default stays far from the usual 1024 descriptors.
DEFAULT_MAX_SESSIONS = 100
#: How long a restarted server keeps trying to re-attach a sandbox whose
#: backend does not answer (the Docker engine restarting, a cloud API outage),
#: by default, before it fails the session.
DEFAULT_REATTACH_TIMEOUT = 60.0
#: The longest pause between two of those tries.
REATTACH_MAX_DELAY = 8.0
#: What a ``503`` beyond ``--max-sessions`` tells the client to wait (seconds).
RETRY_AFTER_SECONDS = 5

#: What the store holds in place of a secret input's value.
SECRET_REFERENCE = {"$secret": "held in the server's memory only; never stored"}


class ApiError(Exception):
    """An error the API answers with ``{"error": code, "message": ...}``."""

    def __init__(
        self, status: int, code: str, message: str, *, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = list(headers)


@dataclass
class AgentFile:
    """An agent the server serves: its name and the YAML file it is compiled
    from, or (``--agent NAME=MODULE:ATTR``) the Python ``runner.Agent`` itself."""

    name: str
    path: Path | None
    backend: str
    #: A Python agent: the ``runner.Agent`` object every session of it shares.
    python: Any = None
    #: A Python agent's ``MODULE:ATTR``.
    reference: str = ""

    def describe(self) -> str:
        return f"{self.reference} (--agent)" if self.python is not None else str(self.path)


class PythonCompiled:
    """What ``compile_file`` gives for a YAML agent, for a Python one: the agent
    and its inputs by ``input_id`` (those the ``Agent`` declares with
    ``inputs=`` and those its hooks' ``Depends`` ask for)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.inputs = {
            dependency.input_id: dependency
            for dependency in [*agent.declared_inputs, *agent.plan.dependencies]
        }


@dataclass
class Live:
    """A session this process is running: its compile, its inputs, its ``Session``."""

    compiled: Any
    inputs: dict[str, SessionInput]
    session: Session | None = None
    #: The name the agent is served under (a Python agent's may differ from ``Agent.name``).
    agent_name: str = ""
    #: The sandbox once it exists (its Python hooks get a journaling wrapper of it).
    sandbox: Any = None
    #: One turn at a time (``Session`` has its own lock; this one also covers the status).
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class Sessions:
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
        #: Per Docker agent with ``pool:``, the environment whose warm pool its
        #: sessions share (each session compiles the agent again).
        self._pools: dict[str, Any] = {}
        #: One Docker Engine client per engine address, shared by every session.
        #: A Python agent is built once, by its module: its sessions share it.
        self._python: dict[str, PythonCompiled] = {}
        for agent in self.agents.values():
            if agent.python is not None:
                journal_steps(agent.python.plan, self.store)  # steps of runner.load()ed hooks
                self._make_durable(agent, agent.python.environment)
                self._python[agent.name] = PythonCompiled(agent.python)

    # --- helpers ------------------------------------------------------------

    def _compile(self, agent: AgentFile, session_id: str) -> Any:
        """Compile the agent's file for one session: its save: steps write under
        OUTPUT_DIR/<session id>/, and its steps are journaled.  A Python agent
        is not compiled: every session gets the one object (prepared once)."""
        from ..config import compile_file

        if agent.python is not None:
            return self._python[agent.name]
        assert agent.path is not None
        compiled = compile_file(agent.path, output_dir=self.output_dir / session_id)
        journal_steps(compiled.agent.plan, self.store)
        self._make_durable(agent, compiled.agent.environment)
        return compiled

    def _make_durable(self, agent: AgentFile, environment: Any) -> None:
        """The environment's sandboxes belong to this store, not to the process
        (a restarted server re-attaches them); its pool is the agent's."""
        environment.make_durable(self.store.id)
        if agent.python is not None:  # one environment for every session: its own pool
            if environment.pool_size:
                self._pools[agent.name] = environment
            return
        if environment.pool_size:
            source = self._pools.get(agent.name)
            if source is None:
                from ..config import compile_file

                assert agent.path is not None
                source = compile_file(agent.path, output_dir=self.output_dir).agent.environment
                source.make_durable(self.store.id)
                self._pools[agent.name] = source
            environment.share_pool(source)

    def close_pools(self) -> None:
        """Remove the warm pools' idle containers (at a clean stop)."""
        for environment in self._pools.values():
            environment.close_pool()

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
            self.store.add_event(session_id, event)
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
        self, session_id: str, live: Live, work: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Run ``work`` in a task of the server (it outlives the request), with
        the session's events recorded and its secrets scrubbed; return its result."""
        done = anyio.Event()
        outcome: list[Any] = []

        async def task() -> None:
            self._work_started()
            with listen(self._recorder(session_id, live)):
                add_secrets(secret_strings(live.inputs.values()))
                try:
                    outcome.append(("ok", await work()))
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

    async def drain(self, timeout: float) -> bool:
        """Stop taking sessions and messages (503), and wait up to ``timeout``
        seconds for the running starts, turns and closes; True if none is left.
        (SIGTERM: what a rolling restart sends.)"""
        self.draining = True
        with anyio.move_on_after(timeout):
            await self._idle.wait()
        return self.busy == 0

    def _refuse_while_draining(self) -> None:
        if self.draining:
            raise ApiError(
                503,
                "stopping",
                "this server is stopping; retry (another server, or this one once it "
                "is back, takes the session)",
                headers=[("retry-after", str(RETRY_AFTER_SECONDS))],
            )

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
        if name is None and len(self.agents) == 1:
            name = next(iter(self.agents))
        if not isinstance(name, str) or name not in self.agents:
            served = ", ".join(sorted(self.agents))
            raise ApiError(400, "unknown_agent", f"unknown agent {name!r} (served: {served})")
        raw = body.get("inputs") or {}
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
        resolved = _resolve(compiled, raw)
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
        # No await between this count and the insert: two requests cannot both
        # take the last place.  A replayed idempotency key (above) creates
        # nothing, so it is answered even at the limit.
        if self.store.count_open() >= self.max_sessions:
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
        self.store.claim(session_id)
        row = self.store.create_session(
            session_id=session_id,
            agent=agent.name,
            inputs=stored,
            idempotency_key=key,
            fingerprint=fingerprint,
            file_hash=_agent_hash(agent),
            backend=agent.backend,
            owner=self.owner,
        )
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

    async def _start(self, session_id: str, live: Live) -> None:
        agent = live.compiled.agent

        def remember_sandbox(sandbox: Any) -> None:
            live.sandbox = sandbox
            self._set(session_id, sandbox=_sandbox_record(sandbox))

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
        try:
            await self._in_session(session_id, live, work)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self._fail(session_id, "the server stopped while the session was starting")
            raise
        except Exception as exc:
            self._fail(session_id, _start_error(exc, live))
        else:
            self._set(session_id, status="waiting")

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
            self._set(session_id, status="running")
            return await self._turn(session_id, live, text)

    async def _turn(self, session_id: str, live: Live, text: str) -> dict[str, Any]:
        """Run one turn (the session is ``running``), journaled: its message is
        recorded first, then each model reply and tool call; a restart goes on
        from there (``_resume``).  The end stores the conversation and the
        result and drops the turn's journal, in one transaction."""
        session = live.session
        assert session is not None

        async def work() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            from ..models.protocol import Completed

            # Here, in the session's context, where scrubbed() knows its secrets.
            self.store.finish_step(session_id, TURN, "turn:message", 0, {"text": scrubbed(text)})
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
            # Kept for a resumed session, scrubbed (here, in the session's
            # context) like every event: after a restart the model sees ***
            # where a secret was.
            return turn, scrubbed(session.conversation)

        turn, conversation = await self._in_session(session_id, live, work)
        if self.row(session_id).status == "running":
            self.store.end_turn(session_id, conversation=conversation, result={"turn": turn})
            self._notify(session_id)
        return turn

    async def close(self, session_id: str, *, reason: str = "deleted") -> SessionRow:
        row = self.row(session_id)
        if row.status in FINAL_STATUSES:
            return row
        self._elsewhere(row, "close it")
        self._refuse_while_draining()
        live = self.live.get(session_id)
        if live is None or live.session is None:
            raise ApiError(409, "conflict", f"session {session_id} is {row.status}; try again")
        self._set(session_id, status="closing")
        session = live.session
        await self._in_session(session_id, live, lambda: session.close(reason=reason))
        self._finish_close(session_id, session)
        return self.row(session_id)

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

    def _finish_close(self, session_id: str, session: Session) -> None:
        self.live.pop(session_id, None)
        failures = [str(f) for f in session.destroy_failures]
        self._set(
            session_id,
            status="failed" if failures else "closed",
            error="; ".join(failures) or None,
        )
        self._release(session_id)

    # --- resume -------------------------------------------------------------

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

        On PostgreSQL, up to ``--max-sessions`` held at once and
        ``TAKEOVER_BATCH`` a look, so that servers looking at the same time
        share a dead server's sessions; a draining server takes none."""
        taken: list[SessionRow] = []
        if self.draining:
            return taken
        room = (
            None
            if self.store.exclusive
            else min(TAKEOVER_BATCH, self.max_sessions - len(self._mine))
        )
        for session_id, agent in self.store.open_ids():
            if room is not None and len(taken) >= room:
                break
            if session_id in self._mine:
                continue
            if not self.store.exclusive and agent not in self.agents:
                continue  # left for a server that serves its agent
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
        if _agent_hash(agent) != row.file_hash:
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
            inputs = _resolve(compiled, row.inputs)
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


def _agent_hash(agent: AgentFile) -> str:
    """What the journal's positions depend on, stored with each session and
    compared at resume: a YAML agent's file (sha256 of its bytes); a Python
    agent's reference and hook list (each position's name and class, and a
    YAML hook's number of steps per point).  The code inside a Python hook is
    not part of it: a hook point runs whole or not at all, whatever its code."""
    if agent.python is None:
        assert agent.path is not None
        return hashlib.sha256(agent.path.read_bytes()).hexdigest()
    from ..config.steps import StepsHook

    shape = []
    for hook_plan in agent.python.plan.hooks:
        hook = hook_plan.hook
        kind = type(hook)
        entry = [hook_plan.name, f"{kind.__module__}.{kind.__qualname__}"]
        if isinstance(hook, StepsHook):
            entry += [len(hook.create_steps), len(hook.destroy_steps)]
        shape.append(entry)
    text = json.dumps({"python": agent.reference, "hooks": shape})
    return "python:" + hashlib.sha256(text.encode()).hexdigest()


def _resolve(compiled: Any, raw: Mapping[str, Any]) -> dict[str, SessionInput]:
    """Validate inputs exactly as ``runner run`` does (same errors, same messages)."""
    from ..engine.dependencies import resolve_inputs

    agent = compiled.agent
    try:
        return resolve_inputs(raw, [*agent.declared_inputs, *agent.plan.dependencies])
    except SessionInputError as exc:
        raise ApiError(400, "bad_input", str(exc)) from None


def _hide_secrets(text: str, live: Live) -> str:
    """``text`` without the session's secrets (outside the session's own
    context, where events are scrubbed by themselves)."""
    return scrub(text, secret_strings(live.inputs.values()))


def _start_error(exc: BaseException, live: Live) -> str:
    """Why a session failed to start.  As the seeds say of a deployed agent, a
    hook's failure names only the hook and the exception type; its full
    (scrubbed) message is in the session's ``hook_failed``/``step_failed`` events."""
    hook = getattr(exc, "runner_hook", None)
    if hook:
        return f"hook {hook[0]}.{hook[1]} failed: {type(exc).__name__}"
    return f"the session failed to start: {type(exc).__name__}: {_hide_secrets(str(exc), live)}"


def _sandbox_record(sandbox: Any) -> dict[str, Any]:
    """Where a sandbox is, so a restarted server can find it again."""
    return {"created_at": time.time(), **sandbox.record()}


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
