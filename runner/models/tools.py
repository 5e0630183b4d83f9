"""What a turn can offer the model: the tool contract and the three built-ins.

A tool is an object with a ``name``, a ``description``, a ``parameters`` JSON
Schema and an async ``run(ctx, arguments)``.  The turn (``turns.py``) sends
every tool's specification to the model, validates the model's arguments
against ``parameters`` before anything runs, and answers a tool it does not
offer with an error: so a tool never sees arguments its schema refuses, and
a tool left out runs nothing.

The built-ins (``bash``, ``read_file``, ``write_file``) act on the sandbox
through the methods hooks use.  Declared tools are built above this layer:
``runner.tool`` functions (``runner/engine/tools.py``) and YAML ``agent.tools``
(``runner/config/tools.py``); this module only knows the contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.events import decode_output
from ..sandboxes.base import FileTooLargeError, Sandbox

#: Tool output fed back to the model is capped at this many characters.
TOOL_OUTPUT_LIMIT = 16_000
#: ``read_file`` refuses bigger files: the model gets a hint to read parts.
#: No more than this and one byte leave the sandbox for one call.
READ_FILE_LIMIT = 1 << 20


@dataclass(frozen=True)
class ToolContext:
    """What a tool gets besides the model's arguments: the session's sandbox
    (None for an agent without one), its id, and its validated session inputs
    by ``input_id`` (a tool's ``Depends()`` parameters are taken from them)."""

    sandbox: Sandbox | None
    session_id: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolOutput:
    """What a tool answers: the text the model reads, and whether it is an error."""

    text: str
    is_error: bool = False


class Tool:
    """Base of every tool a turn can offer.

    ``reported_name`` is the name events and ``ToolCallRecord`` use (the
    built-ins report ``file_system.bash`` and the like); ``needs_sandbox``
    tools are not offered to an agent without a sandbox.
    """

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
    needs_sandbox: bool = True

    @property
    def reported_name(self) -> str:
        return self.name

    def spec(self) -> dict[str, Any]:
        """The chat-completions tool specification the model receives."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        raise NotImplementedError


def cap_output(text: str, limit: int = TOOL_OUTPUT_LIMIT) -> str:
    """Keep the head and the tail of a long output, and say how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} of {len(text)} characters omitted ...]\n{text[-half:]}"


def command_output(result: Any) -> str:
    """A command's result as the model reads it: the exit code, then its outputs."""
    status = f"exit code {result.exit_code}" + (" (timed out)" if result.timed_out else "")
    parts = [status]
    if result.stdout:
        parts.append(f"[stdout]\n{result.stdout}")
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr}")
    return "\n".join(parts)


class BuiltinTool(Tool):
    """One of the three tools every agent with a sandbox has unless narrowed."""

    @property
    def reported_name(self) -> str:
        return f"file_system.{self.name}"

    def sandbox(self, ctx: ToolContext) -> Sandbox:
        assert ctx.sandbox is not None  # needs_sandbox: never offered without one
        return ctx.sandbox


class BashTool(BuiltinTool):
    name = "bash"
    description = "Run a shell command in the sandbox workspace."
    parameters = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    }

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        result = await self.sandbox(ctx).execute(str(arguments["command"]))
        return ToolOutput(cap_output(command_output(result)), result.exit_code != 0)


class ReadFileTool(BuiltinTool):
    name = "read_file"
    description = "Read a file of the sandbox (paths are relative to the workspace)."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        path = str(arguments["path"])
        try:
            # The limit holds inside the read (at most READ_FILE_LIMIT + 1
            # bytes leave the sandbox), never through a separate stat,
            # which resolves the path apart from the read (issue 26).
            data = await self.sandbox(ctx).read_file_limited(path, READ_FILE_LIMIT)
        except FileTooLargeError as exc:
            size = f"{exc.size} bytes" if exc.size is not None else f"over {exc.limit} bytes"
            return ToolOutput(
                f"error: {path} is {size}; read parts of it with bash (head, tail, sed -n)", True
            )
        # Only what was kept (at most the limit) is decoded.
        return ToolOutput(cap_output(decode_output(data)))


class WriteFileTool(BuiltinTool):
    name = "write_file"
    description = "Create or replace a file in the sandbox."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    }

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        content = str(arguments["content"])
        await self.sandbox(ctx).write_file(str(arguments["path"]), content)
        return ToolOutput(f"wrote {len(content.encode())} bytes")


#: The built-ins by name, in the order the model sees them.
BUILTIN_TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (BashTool(), ReadFileTool(), WriteFileTool())
}


def argument_problem(tool: Tool, arguments: Any) -> str:
    """Why ``arguments`` do not fit ``tool.parameters`` ('' if they do): the
    model reads this, so it names the field and the rule, in one line."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(dict(tool.parameters)).iter_errors(arguments))
    if error is None:
        return ""
    where = ".".join(str(part) for part in error.absolute_path)
    message = " ".join(error.message.split())
    if len(message) > 300:
        message = message[:300] + "..."
    return f"argument {where!r}: {message}" if where else message
