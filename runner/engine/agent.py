"""``Agent``: a model, instructions and an environment, and how sessions start.

Building an agent reads its hooks' signatures (``plan_hooks``), so a wrong
``Depends`` is an ``SdkError`` at construction.  Starting a session follows
the lifecycle order: backend available, inputs validated, then (and only
then) the sandbox is created and ``on_create`` runs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from ..models.protocol import Model, TurnResult
    from ..models.tools import Tool

from ..core.errors import SdkError, SessionIdempotencyConflictError, SessionTerminatedError
from ..core.events import add_secrets, emit
from ..sandboxes.base import SandboxEnvironment
from ..sandboxes.none import NoSandbox
from .dependencies import Dependency, check_unique_input_ids, resolve_inputs
from .hook_points import plan_hooks
from .inputs import SessionInput, secret_strings
from .lifecycle import open_sandbox
from .runtime import current_runtime
from .session import Session
from .tools import agent_tools, tool_dependencies


class Agent:
    """An agent: ``model`` (a name or a ``Model`` object) working in ``environment``.

    ``inputs`` declares session inputs the agent requires even if no hook
    asks for them (the YAML compiler uses it); they are validated with the
    hooks' own inputs, before any sandbox exists.

    ``tools`` are the tools the model may call besides the built-ins
    (``@runner.tool`` functions, YAML ``agent.tools``); ``builtin_tools``
    names the built-ins it keeps (None: ``bash``, ``read_file`` and
    ``write_file``; ``[]``: none).  A call of any other tool runs nothing.
    """

    def __init__(
        self,
        *,
        model: str | Model,
        name: str = "default_agent",
        instructions: str | None = None,
        environment: SandboxEnvironment | None = None,
        base_url: str | None = None,
        max_tool_calls: int = 50,
        inputs: Sequence[type[SessionInput]] = (),
        request_timeout_seconds: float = 120.0,
        max_retries: int = 3,
        keep_background_processes: bool = False,
        tools: Sequence[Tool] = (),
        builtin_tools: Sequence[str] | None = None,
    ) -> None:
        # Duck-typed (not isinstance(..., Model)), so building an agent does
        # not import the turn machinery: `runner validate` stays quick.
        if not isinstance(model, str) and not callable(getattr(model, "complete", None)):
            raise SdkError(
                f"Agent(model=...) takes a model name or an object with an async "
                f"complete(messages, tools) method, got {model!r}"
            )
        if environment is None:
            environment = NoSandbox()
        if not isinstance(environment, SandboxEnvironment):
            raise SdkError(
                f"Agent(environment=...) takes a sandbox such as DangerousLocalSandbox(), "
                f"got {environment!r}"
            )
        self.model = model
        self.name = name
        self.instructions = instructions
        self.environment = environment
        self.base_url = base_url
        self.max_tool_calls = max_tool_calls
        if isinstance(request_timeout_seconds, bool) or not (
            isinstance(request_timeout_seconds, int | float) and request_timeout_seconds > 0
        ):
            raise SdkError(
                f"Agent(request_timeout_seconds=...) takes a positive number of seconds, "
                f"got {request_timeout_seconds!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise SdkError(f"Agent(max_retries=...) takes an int >= 0, got {max_retries!r}")
        #: Each model request's deadline, and how often a failed one is retried
        #: (only timeouts, dropped connections and answers that say "try again":
        #: see runner/models/chat_completions.py; a permanent server error is not).
        self.request_timeout_seconds = request_timeout_seconds
        self.max_retries = max_retries
        if not isinstance(keep_background_processes, bool):
            raise SdkError(
                "Agent(keep_background_processes=...) takes a bool, "
                f"got {keep_background_processes!r}"
            )
        #: Whether processes the agent's tools start in the background outlive
        #: the turn (a dev server for the next turn, say).  By default (False)
        #: whatever a turn left running in the sandbox is killed when the turn
        #: ends; hooks' processes started before it are kept.  Either way every
        #: process of the sandbox's commands is killed before ``on_destroy``.
        self.keep_background_processes = keep_background_processes
        for input_class in inputs:
            if not (isinstance(input_class, type) and issubclass(input_class, SessionInput)):
                raise SdkError(f"Agent(inputs=...) takes SessionInput classes, got {input_class!r}")
        self.declared_inputs = tuple(
            Dependency(f"agent {name}", "", input_class) for input_class in inputs
        )
        #: The tools the model is offered, built-ins first (``engine/tools.py``).
        self.tools = agent_tools(tools, builtin_tools, agent=name)
        self.tool_dependencies = tuple(tool_dependencies(self.tools))
        self.plan = plan_hooks(environment)
        check_unique_input_ids(
            [*self.declared_inputs, *self.tool_dependencies, *self.plan.dependencies]
        )
        self._by_key: dict[str, tuple[Session, str]] = {}
        self._key_locks: dict[str, anyio.Lock] = {}

    def resolve_model(self) -> Model:
        """The ``Model`` turns use: the object given, or an HTTP client for a name.

        Raises ``MissingCredentialsError`` for a Mistral model without
        ``MISTRAL_API_KEY``; ``Agent.run`` calls this before creating anything.
        """
        if isinstance(self.model, str):
            from ..models.chat_completions import model_for

            return model_for(
                self.model,
                base_url=self.base_url,
                timeout_seconds=self.request_timeout_seconds,
                max_retries=self.max_retries,
            )
        return self.model

    async def start_session(
        self,
        *,
        session_inputs: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """Validate inputs, create the sandbox, run every ``on_create``; return the session.

        With ``idempotency_key``, an open session started with the same key
        and the same inputs is returned instead of a new one.
        """
        self.environment.check_available()
        inputs = resolve_inputs(
            session_inputs,
            [*self.declared_inputs, *self.tool_dependencies, *self.plan.dependencies],
        )
        add_secrets(secret_strings(inputs.values()))
        if idempotency_key is None:
            return await self._open(inputs)
        # One lock per key: two concurrent calls with one key get one session.
        lock = self._key_locks.setdefault(idempotency_key, anyio.Lock())
        async with lock:
            fingerprint = _fingerprint(inputs)
            existing = self._by_key.get(idempotency_key)
            if existing is not None:
                session, known = existing
                if known != fingerprint:
                    raise SessionIdempotencyConflictError(
                        f"idempotency key {idempotency_key!r} belongs to session {session.id}, "
                        "which was started with other session inputs"
                    )
                if session.status == "terminated":
                    raise SessionTerminatedError(
                        f"idempotency key {idempotency_key!r}: session {session.id} is closed"
                    )
                return session
            session = await self._open(inputs)
            self._by_key[idempotency_key] = (session, fingerprint)
            return session

    async def _open(self, inputs: Mapping[str, SessionInput]) -> Session:
        """Create the sandbox, run ``on_create``, and register the session."""
        session_id = f"sess_{os.urandom(16).hex()}"
        ttl = self.environment.ttl_seconds
        emit("session_starting", session_id=session_id, agent=self.name)
        sandbox = await open_sandbox(
            self.environment,
            self.plan,
            inputs,
            session_id=session_id,
            expires_at=time.time() + ttl if ttl else None,
        )
        session = Session(
            agent=self,
            session_id=session_id,
            sandbox=sandbox,
            plan=self.plan,
            inputs=inputs,
            ttl_seconds=ttl,
        )
        runtime = current_runtime()
        if runtime is not None:
            runtime.adopt(session)
        emit("session_started", session_id=session_id, agent=self.name)
        return session

    async def run(
        self,
        message: str,
        *,
        session_inputs: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Run one turn.  Without a key the session is closed after the turn;
        with one it stays open and the next call with that key continues it."""
        self.resolve_model()  # a model that cannot run fails before any sandbox exists
        session = await self.start_session(
            session_inputs=session_inputs, idempotency_key=idempotency_key
        )
        if idempotency_key is not None:
            return await session.run(message)
        async with session:
            return await session.run(message)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model!r}, environment={self.environment!r})"


def _fingerprint(inputs: Mapping[str, SessionInput]) -> str:
    return json.dumps({k: v.to_dict() for k, v in sorted(inputs.items())}, sort_keys=True)
