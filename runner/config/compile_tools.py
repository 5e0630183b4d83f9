"""``agent.tools``: declared tools compiled through the hook steps' own path.

A part of the YAML compiler (``compiler``); ``CompilerBase`` says why parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.tools import TOOL_OUTPUT_LIMIT
from .compile_hooks import HooksCompiler
from .compile_inputs import _remote_ref
from .errors import JsonPath
from .steps import (
    RunStep,
)


class ToolsCompiler(HooksCompiler):
    """``agent.builtin_tools`` and ``agent.tools``."""

    def compile_tools(self, agent_spec: Mapping[str, Any]) -> list[Any]:
        """``agent.tools``: each a ``CommandTool`` whose command compiles as a run step's."""
        from ..models.tools import BUILTIN_TOOLS
        from .tools import NO_PARAMETERS, CommandTool

        specs = agent_spec.get("tools") or []
        sandbox = (agent_spec.get("environment") or {}).get("sandbox", "none")
        if specs and sandbox == "none":
            self.problem(
                ("agent", "tools"),
                "tools run commands in the sandbox, and sandbox: none has none; "
                "choose sandbox: local or docker",
                at_key=True,
            )
            return []
        tools: list[Any] = []
        names: dict[str, int] = {}
        for index, spec in enumerate(specs):
            path: JsonPath = ("agent", "tools", index)
            name = spec["name"]
            if name in BUILTIN_TOOLS:
                self.problem(
                    (*path, "name"),
                    f"{name!r} is a built-in tool's name; pick another (leave the built-in "
                    "out with builtin_tools)",
                )
                continue
            if name in names:
                self.problem(
                    (*path, "name"),
                    f"tool {name!r} is declared twice (first as tools[{names[name]}])",
                )
                continue
            names[name] = index
            parameters = spec.get("parameters", NO_PARAMETERS)
            valid, fields = self.tool_parameters((*path, "parameters"), parameters)
            if not valid:
                continue
            self.tool_arguments = (fields, bool(spec.get("no_leading_option", True)))
            try:
                step, templates = self.compile_step(path, {**spec, "check": False})
            finally:
                self.tool_arguments = None
            if not isinstance(step, RunStep):
                continue
            tools.append(
                CommandTool(
                    name=name,
                    description=spec["description"],
                    parameters=parameters,
                    step=step,
                    bindings=self.bindings_for(templates, secrets="secrets" in spec),
                    max_output_chars=spec.get("max_output_chars", TOOL_OUTPUT_LIMIT),
                )
            )
        return tools

    def tool_parameters(self, path: JsonPath, schema: Any) -> tuple[bool, frozenset[str] | None]:
        """Whether a tool's ``parameters`` can describe a call's arguments (if
        not, with a problem), and its fields (None: not listed)."""
        from jsonschema import Draft202012Validator, SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            self.problem((*path, *exc.absolute_path), f"not a valid JSON Schema: {exc.message}")
            return False, None
        if schema.get("type") != "object":
            self.problem(
                path, "a tool's parameters must have type: object (the arguments are named)"
            )
            return False, None
        remote = _remote_ref(schema)
        if remote is not None:
            self.problem(
                (*path, *remote),
                "$ref must point inside the schema (#/...): schemas are never fetched",
            )
            return False, None
        properties = schema.get("properties")
        return True, (frozenset(properties) if isinstance(properties, dict) else None)

    # --- environment and agent ------------------------------------------------
