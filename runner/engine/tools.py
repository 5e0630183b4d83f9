"""``@runner.tool``: a Python function the model may call, and an agent's tool set.

The decorator reads the function once: its name and docstring become the
tool's name and description, its type hints the JSON Schema of the model's
arguments (the rules ``SessionInput`` fields follow).  Two kinds of parameter
are never shown to the model: ``ctx`` (a ``ToolContext``: ``ctx.sandbox``,
``ctx.session_id``) and ``Annotated[T, runner.Depends()]`` keyword parameters,
which receive the session's input exactly as a hook's do, validated before
any sandbox exists.  A wrong signature is an ``SdkError`` at decoration.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import SdkError
from ..core.redaction import scrub
from ..models.tools import (
    BUILTIN_TOOLS,
    TOOL_OUTPUT_LIMIT,
    Tool,
    ToolContext,
    ToolOutput,
    cap_output,
)
from .dependencies import Dependency, _depends_marker
from .inputs import SessionInput, annotation_schema, secret_strings

#: The chat APIs' rule for function names.
TOOL_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
#: The parameter name that receives the ``ToolContext``.
CONTEXT_PARAMETER = "ctx"


def check_tool_name(name: Any, *, where: str) -> str:
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= 64
        or not set(name) <= TOOL_NAME_CHARACTERS
    ):
        raise SdkError(
            f"{where}: a tool name is 1 to 64 letters, digits, '_' or '-' "
            f"(what the chat APIs accept), got {name!r}"
        )
    return name


class FunctionTool(Tool):
    """A tool that calls a Python function (sync or async).

    ``dependencies`` are its ``Depends()`` parameters; the agent resolves them
    with its hooks' before the sandbox is created.  An exception the function
    raises is the model's tool error (type and message), not the turn's end;
    the session's secret values are ``***`` in whatever the model reads.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        max_output_chars: int | None = None,
    ) -> None:
        if not callable(function):
            raise SdkError(f"runner.tool takes a function, got {function!r}")
        self.function = function
        self.name = check_tool_name(
            name or getattr(function, "__name__", ""), where=f"tool {function!r}"
        )
        consumer = f"tool {self.name}"
        doc = inspect.getdoc(function) or ""
        self.description = description if description is not None else doc
        if not self.description:
            raise SdkError(
                f"{consumer}: give the function a docstring (or description=...): "
                "the model reads it to know when to call the tool"
            )
        self.max_output_chars = max_output_chars
        self.parameters, self.dependencies, self.wants_context = _signature(function, consumer)
        #: Without ``ctx`` the function cannot reach a sandbox: offered to any agent.
        self.needs_sandbox = self.wants_context

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        keywords = dict(arguments)
        for dependency in self.dependencies:
            keywords[dependency.parameter] = ctx.inputs[dependency.input_id]
        if self.wants_context:
            keywords[CONTEXT_PARAMETER] = ctx
        # The model never reads a session secret, not even in an error.
        secrets = [text for text in secret_strings(ctx.inputs.values()) if text]
        try:
            result = self.function(**keywords)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return ToolOutput(scrub(f"error: {type(exc).__name__}: {exc}", secrets), True)
        text = result if isinstance(result, str) else _as_text(result)
        limit = self.max_output_chars or TOOL_OUTPUT_LIMIT
        return ToolOutput(cap_output(scrub(text, secrets), limit))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The function itself, so a decorated function stays callable."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


