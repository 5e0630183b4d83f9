"""One agent turn: call the model, run the tools it asks for, repeat.

The tools are the agent's (``tools.py``: the built-ins act on the session's
sandbox through the same methods hooks use; declared tools come from
``runner.tool`` functions and YAML ``agent.tools``).  A session without a
sandbox offers only tools that need none.  Each call's arguments are checked
against its tool's schema before it runs, and a call of a tool not offered
runs nothing: both get an error the model reads, and the turn goes on.
Model failures become a ``Failed`` result: a turn never raises for them.

The conversation is re-sent on every call, so it must stay one the strictest
server accepts (Mistral validates every message): no assistant message without
text or tool calls, tool-call ids of nine letters and digits used once,
arguments that are a JSON object, tool names of ``[A-Za-z0-9_-]``, and no
half-finished turn: a ``Failed`` turn removes what it added.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.events import emit
from ..sandboxes.base import Sandbox
from .protocol import (
    Completed,
    Failed,
    Message,
    Model,
    ModelReply,
    ToolCall,
    ToolCallRecord,
    TurnResult,
)
from .tools import (
    BUILTIN_TOOLS,
    READ_FILE_LIMIT,
    TOOL_OUTPUT_LIMIT,
    Tool,
    ToolContext,
    argument_problem,
    cap_output,
)

__all__ = ["READ_FILE_LIMIT", "TOOL_OUTPUT_LIMIT", "cap_output", "run_tool", "run_turn"]

DEFAULT_MAX_TOOL_CALLS = 50  # Agent(max_tool_calls=...) has the same default

#: The built-ins' specifications, in the order the model sees them.
TOOL_SPECS: list[dict[str, Any]] = [tool.spec() for tool in BUILTIN_TOOLS.values()]
#: Tool calls are reported under these names (the model sees the short ones).
REPORTED_NAMES = {name: tool.reported_name for name, tool in BUILTIN_TOOLS.items()}

#: Mistral's rule for tool-call ids; an id of this shape suits every server.
VALID_CALL_ID = re.compile(r"[A-Za-z0-9]{9}")
#: Function names the chat APIs accept; an invented one is stored as ``UNKNOWN_TOOL``.
VALID_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
UNKNOWN_TOOL = "unknown_tool"
#: finish_reason values that mean the reply stopped before the model was done.
CUT_OFF_REASONS = frozenset({"length", "model_length"})


@dataclass(frozen=True)
class PreparedCall:
    """A tool call as it goes back into the conversation, and what to run.

    ``sent`` carries a valid unique id, a valid name and arguments that are a
    JSON object; ``arguments`` is None when the model's were malformed.
    """

    sent: ToolCall
    requested_name: str
    arguments: dict[str, Any] | None
    problem: str = ""


def fresh_call_id(used: set[str]) -> str:
    alphabet = string.ascii_letters + string.digits
    while True:
        candidate = "".join(secrets.choice(alphabet) for _ in range(9))
        if candidate not in used:
            return candidate


def prepare_call(call: ToolCall, used: set[str]) -> PreparedCall:
    """Make ``call`` safe to send back; ``used`` (ids already in the conversation) grows."""
    call_id = call.id if VALID_CALL_ID.fullmatch(call.id) and call.id not in used else ""
    call_id = call_id or fresh_call_id(used)
    used.add(call_id)
    name = call.name if VALID_TOOL_NAME.fullmatch(call.name) else UNKNOWN_TOOL
    try:
        arguments = json.loads(call.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError(f"expected a JSON object, got {type(arguments).__name__}")
    except ValueError as exc:  # JSONDecodeError is one
        # The model's text is not echoed back: some servers fail every later
        # request on it.  The tool result says what was wrong instead.
        return PreparedCall(
            ToolCall(call_id, name, "{}"),
            call.name,
            None,
            f"error: malformed arguments ({exc}); the call was not run. "
            "Send the arguments as one JSON object.",
        )
    return PreparedCall(ToolCall(call_id, name, json.dumps(arguments)), call.name, arguments)


def not_an_answer(reply: ModelReply) -> str:
    """Why a reply without tool calls is no complete answer ('' if it is one)."""
    if reply.refusal:
        return f"the model refused: {reply.refusal}"
    reason = reply.finish_reason
    if reason == "content_filter":
        return "the provider's content filter withheld the reply (finish_reason content_filter)"
    if reason in CUT_OFF_REASONS:
        before = "" if reply.text.strip() else " before any text"
        return f"the reply was cut off at the model's token limit{before} (finish_reason {reason})"
    if reason == "error":
        return "the model server failed while writing the reply (finish_reason error)"
    if not reply.text.strip():
        return f"the model sent an empty reply (finish_reason {reason or 'none'})"
    return ""


async def run_tool(
    sandbox: Sandbox | None,
    call: PreparedCall,
    tools: Mapping[str, Tool] | None = None,
    *,
    session_id: str = "",
    inputs: Mapping[str, Any] | None = None,
) -> ToolCallRecord:
    """Run one prepared call with the tool of its name among ``tools`` (None:
    the built-ins).  A tool not among them, or arguments its schema refuses,
    get an error the model can read, and nothing runs."""
    offered = BUILTIN_TOOLS if tools is None else tools
    tool = offered.get(call.requested_name)
    name = tool.reported_name if tool is not None else call.requested_name
    arguments = call.arguments
    if arguments is None:
        return ToolCallRecord(name, {}, call.problem, True)
    if tool is None:
        known = ", ".join(offered) or "none"
        return ToolCallRecord(
            name, arguments, f"error: unknown tool {call.requested_name!r} (tools: {known})", True
        )
    problem = argument_problem(tool, arguments)
    if problem:
        return ToolCallRecord(
            name,
            arguments,
            f"error: invalid arguments for {tool.name}: {problem}; the call was not run",
            True,
        )
    emit("tool_called", session_id=session_id, tool=name, call_id=call.sent.id)
    started = time.perf_counter()
    try:
        output = await tool.run(ToolContext(sandbox, session_id, inputs or {}), arguments)
        record = ToolCallRecord(name, arguments, output.text, output.is_error)
    except KeyError as exc:
        record = ToolCallRecord(name, arguments, f"error: missing argument {exc}", True)
    except (OSError, ValueError, TypeError) as exc:
        record = ToolCallRecord(name, arguments, f"error: {type(exc).__name__}: {exc}", True)
    emit(
        "tool_finished",
        session_id=session_id,
        tool=name,
        call_id=call.sent.id,
        is_error=record.is_error,
        duration_seconds=time.perf_counter() - started,
    )
    return record


def assistant_message(text: str, calls: Sequence[PreparedCall]) -> Message:
    message: Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.sent.id,
                "type": "function",
                "function": {"name": c.sent.name, "arguments": c.sent.arguments},
            }
            for c in calls
        ]
    return message


def used_call_ids(conversation: Sequence[Message]) -> set[str]:
    return {
        str(call.get("id"))
        for message in conversation
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }


async def run_turn(
    model: Model,
    conversation: list[Message],
    sandbox: Sandbox | None,
    *,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    tools: Sequence[Tool] | None = None,
    session_id: str = "",
    inputs: Mapping[str, Any] | None = None,
) -> TurnResult:
    """Advance ``conversation`` (mutated in place) by one user turn.

    ``tools`` are the agent's (None: the three built-ins); those that need a
    sandbox are offered only with one.  ``inputs`` (the session's, by
    ``input_id``) reach the tools' ``Depends()`` parameters.  A ``Failed``
    turn removes the messages it added, so a strict server still accepts the
    conversation on the next turn.
    """
    offered = list(BUILTIN_TOOLS.values()) if tools is None else list(tools)
    if sandbox is None:
        offered = [tool for tool in offered if not tool.needs_sandbox]
    toolbox = _Toolbox({tool.name: tool for tool in offered}, session_id, inputs or {})
    start = len(conversation)
    result = await _advance(model, conversation, sandbox, max_tool_calls, toolbox)
    if isinstance(result, Failed):
        del conversation[start:]
    return result


@dataclass(frozen=True)
class _Toolbox:
    tools: Mapping[str, Tool]
    session_id: str
    inputs: Mapping[str, Any]


async def _advance(
    model: Model,
    conversation: list[Message],
    sandbox: Sandbox | None,
    max_tool_calls: int,
    toolbox: _Toolbox,
) -> TurnResult:
    specs = [tool.spec() for tool in toolbox.tools.values()]
    records: list[ToolCallRecord] = []
    used = used_call_ids(conversation)
    while True:
        try:
            reply = await model.complete(conversation, specs)
        except Exception as exc:
            return Failed(f"model error: {type(exc).__name__}: {exc}", tuple(records))
        if not reply.tool_calls:
            problem = not_an_answer(reply)
            if problem:
                return Failed(problem, tuple(records), partial_text=reply.text)
            conversation.append(assistant_message(reply.text, ()))
            return Completed(reply.text, tuple(records))
        if not toolbox.tools and sandbox is None:
            return Failed("the model called a tool, but this agent has no sandbox", tuple(records))
        calls = [prepare_call(call, used) for call in reply.tool_calls]
        conversation.append(assistant_message(reply.text, calls))
        for call in calls:
            if len(records) >= max_tool_calls:
                return Failed(f"tool call limit of {max_tool_calls} reached", tuple(records))
            record = await run_tool(
                sandbox,
                call,
                toolbox.tools,
                session_id=toolbox.session_id,
                inputs=toolbox.inputs,
            )
            records.append(record)
            conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": call.sent.id,
                    "name": call.sent.name,
                    "content": record.output,
                }
            )
