"""Test doubles that ship with the library, like ``httpx.MockTransport``.

``RecordingSandbox`` is an in-memory sandbox: it records every call hooks make
and answers commands from a script you give it, so you can unit-test hooks
(Python or YAML) with no Docker and no subprocess.  It runs through the real
lifecycle; only the sandbox is fake.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .models.protocol import ModelReply
from .sandboxes.base import (
    Sandbox,
    SandboxEnvironment,
    SandboxExecutionResult,
    check_env,
    check_timeout,
)

if TYPE_CHECKING:
    from .core.hooks import SandboxHook

Responder = Callable[[str], SandboxExecutionResult | None]


@dataclass(frozen=True)
class Call:
    """One recorded sandbox call: ``kind`` is execute, read_file, write_file or delete."""

    kind: str
    session_id: str
    argument: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)


class RecordingSandbox(SandboxEnvironment):
    """An environment whose sandboxes live in memory and log every call to ``calls``.

    ``respond(command)`` may return a result for a command (or None for the
    default: exit 0, no output); ``files`` seeds every new sandbox.
    """

    backend = "recording"

    def __init__(
        self,
        *,
        hooks: Sequence[SandboxHook] = (),
        default_exec_timeout_seconds: float = 30,
        ttl_seconds: float | None = None,
        respond: Responder | None = None,
        files: Mapping[str, bytes] | None = None,
        fail_create: BaseException | None = None,
    ) -> None:
        super().__init__(
            hooks=hooks,
            default_exec_timeout_seconds=default_exec_timeout_seconds,
            ttl_seconds=ttl_seconds,
        )
        self.respond = respond
        self.files = dict(files or {})
        self.fail_create = fail_create
        self.calls: list[Call] = []
        self.sandboxes: list[InMemorySandbox] = []

    @property
    def commands(self) -> list[str]:
        """Every command executed, in order, across sessions."""
        return [c.argument for c in self.calls if c.kind == "execute"]

    async def create(self, *, session_id: str, expires_at: float | None) -> InMemorySandbox:
        self.calls.append(Call("create", session_id))
        if self.fail_create is not None:
            raise self.fail_create
        sandbox = InMemorySandbox(self, session_id)
        self.sandboxes.append(sandbox)
        return sandbox


class InMemorySandbox(Sandbox):
    """A live sandbox of a ``RecordingSandbox``: files in a dict, commands scripted."""

    workspace = "/workspace"

    def __init__(self, environment: RecordingSandbox, session_id: str) -> None:
        self.environment = environment
        self.session_id = session_id
        self.default_exec_timeout_seconds = environment.default_exec_timeout_seconds
        self.files = {self._path(k): v for k, v in environment.files.items()}
        self.deleted = False

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workspace, path))

    def _record(self, kind: str, argument: str = "", **options: Any) -> None:
        if self.deleted:
            raise RuntimeError(f"{kind} on a deleted sandbox ({self.session_id})")
        self.environment.calls.append(Call(kind, self.session_id, argument, options))

    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        timeout = check_timeout(timeout_seconds, name="timeout_seconds")
        self._record(
            "execute",
            command,
            timeout_seconds=timeout or self.default_exec_timeout_seconds,
            env=check_env(env),
            cwd=cwd,
        )
        result = self.environment.respond(command) if self.environment.respond else None
        return result or SandboxExecutionResult(exit_code=0, stdout="", stderr="")

    async def read_file(self, path: str) -> bytes:
        self._record("read_file", path)
        try:
            return self.files[self._path(path)]
        except KeyError:
            raise FileNotFoundError(2, "No such file in the sandbox", path) from None

    async def write_file(self, path: str, data: bytes | str) -> None:
        self._record("write_file", path)
        self.files[self._path(path)] = data.encode("utf-8") if isinstance(data, str) else data

    async def delete(self) -> None:
        if not self.deleted:
            self._record("delete")
            self.deleted = True


class ScriptedModel:
    """A ``Model`` that replays the replies it was given, and records each request.

    ``replies`` items are ``ModelReply`` objects or exceptions to raise; when
    they run out, ``complete`` raises ``RuntimeError``.
    """

    def __init__(self, replies: Sequence[ModelReply | BaseException]) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    async def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> ModelReply:
        self.requests.append(([dict(m) for m in messages], list(tools)))
        if not self.replies:
            raise RuntimeError("ScriptedModel has no reply left")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply
