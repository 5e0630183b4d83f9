"""Compile a validated YAML document into an ``Agent`` with ordinary hook objects.

Nothing here runs hooks: the result is the same kind of ``Agent`` a Python
user builds by hand, so YAML hooks go through the one lifecycle.  Every
problem found is collected with its file position; a document with any
problem raises ``ConfigError`` listing them all.

The parts live beside it: ``compile_base`` (state, problems, templates),
``compile_inputs``, ``compile_hooks`` and ``compile_tools``; this module
composes them and compiles the environment and the agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import AgentsError
from ..core.hooks import SandboxHook
from ..sandboxes.base import COMMON_OPTIONS, OptionError
from ..sandboxes.registry import backend_class
from .compile_base import CompiledConfig as CompiledConfig
from .compile_base import DeclaredInput as DeclaredInput
from .compile_base import text_position as text_position
from .compile_inputs import InputsCompiler
from .compile_tools import ToolsCompiler
from .errors import ConfigError, ConfigProblem, JsonPath
from .yaml_loader import Document


class _Compiler(InputsCompiler, ToolsCompiler):
    """One document, every part."""

    def compile_environment(self, hooks: list[SandboxHook]) -> Any:
        """The backend ``sandbox:`` names, built by its own ``from_options``."""
        base: JsonPath = ("agent", "environment")
        spec = dict((self.data.get("agent") or {}).get("environment") or {"sandbox": "none"})
        backend = backend_class(spec["sandbox"])
        allowed = COMMON_OPTIONS | backend.options
        for key in spec:
            if key not in allowed:
                self.problem(
                    (*base, key),
                    f"{key!r} does not apply to sandbox: {spec['sandbox']}",
                    at_key=True,
                )
        common = {
            "hooks": hooks,
            "default_exec_timeout_seconds": spec.get("default_exec_timeout_seconds", 30),
            "ttl_seconds": spec.get("ttl_seconds"),
            "shell": spec.get("shell"),
            "env": spec.get("env"),
        }
        try:
            return backend.from_options(spec, common)
        except OptionError as exc:
            if exc.key is None:  # the environment as a whole
                if not self.problems:  # check_cache has already said why, with a position
                    self.problem(base, str(exc))
                return None
            self.problem((*base, exc.key), str(exc), at_key=exc.at_key)
            return None

    def compile(self) -> CompiledConfig | None:
        from ..engine.agent import Agent

        self.compile_secrets()
        self.compile_inputs()
        agent_spec = self.data["agent"]
        hooks = self.compile_hooks(agent_spec.get("environment") or {})
        self.check_cache(agent_spec.get("environment") or {}, hooks)
        tools = self.compile_tools(agent_spec)
        environment = self.compile_environment(hooks)
        if self.problems or environment is None:
            return None
        try:
            agent = Agent(
                model=agent_spec["model"],
                name=agent_spec.get("name", "default_agent"),
                instructions=agent_spec.get("instructions"),
                base_url=agent_spec.get("base_url"),
                environment=environment,
                tools=tools,
                builtin_tools=agent_spec.get("builtin_tools"),
                inputs=[d.input_class for d in self.inputs.values()]
                + ([self.secrets_class] if self.secrets_class else []),
                **{
                    key: agent_spec[key]
                    for key in (
                        "max_tool_calls",
                        "request_timeout_seconds",
                        "max_retries",
                        "keep_background_processes",
                    )
                    if key in agent_spec
                },
            )
        except AgentsError as exc:
            self.problem(("agent",), str(exc))
            return None
        return CompiledConfig(
            path=Path(self.document.file), agent=agent, inputs=self.inputs, paths=self.paths
        )


def compile_document(document: Document, *, output_dir: Path | None = None) -> CompiledConfig:
    """Validate ``document`` against the schema, then compile it; raise ``ConfigError``."""
    from .schema import schema_problems

    if not isinstance(document.data, dict):
        raise ConfigError(
            [
                ConfigProblem(
                    document.file, 1, 1, "the file must be a mapping with version and agent"
                )
            ]
        )
    problems = schema_problems(document)
    if problems:
        raise ConfigError(problems)
    compiler = _Compiler(document, output_dir=output_dir)
    compiled = compiler.compile()
    if compiler.problems or compiled is None:
        raise ConfigError(compiler.problems)
    return compiled