def _as_text(value: Any) -> str:
    import json

    if value is None:
        return ""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _signature(
    function: Callable[..., Any], consumer: str
) -> tuple[dict[str, Any], list[Dependency], bool]:
    """(parameters schema, Depends() parameters, whether it takes ``ctx``)."""
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except NameError as exc:
        raise SdkError(f"{consumer}: cannot resolve an annotation: {exc}") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    dependencies: list[Dependency] = []
    wants_context = False
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise SdkError(
                f"{consumer}: *{parameter.name} cannot be described to the model; "
                "name each parameter"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise SdkError(f"{consumer}: parameter {parameter.name!r} may not be positional-only")
        if parameter.name == CONTEXT_PARAMETER:
            wants_context = True
            continue
        annotation = hints.get(parameter.name, inspect.Parameter.empty)
        if annotation is inspect.Parameter.empty:
            raise SdkError(
                f"{consumer}: parameter {parameter.name!r} needs a type annotation: "
                "the model's arguments are checked against the schema it makes"
            )
        base, is_dependency = _depends_marker(annotation)
        if is_dependency:
            if not (isinstance(base, type) and issubclass(base, SessionInput)):
                raise SdkError(
                    f"{consumer}: Depends() parameter {parameter.name!r} is annotated with "
                    f"{base!r}, which is not a SessionInput subclass"
                )
            dependencies.append(Dependency(consumer, parameter.name, base))
            continue
        schema = annotation_schema(annotation, where=f"{consumer}: parameter {parameter.name!r}")
        description = _description(annotation)
        if description:
            schema["description"] = description
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
        else:
            try:
                import json

                json.dumps(parameter.default)
            except TypeError as exc:
                raise SdkError(
                    f"{consumer}: the default of {parameter.name!r} must be JSON data, "
                    f"got {parameter.default!r}"
                ) from exc
            schema["default"] = parameter.default
        properties[parameter.name] = schema
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return parameters, dependencies, wants_context


def _description(annotation: Any) -> str:
    """The first plain string of ``Annotated[T, "what it is"]`` (the model reads it)."""
    if typing.get_origin(annotation) is typing.Annotated:
        for metadata in typing.get_args(annotation)[1:]:
            if isinstance(metadata, str):
                return metadata
    return ""


@typing.overload
def tool(function: Callable[..., Any], /) -> FunctionTool: ...


@typing.overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    max_output_chars: int | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    max_output_chars: int | None = None,
) -> Any:
    """Turn a function into a tool the model may call: ``@runner.tool`` or
    ``@runner.tool(name=..., description=..., max_output_chars=...)``."""

    def make(target: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            target, name=name, description=description, max_output_chars=max_output_chars
        )

    return make(function) if function is not None else make


def agent_tools(
    tools: Sequence[Any], builtin_tools: Sequence[str] | None, *, agent: str
) -> tuple[Tool, ...]:
    """The tools an agent offers: the chosen built-ins (None: all three), then
    its declared tools.  Unknown built-ins, non-tools and two tools of one name
    are ``SdkError``s."""
    if isinstance(builtin_tools, str):
        raise SdkError(
            f"Agent(builtin_tools=...) takes a list of names, got the string {builtin_tools!r}"
        )
    chosen = list(BUILTIN_TOOLS) if builtin_tools is None else list(builtin_tools)
    offered: list[Tool] = []
    for name in chosen:
        if name not in BUILTIN_TOOLS:
            raise SdkError(
                f"agent {agent}: unknown built-in tool {name!r} "
                f"(built-ins: {', '.join(BUILTIN_TOOLS)})"
            )
        offered.append(BUILTIN_TOOLS[name])
    if isinstance(tools, Tool):
        tools = [tools]
    for declared in tools:
        if not isinstance(declared, Tool):
            raise SdkError(
                f"Agent(tools=...) takes tools (functions decorated with @runner.tool), "
                f"got {declared!r}"
            )
        if declared.name in BUILTIN_TOOLS:
            raise SdkError(
                f"agent {agent}: tool {declared.name!r} has the name of a built-in; "
                "pick another name (leave the built-in out with builtin_tools=[...])"
            )
        offered.append(declared)
    seen: set[str] = set()
    for item in offered:
        if item.name in seen:
            raise SdkError(f"agent {agent}: two tools are named {item.name!r}")
        seen.add(item.name)
    return tuple(offered)


def tool_dependencies(tools: Sequence[Tool]) -> list[Dependency]:
    """The session inputs the tools need (a YAML tool lists them as ``dependencies`` too)."""
    return [dependency for item in tools for dependency in getattr(item, "dependencies", ())]
