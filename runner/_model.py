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
    """One assistant message: text, tool calls, or both."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)


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
    """A turn that could not finish (model error, tool error, or a limit)."""

    error: str
    tool_calls: tuple[ToolCallRecord, ...] = ()


TurnResult = Completed | Failed
