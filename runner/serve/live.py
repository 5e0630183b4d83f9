"""What a server knows of an agent it serves and of a session it runs.

``AgentFile`` (a YAML file or a Python ``runner.Agent``), ``Live`` (a
session this process runs: its compile, inputs and ``Session``), the
``ApiError`` every layer of serve raises, and the two facts a resume
checks: the agent's hash (the journal's positions depend on it) and the
inputs, validated as ``runner run`` validates them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..core.errors import SessionInputError
from ..engine.inputs import SessionInput
from ..engine.session import Session

#: What the store holds for a secret input (its value is in memory only).
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
    #: While the session starts (its sandbox and ``on_create``): the scope a
    #: ``DELETE`` cancels, and the event set once the start has ended either way.
    start_scope: anyio.CancelScope | None = None
    start_ended: anyio.Event = field(default_factory=anyio.Event)


def agent_hash(agent: AgentFile) -> str:
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


def resolve_inputs_of(compiled: Any, raw: Mapping[str, Any]) -> dict[str, SessionInput]:
    """Validate inputs exactly as ``runner run`` does (same errors, same messages)."""
    from ..engine.dependencies import resolve_inputs

    agent = compiled.agent
    try:
        return resolve_inputs(raw, [*agent.declared_inputs, *agent.plan.dependencies])
    except SessionInputError as exc:
        raise ApiError(400, "bad_input", str(exc)) from None
