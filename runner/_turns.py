"""One agent turn: call the model, run the tools it asks for, repeat.

Tools act on the session's sandbox through the same methods hooks use
(``execute``, ``read_file``, ``write_file``); a session without a sandbox
offers no tools.  Model and tool failures become a ``Failed`` result: a turn
never raises for them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from ._model import Completed, Failed, Message, Model, ToolCall, ToolCallRecord, TurnResult
from .sandboxes.base import Sandbox

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


async def _run_tool(sandbox: Sandbox, call: ToolCall) -> ToolCallRecord:
    name = REPORTED_NAMES.get(call.name, call.name)
    try:
        arguments = json.loads(call.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("tool arguments must be a JSON object")
    except ValueError as exc:
        return ToolCallRecord(name, {}, f"error: malformed arguments: {exc}", True)
    try:
        if call.name == "bash":
            result = await sandbox.execute(str(arguments["command"]))
            return ToolCallRecord(
                name, arguments, cap_output(_bash_output(result)), result.exit_code != 0
            )
        if call.name == "read_file":
            path = str(arguments["path"])
            size = await sandbox.execute(f"stat -L -c %s -- {shlex.quote(path)}")
            if size.exit_code == 0 and int(size.stdout.strip() or 0) > READ_FILE_LIMIT:
                return ToolCallRecord(
                    name,
                    arguments,
                    f"error: {path} is {size.stdout.strip()} bytes; read parts of it with bash "
                    "(head, tail, sed -n)",
                    True,
                )
            data = await sandbox.read_file(path)
            return ToolCallRecord(name, arguments, cap_output(data.decode("utf-8", "replace")))
        if call.name == "write_file":
            content = str(arguments["content"])
            await sandbox.write_file(str(arguments["path"]), content)
            return ToolCallRecord(name, arguments, f"wrote {len(content.encode())} bytes")
    except KeyError as exc:
        return ToolCallRecord(name, arguments, f"error: missing argument {exc}", True)
    except (OSError, ValueError, TypeError) as exc:
        return ToolCallRecord(name, arguments, f"error: {type(exc).__name__}: {exc}", True)
    known = ", ".join(REPORTED_NAMES)
    return ToolCallRecord(name, arguments, f"error: unknown tool {call.name!r} ({known})", True)


def _refuse_calls(conversation: list[Message], calls: Sequence[ToolCall], why: str) -> None:
    for call in calls:
        conversation.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": f"error: {why}"}
        )


#: ``read_file`` refuses bigger files: the model gets a hint to read parts.
READ_FILE_LIMIT = 1 << 20


async def run_turn(
    model: Model,
    conversation: list[Message],
    sandbox: Sandbox | None,
    *,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
) -> TurnResult:
    """Advance ``conversation`` (mutated in place) by one user turn."""
    tools = TOOL_SPECS if sandbox is not None else []
    records: list[ToolCallRecord] = []
    while True:
        try:
            reply = await model.complete(conversation, tools)
        except Exception as exc:
            return Failed(f"model error: {type(exc).__name__}: {exc}", tuple(records))
        assistant: Message = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        conversation.append(assistant)
        if not reply.tool_calls:
            return Completed(reply.text, tuple(records))
        if sandbox is None:
            _refuse_calls(conversation, reply.tool_calls, "this agent has no sandbox")
            return Failed("the model called a tool, but this agent has no sandbox", tuple(records))
        for index, call in enumerate(reply.tool_calls):
            if len(records) >= max_tool_calls:
                # Every call gets its answer, or the next turn's request is invalid.
                _refuse_calls(conversation, reply.tool_calls[index:], "tool call limit reached")
                return Failed(f"tool call limit of {max_tool_calls} reached", tuple(records))
            record = await _run_tool(sandbox, call)
            records.append(record)
            conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": record.output,
                }
            )
