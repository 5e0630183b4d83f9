"""One agent turn: call the model, run the tools it asks for, repeat.

Tools act on the session's sandbox through the same methods hooks use
(``execute``, ``read_file``, ``write_file``); a session without a sandbox
offers no tools.  Model and tool failures become a ``Failed`` result: a turn
never raises for them.
"""

from __future__ import annotations

import json
from typing import Any

from ._model import Completed, Failed, Message, Model, ToolCall, ToolCallRecord, TurnResult
from .sandboxes.base import Sandbox

DEFAULT_MAX_TOOL_CALLS = 50

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


async def _run_tool(sandbox: Sandbox, call: ToolCall) -> ToolCallRecord:
    try:
        arguments = json.loads(call.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("tool arguments must be a JSON object")
    except ValueError as exc:
        return ToolCallRecord(call.name, {}, f"error: malformed arguments: {exc}", True)
    try:
        if call.name == "bash":
            result = await sandbox.execute(str(arguments["command"]))
            output = f"exit code {result.exit_code}\n{result.stdout}{result.stderr}"
            return ToolCallRecord(call.name, arguments, output, result.exit_code != 0)
        if call.name == "read_file":
            data = await sandbox.read_file(str(arguments["path"]))
            return ToolCallRecord(call.name, arguments, data.decode("utf-8", errors="replace"))
        if call.name == "write_file":
            await sandbox.write_file(str(arguments["path"]), str(arguments["content"]))
            return ToolCallRecord(call.name, arguments, "written")
    except KeyError as exc:
        return ToolCallRecord(call.name, arguments, f"error: missing argument {exc}", True)
    except OSError as exc:
        return ToolCallRecord(call.name, arguments, f"error: {exc}", True)
    return ToolCallRecord(call.name, arguments, f"error: unknown tool {call.name!r}", True)


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
            return Failed("the model called a tool, but this agent has no sandbox", tuple(records))
        for call in reply.tool_calls:
            if len(records) >= max_tool_calls:
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
