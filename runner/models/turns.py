"""One agent turn: call the model, run the tools it asks for, repeat.

Tools act on the session's sandbox through the same methods hooks use
(``execute``, ``read_file``, ``write_file``); a session without a sandbox
offers no tools.  Model and tool failures become a ``Failed`` result: a turn
never raises for them.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.events import decode_output
from ..sandboxes.base import FileTooLargeError, Sandbox
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

DEFAULT_MAX_TOOL_CALLS = 50  # Agent(max_tool_calls=...) has the same default

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the sandbox workspace.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the sandbox (paths are relative to the workspace).",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or replace a file in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
]


#: Tool output fed back to the model is capped at this many characters.
TOOL_OUTPUT_LIMIT = 16_000
#: Tool calls are reported under these names (the model sees the short ones).
REPORTED_NAMES = {name: f"file_system.{name}" for name in ("bash", "read_file", "write_file")}


def cap_output(text: str, limit: int = TOOL_OUTPUT_LIMIT) -> str:
    """Keep the head and the tail of a long output, and say how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} of {len(text)} characters omitted ...]\n{text[-half:]}"


def _bash_output(result: Any) -> str:
    status = f"exit code {result.exit_code}" + (" (timed out)" if result.timed_out else "")
    parts = [status]
    if result.stdout:
        parts.append(f"[stdout]\n{result.stdout}")
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr}")
    return "\n".join(parts)


#: ``read_file`` refuses bigger files: the model gets a hint to read parts.
#: No more than this and one byte leave the sandbox for one call.
READ_FILE_LIMIT = 1 << 20
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


async def run_tool(sandbox: Sandbox, call: PreparedCall) -> ToolCallRecord:
    name = REPORTED_NAMES.get(call.requested_name, call.requested_name)
    arguments = call.arguments
    if arguments is None:
        return ToolCallRecord(name, {}, call.problem, True)
    try:
        if call.requested_name == "bash":
            result = await sandbox.execute(str(arguments["command"]))
            return ToolCallRecord(
                name, arguments, cap_output(_bash_output(result)), result.exit_code != 0
            )
        if call.requested_name == "read_file":
            path = str(arguments["path"])
            try:
                # The limit holds inside the read (at most READ_FILE_LIMIT + 1
                # bytes leave the sandbox), never through a separate stat,
                # which resolves the path apart from the read (issue 26).
                data = await sandbox.read_file_limited(path, READ_FILE_LIMIT)
            except FileTooLargeError as exc:
                size = f"{exc.size} bytes" if exc.size is not None else f"over {exc.limit} bytes"
                return ToolCallRecord(
                    name,
                    arguments,
                    f"error: {path} is {size}; read parts of it with bash (head, tail, sed -n)",
                    True,
                )
            # Only what was kept (at most the limit) is decoded.
            return ToolCallRecord(name, arguments, cap_output(decode_output(data)))
        if call.requested_name == "write_file":
            content = str(arguments["content"])
            await sandbox.write_file(str(arguments["path"]), content)
            return ToolCallRecord(name, arguments, f"wrote {len(content.encode())} bytes")
    except KeyError as exc:
        return ToolCallRecord(name, arguments, f"error: missing argument {exc}", True)
    except (OSError, ValueError, TypeError) as exc:
        return ToolCallRecord(name, arguments, f"error: {type(exc).__name__}: {exc}", True)
    known = ", ".join(REPORTED_NAMES)
    return ToolCallRecord(
        name, arguments, f"error: unknown tool {call.requested_name!r} (tools: {known})", True
    )


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
) -> TurnResult:
    """Advance ``conversation`` (mutated in place) by one user turn.

    A ``Failed`` turn removes the messages it added, so a strict server still
    accepts the conversation on the next turn.
    """
    start = len(conversation)
    result = await _advance(model, conversation, sandbox, max_tool_calls)
    if isinstance(result, Failed):
        del conversation[start:]
    return result


async def _advance(
    model: Model, conversation: list[Message], sandbox: Sandbox | None, max_tool_calls: int
) -> TurnResult:
    tools = TOOL_SPECS if sandbox is not None else []
    records: list[ToolCallRecord] = []
    used = used_call_ids(conversation)
    while True:
        try:
            reply = await model.complete(conversation, tools)
        except Exception as exc:
            return Failed(f"model error: {type(exc).__name__}: {exc}", tuple(records))
        if not reply.tool_calls:
            problem = not_an_answer(reply)
            if problem:
                return Failed(problem, tuple(records), partial_text=reply.text)
            conversation.append(assistant_message(reply.text, ()))
            return Completed(reply.text, tuple(records))
        if sandbox is None:
            return Failed("the model called a tool, but this agent has no sandbox", tuple(records))
        calls = [prepare_call(call, used) for call in reply.tool_calls]
        conversation.append(assistant_message(reply.text, calls))
        for call in calls:
            if len(records) >= max_tool_calls:
                return Failed(f"tool call limit of {max_tool_calls} reached", tuple(records))
            record = await run_tool(sandbox, call)
            records.append(record)
            conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": call.sent.id,
                    "name": call.sent.name,
                    "content": record.output,
                }
            )
