"""Compile a validated YAML document into an ``Agent`` with ordinary hook objects.

Nothing here runs hooks: the result is the same kind of ``Agent`` a Python
user builds by hand, so YAML hooks go through the one lifecycle.  Every
problem found is collected with its file position; a document with any
problem raises ``ConfigError`` listing them all.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Collection, Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.errors import AgentsError
from ..core.hooks import SandboxHook
from ..engine.inputs import SessionInput
from ..models.tools import TOOL_OUTPUT_LIMIT
from ..sandboxes.base import COMMON_OPTIONS, OptionError
from ..sandboxes.registry import backend_class
from .errors import ConfigError, ConfigProblem, JsonPath
from .host_paths import check_relative
from .steps import (
    InputBinding,
    Paths,
    RunStep,
    SaveStep,
    SecretFileStep,
    Step,
    StepsHook,
    UploadStep,
    WriteStep,
)
from .templates import InputGuard, Template, compile_template, guard_outputs
from .tools import ARGUMENTS_NAME
from .yaml_loader import Document


class DeclaredInput:
    """An input from the ``inputs:`` section, compiled to a SessionInput class.

    (Plain classes here and in steps.py: each dataclass costs ~0.7 ms of
    `runner validate` start-up.)
    """

    __slots__ = ("alias", "fields", "input_class", "input_id", "required")

    def __init__(
        self,
        input_id: str,
        input_class: type[SessionInput],
        alias: str | None,
        required: bool,
        fields: frozenset[str] | None,  # None: the schema does not list its fields
    ) -> None:
        self.input_id = input_id
        self.input_class = input_class
        self.alias = alias
        self.required = required
        self.fields = fields

    def binding(self) -> InputBinding:
        return InputBinding(self.input_class, self.alias)


class CompiledConfig:
    """What a YAML file compiles to: the agent, its inputs and its file paths."""

    __slots__ = ("agent", "inputs", "notes", "path", "paths")

    def __init__(
        self, *, path: Path, agent: Any, inputs: dict[str, DeclaredInput], paths: Paths
    ) -> None:
        self.path = path
        self.agent = agent  # a runner.Agent
        self.inputs = inputs
        self.paths = paths
        #: What command-line overrides left out of the file (for the user to see).
        self.notes: list[str] = []


class _Compiler:
    def __init__(self, document: Document, *, output_dir: Path | None) -> None:
        self.document = document
        self.data: dict[str, Any] = document.data
        self.problems: list[ConfigProblem] = []
        self.run_shell: str | None = None
        config_path = Path(document.file)
        self.paths = Paths(
            output_dir=(output_dir or Path.cwd()),
            config_dir=config_path.parent.resolve(),
        )
        self.inputs: dict[str, DeclaredInput] = {}
        self.secret_specs: dict[str, Any] = dict(self.data.get("secrets") or {})
        self.secrets_class: type[SessionInput] | None = None
        #: The template names each steps hook's on_create reads (for cache checks).
        self.create_names: dict[JsonPath, set[str]] = {}
        self.compiled_hooks: dict[int, SandboxHook] = {}
        #: While a tool compiles: its argument fields (None: any) and whether
        #: their words may not start like an option; None outside tools.
        self.tool_arguments: tuple[frozenset[str] | None, bool] | None = None

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> None:
        self.problems.append(self.document.problem(path, message, at_key=at_key))

    def problem_in_text(self, path: JsonPath, offset: int, message: str) -> None:
        line, column = text_position(self.document, path, offset)
        self.problems.append(ConfigProblem(self.document.file, line, column, message, path))

    # --- inputs -------------------------------------------------------------

    def compile_secrets(self) -> None:
        from .secrets import secrets_input_class

        for name, spec in self.secret_specs.items():
            if "from_file" in spec:
                reason = check_relative(spec["from_file"])
                if reason:
                    self.problem(("secrets", name, "from_file"), reason)
        if self.secret_specs:
            self.secrets_class = secrets_input_class(self.secret_specs, self.paths.config_dir)

    def secret_name(self, path: JsonPath, name: str) -> bool:
        """Is ``name`` a declared secret?  If not, say so at ``path``."""
        if name in self.secret_specs:
            return True
        declared = ", ".join(sorted(self.secret_specs)) or "none"
        self.problem(path, f"unknown secret {name!r} (declared under secrets: {declared})")
        return False

    def compile_inputs(self) -> None:
        from jsonschema import Draft202012Validator, SchemaError

        aliases: dict[str, str] = {}
        for input_id, spec in (self.data.get("inputs") or {}).items():
            path: JsonPath = ("inputs", input_id)
            if input_id.startswith("runner."):
                self.problem(path, "input ids starting with 'runner.' are reserved", at_key=True)
                continue
            schema = spec["schema"]
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                where = (*path, "schema", *exc.absolute_path)
                self.problem(where, f"not a valid JSON Schema: {exc.message}")
                continue
            if schema.get("type") != "object":
                self.problem((*path, "schema"), "an input's schema must have type: object")
                continue
            remote = _remote_ref(schema)
            if remote is not None:
                self.problem(
                    (*path, "schema", *remote),
                    "$ref must point inside the schema (#/...): schemas are never fetched",
                )
                continue
            if "no_leading_dash" in spec and "no_leading_option" in spec:
                self.problem(
                    (*path, "no_leading_dash"),
                    "give only no_leading_option: no_leading_dash is its old name",
                    at_key=True,
                )
                continue
            alias = spec.get("as")
            if alias in ("inputs", "session", ARGUMENTS_NAME):
                self.problem((*path, "as"), f"{alias!r} is reserved; pick another name")
                continue
            if alias and alias in aliases:
                self.problem(
                    (*path, "as"), f"alias {alias!r} is already used by input {aliases[alias]!r}"
                )
                continue
            if alias:
                aliases[alias] = input_id
            required = spec.get("required", True)
            if not required:
                from jsonschema.exceptions import best_match

                error = best_match(Draft202012Validator(schema).iter_errors(_defaults(schema)))
                if error is not None:
                    self.problem(
                        (*path, "required"),
                        "an optional input's schema must accept {} once defaults are applied "
                        f"({error.message})",
                    )
                    continue
            properties = schema.get("properties")
            self.inputs[input_id] = DeclaredInput(
                input_id=input_id,
                input_class=SessionInput.from_json_schema(
                    input_id,
                    schema,
                    optional=not required,
                    secret=bool(spec.get("secret", False)),
                    # no_leading_dash is the old name of no_leading_option
                    no_leading_dash=bool(
                        spec.get("no_leading_option", spec.get("no_leading_dash", False))
                    ),
                ),
                alias=alias,
                required=required,
                fields=frozenset(properties) if isinstance(properties, dict) else None,
            )

    # --- templates ----------------------------------------------------------

    def template(
        self,
        path: JsonPath,
        source: str,
        *,
        shell: bool,
        tainted: Collection[str] = (),
        options: bool = True,
        consumers: Collection[str] | None = None,
        exported: Collection[str] = (),
    ) -> Template | None:
        """The compiled template of one step field.  Each ``{{ }}`` that reads a
        ``no_leading_option`` or a secret input is guarded (``guard_outputs``):
        its word may not start like an option (``options=False``: ``write``
        content, which no program takes as an argument), and a secret's word is
        scrubbed from output as the secret is."""
        names = {d.alias: d.fields for d in self.inputs.values() if d.alias}
        if self.tool_arguments is not None:  # a tool's fields: {{ args.NAME }}
            names[ARGUMENTS_NAME] = self.tool_arguments[0]
        template, problems = compile_template(
            source,
            shell=shell,
            fields_by_name=names,
            tainted_env=tainted,
            shell_name=self.run_shell,
            consumers=consumers,
            exported_env=exported,
        )
        for problem in problems:
            self.problem_in_text(path, problem.offset, problem.message)
        if template is not None and not template.is_static:
            guards = {
                d.input_id: InputGuard(
                    repr(d.input_id), d.input_class.__no_leading_dash__, d.input_class.__secret__
                )
                for d in self.inputs.values()
            }
            guards = {input_id: g for input_id, g in guards.items() if g.options or g.secret}
            by_name = {
                d.alias: guards[d.input_id]
                for d in self.inputs.values()
                if d.alias and d.input_id in guards
            }
            if self.tool_arguments is not None and self.tool_arguments[1]:
                by_name[ARGUMENTS_NAME] = InputGuard("args (the tool's arguments)", True, False)
            guard_outputs(template, by_name, guards, options=options)
        return template

    def host_path(self, path: JsonPath, source: str) -> Template | None:
        template = self.template(path, source, shell=False)
        if template is not None and template.is_static:
            reason = check_relative(source)
            if reason:
                self.problem(path, reason)
                return None
        return template

    # --- hooks --------------------------------------------------------------

    def bindings_for(self, templates: list[Template], *, secrets: bool) -> list[InputBinding]:
        used: set[str] = set()
        for template in templates:
            used |= template.names
        everything = "inputs" in used
        bindings = [
            d.binding()
            for d in self.inputs.values()
            if everything or (d.alias is not None and d.alias in used)
        ]
        if secrets and self.secrets_class is not None:
            bindings.append(InputBinding(self.secrets_class, None, templated=False))
        return bindings

    def compile_step(self, path: JsonPath, spec: Mapping[str, Any]) -> tuple[Step | None, list]:
        label = spec.get("name")
        templates: list[Template | None] = []
        step: Step | None = None
        if "run" in spec:
            env = {
                name: self.template((*path, "env", name), value, shell=False)
                for name, value in (spec.get("env") or {}).items()
            }
            # A templated env value taints its variable in the command, and
            # may not go into a variable that changes how the shell runs.
            tainted = {name for name, t in env.items() if t is not None and not t.is_static}
            if tainted:
                from .shell.rules import is_code_bearing_env
            for name in sorted(tainted):
                if is_code_bearing_env(name):
                    self.problem(
                        (*path, "env", name),
                        f"a templated value may not go into {name}: the shell or a program "
                        "reads it as code or options; use another variable name",
                    )
            cwd = self.template((*path, "cwd"), spec["cwd"], shell=False) if "cwd" in spec else None
            if cwd is not None and not cwd.is_static:
                tainted |= {"PWD", "OLDPWD"}  # the command runs in a directory a value named
            command = self.template(
                (*path, "run"),
                spec["run"],
                shell=True,
                tainted=tainted,
                consumers=self.consumers(path, spec),
                exported=frozenset(env),  # static names too: a value assigned later is exported
            )
            templates = [command, *env.values(), cwd] if cwd else [command, *env.values()]
            secret_env = dict(spec.get("secrets") or {})
            known = all(
                self.secret_name((*path, "secrets", env_name), secret)
                for env_name, secret in secret_env.items()
            )
            if all(t is not None for t in templates) and known:
                step = RunStep(
                    label=label,
                    command=command,  # type: ignore[arg-type]
                    timeout_seconds=spec.get("timeout_seconds"),
                    env=env,  # type: ignore[arg-type]
                    cwd=cwd,
                    check=spec.get("check", True),
                    secret_env=secret_env,
                )
        elif "write" in spec:
            target = self.template((*path, "write"), spec["write"], shell=False)
            content = self.template((*path, "content"), spec["content"], shell=False, options=False)
            templates = [target, content]
            if target and content:
                step = WriteStep(label=label, path=target, content=content)
        elif "save" in spec:
            source = self.template((*path, "save"), spec["save"], shell=False)
            to = self.host_path((*path, "to"), spec["to"])
            templates = [source, to]
            if source and to:
                step = SaveStep(
                    label=label, path=source, to=to, missing_ok=spec.get("missing_ok", False)
                )
        elif "secret_file" in spec:
            target = self.template((*path, "secret_file"), spec["secret_file"], shell=False)
            templates = [target]
            if target and self.secret_name((*path, "secret"), spec["secret"]):
                step = SecretFileStep(label=label, path=target, secret=spec["secret"])
        elif "upload" in spec:
            source = self.host_path((*path, "upload"), spec["upload"])
            to = self.template((*path, "to"), spec["to"], shell=False)
            templates = [source, to]
            if source and to:
                step = UploadStep(label=label, source=source, to=to)
        return step, [t for t in templates if t is not None]

    def compile_steps_hook(self, path: JsonPath, spec: Mapping[str, Any]) -> SandboxHook | None:
        points: dict[str, list[Step]] = {"on_create": [], "on_destroy": []}
        templates: list[Template] = []
        ok = True
        uses_secrets = False
        for point in points:
            for index, step_spec in enumerate(spec.get(point) or []):
                step, used = self.compile_step((*path, point, index), step_spec)
                templates += used
                if point == "on_create":
                    self.create_names.setdefault(path, set()).update(
                        name for t in used for name in t.names
                    )
                uses_secrets |= "secrets" in step_spec or "secret_file" in step_spec
                if step is None:
                    ok = False
                else:
                    points[point].append(step)
        if not ok:
            return None
        return StepsHook(
            name=spec["name"],
            on_create=points["on_create"],
            on_destroy=points["on_destroy"],
            inputs=self.bindings_for(templates, secrets=uses_secrets),
            paths=self.paths,
        )

    def compile_uses_hook(self, path: JsonPath, spec: Mapping[str, Any]) -> SandboxHook | None:
        from ..pattern.sandbox_hook import GitIdentity

        arguments = spec.get("with") or {}
        try:
            hook = GitIdentity(**arguments)
        except (TypeError, ValueError) as exc:
            self.problem((*path, "with"), str(exc))
            return None
        if "name" in spec:
            hook.name = spec["name"]
        return hook

    def compile_python_hook(self, path: JsonPath, spec: Mapping[str, Any]) -> SandboxHook | None:
        reference = spec["python"]
        module_name, _, attribute = reference.partition(":")
        where = (*path, "python")
        try:
            with _importable_from(self.paths.config_dir):
                target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except ImportError as exc:
            self.problem(where, f"cannot import {module_name!r}: {exc}")
            return None
        except AttributeError:
            self.problem(where, f"module {module_name!r} has no {attribute!r}")
            return None
        if not (isinstance(target, type) and issubclass(target, SandboxHook)):
            self.problem(where, f"{reference} is not a SandboxHook subclass")
            return None
        try:
            hook = target(**(spec.get("with") or {}))
        except Exception as exc:
            self.problem(
                (*path, "with") if "with" in spec else where,
                f"{reference}(...) failed: {type(exc).__name__}: {exc}",
            )
            return None
        if "name" in spec:
            hook.name = spec["name"]
        return hook

    def consumers(self, path: JsonPath, spec: Mapping[str, Any]) -> frozenset[str] | None:
        """The programs of strict mode for one run step: the file's ``consumers``
        and the step's together (None: neither is given, the default mode)."""
        file_level, step_level = self.data.get("consumers"), spec.get("consumers")
        if file_level is None and step_level is None:
            return None
        self.check_consumers((*path, "consumers"), step_level or [])
        return frozenset([*(file_level or []), *(step_level or [])])

    def check_consumers(self, path: JsonPath, names: list[str]) -> None:
        """A shell or an interpreter is never a consumer: it would run the value."""
        from .shell.rules import is_interpreter

        for index, name in enumerate(names):
            if is_interpreter(name):
                self.problem(
                    (*path, index),
                    f"{name!r} runs what it receives as code, so it can never be a consumer; "
                    "pass the value to a program that treats it as data",
                )

    def compile_hooks(self, environment: Mapping[str, Any]) -> list[SandboxHook]:
        #: The shell run steps are checked as (None: bash, or sh on an image without it).
        self.run_shell = environment.get("shell")
        self.check_consumers(("consumers",), self.data.get("consumers") or [])
        hooks: list[SandboxHook] = []
        for index, spec in enumerate(environment.get("hooks") or []):
            path: JsonPath = ("agent", "environment", "hooks", index)
            if "uses" in spec:
                hook = self.compile_uses_hook(path, spec)
            elif "python" in spec:
                hook = self.compile_python_hook(path, spec)
            else:
                hook = self.compile_steps_hook(path, spec)
            if hook is not None:
                hooks.append(hook)
                self.compiled_hooks[index] = hook
                if spec.get("cache"):
                    hook.cache = True  # type: ignore[attr-defined]
                    hook.cache_definition = _normalized(spec)  # type: ignore[attr-defined]
        return hooks

    def check_cache(self, environment: Mapping[str, Any], hooks: list[SandboxHook]) -> None:
        """``cache: true`` only where a snapshot can hold the hook's work, and never a secret."""
        backend = environment.get("sandbox", "none")
        leading = True
        for index, spec in enumerate(environment.get("hooks") or []):
            path: JsonPath = ("agent", "environment", "hooks", index)
            if not spec.get("cache"):
                leading = False
                continue
            where = (*path, "cache")
            if backend != "docker":
                self.problem(
                    where,
                    f"cache: true needs sandbox: docker (sandbox: {backend} cannot snapshot a "
                    "workspace)",
                )
                continue
            if not leading:
                self.problem(
                    where,
                    "cache: true has no effect here: only the leading run of cached hooks is "
                    "snapshotted, and a hook before this one is not cached",
                )
            for point in ("on_create", "on_destroy"):
                for step_index, step in enumerate(spec.get(point) or []):
                    for key in ("secrets", "secret_file"):
                        if key in step:
                            self.problem(
                                (*path, point, step_index, key),
                                "a cached hook (cache: true) may not use secrets: a snapshot "
                                "must never hold a secret",
                                at_key=True,
                            )
            for step_index, step in enumerate(spec.get("on_create") or []):
                for key in ("save", "upload"):
                    if key in step:
                        why = (
                            "it would not run when the snapshot is used"
                            if key == "save"
                            else "the host file's content is not part of the snapshot key"
                        )
                        self.problem(
                            (*path, "on_create", step_index, key),
                            f"a cached hook's on_create may not have a {key} step: {why}",
                            at_key=True,
                        )
            if "session" in self.create_names.get(path, ()):
                self.problem(
                    where,
                    "a cached hook's on_create may not use session.id: the snapshot would keep "
                    "the first session's id",
                )
            hook = self.compiled_hooks.get(index)
            for binding in getattr(hook, "bindings", ()):
                if binding.secret and binding.templated:
                    self.problem(
                        where,
                        f"a cached hook may not use the secret input "
                        f"{binding.input_class.input_id!r}: a snapshot must never hold a secret",
                    )

    # --- tools ----------------------------------------------------------------

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


