"""Tools declared in YAML (``agent.tools``): a shell command the model may call.

A ``CommandTool`` is an ordinary tool (``runner/models/tools.py``) whose run
is a compiled ``RunStep``: the model's arguments, validated against the
tool's ``parameters`` by the turn, are the template name ``args``, and the
command goes through the very path a hook's ``run`` step takes (every value
one single-quoted word, the exact script checked before it runs, ``env``,
``cwd``, ``secrets``, the time limit).  What a hook step would raise is the
model's tool error instead: a refused script, a value that is no word, a
non-zero exit (with its code and output).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jinja2 import UndefinedError

from ..core.redaction import scrub
from ..engine.dependencies import Dependency
from ..engine.inputs import secret_strings
from ..models.tools import Tool, ToolContext, ToolOutput, cap_output, command_output
from .steps import InputBinding, RunStep, template_context
from .templates import Fields, TemplateSecurityError, TemplateValueError

#: The template name a tool's arguments go by (``{{ args.path }}``).
ARGUMENTS_NAME = "args"
#: The parameters of a tool that declares none: no arguments at all.
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class CommandTool(Tool):
    """A YAML tool: its ``step`` runs in the sandbox with the model's arguments."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        step: RunStep,
        bindings: Sequence[InputBinding],
        max_output_chars: int,
    ) -> None:
        self.name = name
        self.description = description
        self.parameters = dict(parameters)
        self.step = step
        self.bindings = tuple(bindings)
        self.max_output_chars = max_output_chars
        #: The session inputs its templates read and its secrets: resolved with
        #: the hooks' before any sandbox exists.
        self.dependencies = tuple(
            Dependency(f"tool {name}", b.parameter, b.input_class) for b in self.bindings
        )

    def arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The model's arguments with the schema's top-level defaults filled in."""
        filled = dict(arguments)
        for key, spec in (self.parameters.get("properties") or {}).items():
            if key not in filled and isinstance(spec, Mapping) and "default" in spec:
                filled[key] = spec["default"]
        return filled

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        assert ctx.sandbox is not None  # a CommandTool needs a sandbox: never offered without
        values = {b.input_class.input_id: ctx.inputs[b.input_class.input_id] for b in self.bindings}
        context = template_context(self.bindings, values, ctx.session_id)
        context[ARGUMENTS_NAME] = Fields(self.arguments(arguments))
        secret_values: dict[str, Any] = next(
            (values[b.input_class.input_id].to_dict() for b in self.bindings if not b.templated),
            {},
        )
        hidden = [
            text
            for text in (*secret_strings(values.values()), *map(str, secret_values.values()))
            if text
        ]
        try:
            result = await self.step.execute(ctx.sandbox, context, secret_values)
        except (TemplateSecurityError, TemplateValueError, UndefinedError) as exc:
            # Refused before anything ran: the model reads why (never a secret).
            return ToolOutput(scrub(f"error: {exc}; nothing was run", hidden), True)
        text = scrub(command_output(result), hidden)
        return ToolOutput(cap_output(text, self.max_output_chars), result.exit_code != 0)

    def __repr__(self) -> str:
        return f"<tool {self.name}: {self.step.command.source!r}>"
