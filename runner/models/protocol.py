"""The ``Model`` protocol: what an agent needs from a language model.

Anything with an async ``complete(messages, tools)`` method is a model; the
HTTP clients and the scripted model of the tests are just implementations.
Messages and tool specifications use the chat-completions shapes (plain
dicts) that both the Mistral and the OpenAI-compatible APIs speak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A model's request to run one tool; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelReply:
    """One assistant message: text, tool calls, or both.

    ``finish_reason`` is the server's (``stop``, ``tool_calls``, ``length``,
    ``content_filter``, ...; None if it sent none) and ``refusal`` an
    OpenAI-style refusal message: a turn needs both to tell a complete answer
    from a cut-off, filtered or refused one.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    finish_reason: str | None = None
    refusal: str | None = None


@runtime_checkable
class Model(Protocol):
    """A chat model that may call tools."""

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelReply: ...


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call the agent executed during a turn, and what it returned."""

    name: str
    arguments: dict[str, Any]
    output: str
    is_error: bool = False


@dataclass(frozen=True)
class Completed:
    """A turn that ended with the model's final answer."""

    text: str
    tool_calls: tuple[ToolCallRecord, ...] = ()


@dataclass(frozen=True)
class Failed:
    """A turn that could not finish: a model error, a limit, or a reply that is
    not a complete answer (cut off, filtered, refused or empty).

    ``partial_text`` keeps what a cut-off or filtered reply did say.  A failed
    turn leaves no trace in the session's conversation (the sandbox keeps what
    its tools changed), so the next turn starts from the last good one.
    """

    error: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    partial_text: str = ""


TurnResult = Completed | Failed