def _normalized(spec: Mapping[str, Any]) -> Any:
    """A hook's YAML data as plain JSON values: what identifies it in a snapshot key."""
    import json

    return json.loads(json.dumps(spec, sort_keys=True, default=str))


def _remote_ref(schema: Any, path: JsonPath = ()) -> JsonPath | None:
    """Where ``schema`` has a ``$ref`` to another document, which would fail only at run time."""
    if isinstance(schema, dict):
        reference = schema.get("$ref")
        if isinstance(reference, str) and not reference.startswith("#"):
            return (*path, "$ref")
        items: Iterable[tuple[Any, Any]] = schema.items()
    elif isinstance(schema, list):
        items = enumerate(schema)
    else:
        return None
    for key, value in items:
        found = _remote_ref(value, (*path, key))
        if found is not None:
            return found
    return None


def _defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    from ..engine.inputs import _with_defaults

    return _with_defaults(schema, {})


@contextmanager
def _importable_from(directory: Path):  # type: ignore[no-untyped-def]
    """Let ``python:`` hooks import modules that sit next to the config file."""
    entry = str(directory)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def text_position(document: Document, path: JsonPath, offset: int) -> tuple[int, int]:
    """File position of character ``offset`` of the string at ``path``.

    Exact for plain one-line scalars and for literal (``|``) block scalars;
    for other styles, the best estimate (quoted: after the quote; folded:
    the scalar's start).
    """
    node = document.nodes.get(tuple(path))
    if node is None:
        return document.position(path)
    line, column = node.start_mark.line + 1, node.start_mark.column + 1
    value = node.value if isinstance(node.value, str) else ""
    before = value[:offset]
    if node.style in (None, "", "'", '"') and "\n" not in before:
        return line, column + offset + (1 if node.style else 0)
    if node.style == "|":
        lines = document.text.splitlines()
        first = node.start_mark.line + 1  # 0-based index of the first content line
        content = [text for text in lines[first:] if text.strip()]
        indent = len(content[0]) - len(content[0].lstrip(" ")) if content else 0
        line_index = before.count("\n")
        column_in_line = len(before) - (before.rfind("\n") + 1)
        return first + line_index + 1, indent + column_in_line + 1
    return line, column


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
