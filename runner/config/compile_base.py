"""What every part of the YAML compiler shares: its state, its problems, templates.

``CompilerBase`` holds one document's compile (the problems found, the
inputs declared, the paths) and the helpers every part uses: ``problem``,
``template`` (a step field compiled and guarded) and ``bindings_for``.  The
parts are classes over it, one module each (``compile_inputs``,
``compile_hooks``, ``compile_tools``), composed in ``compiler`` (issue 27:
the compiler split by concern, as the shell checker is by pass).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..core.hooks import SandboxHook
from ..engine.inputs import SessionInput
from .chosen_text import CHOSEN_TEXT, REPEATED_PATH, value_text
from .errors import ConfigProblem, JsonPath
from .host_paths import RUNNER_NAMES, check_relative, check_value_destination
from .steps import (
    InputBinding,
    Paths,
)
from .template_checks import _offset_of_line, path_components, untracked_constructs
from .templates import InputGuard, Template, compile_template, guard_outputs
from .tools import ARGUMENTS_NAME
from .yaml_loader import Document


class DeclaredInput:
    """An input from the ``inputs:`` section, compiled to a SessionInput class.

    (Plain classes here and in steps.py: each dataclass costs ~0.7 ms of
    `runner validate` start-up.)
    """

    __slots__ = ("alias", "fields", "input_class", "input_id", "many", "required")

    def __init__(
        self,
        input_id: str,
        input_class: type[SessionInput],
        alias: str | None,
        required: bool,
        fields: frozenset[str] | None,  # None: the schema does not list its fields
        many: frozenset[str] = frozenset(),
    ) -> None:
        self.input_id = input_id
        self.input_class = input_class
        self.alias = alias
        self.required = required
        self.fields = fields
        #: The fields whose schema makes them a list or a mapping: never one word.
        self.many = many

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


class CompilerBase:
    """One document's compile: its state and the helpers every part uses."""

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

    def secret_name(self, path: JsonPath, name: str) -> bool:
        """Is ``name`` a declared secret?  If not, say so at ``path``."""
        if name in self.secret_specs:
            return True
        declared = ", ".join(sorted(self.secret_specs)) or "none"
        self.problem(path, f"unknown secret {name!r} (declared under secrets: {declared})")
        return False

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
        text_is_code: bool = False,
    ) -> Template | None:
        """The compiled template of one step field.  Each ``{{ }}`` that reads a
        ``no_leading_option`` or a secret input is guarded (``guard_outputs``):
        its word may not start like an option (``options=False``: ``write``
        content, which no program takes as an argument), and a secret's word is
        scrubbed from output as the secret is.  In a host path
        (``text_is_code``) the template's own text may be neither chosen nor
        repeated by a value (``chosen_text``; ``compile_template`` says so of
        a ``run`` command)."""
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
        if template is not None and shell and not template.is_static:
            for offset, message in self.lists_as_words(source, template):
                self.problem_in_text(path, offset, message)
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
            if self.untracked_secret(path, source, template):
                return None
            if template.secret_chosen_text is not None:
                self.problem_in_text(
                    path,
                    _offset_of_line(source, template.secret_chosen_text),
                    "the template's own text in an {% if %} or a {% for %} that a secret "
                    "input decides would say which way it went (or how often it ran), "
                    "unmasked; write the choice as {{ 'a' if ... else 'b' }}, which the "
                    "runner masks, and loop over what is not secret",
                )
                return None
        if template is not None and not template.is_static and text_is_code:
            found = value_text(template.tree, template.names - RUNNER_NAMES)
            if found.chosen is not None or found.shaped:
                line = found.chosen or 1
                message = CHOSEN_TEXT if found.chosen is not None else REPEATED_PATH
                self.problem_in_text(path, _offset_of_line(source, line), message)
                return None
        return template

    def untracked_secret(self, path: JsonPath, source: str, template: Template) -> bool:
        """A template that reads a secret input (``guard_outputs`` has said so)
        may use only what the runner follows a secret through, to mask what it
        prints (``if``, ``for``, ``set NAME = ...``, ``{{ }}`` with filters):
        ``{% with %}``, a block ``{% set %}``, ``{% filter %}`` or ``namespace()``
        printed it unmasked in ``env:``, paths and ``write:`` content (review
        26's B1b); nor may one that reads a ``no_leading_option`` input: there
        ``{% with f = x.f | trim %}{{ f }}`` printed `` +cmd`` trimmed, past
        the guard (review 38's F2).  Said as a problem, True if so."""
        guarded = template.touches_secret or template.touches_option_guard
        untracked = untracked_constructs(template.tree) if guarded else []
        what_input, why = (
            ("a secret input", "to mask what the template prints")
            if template.touches_secret
            else ("a no_leading_option input", "to check the word it prints")
        )
        for line, what in untracked[:1]:
            self.problem_in_text(
                path,
                _offset_of_line(source, line),
                f"{what} in a template that reads {what_input}: the runner follows "
                "it only through if, for, set NAME = expression and {{ }} with its "
                f"filters, {why}; write it with those",
            )
        return bool(untracked)

    def lists_as_words(self, source: str, template: Template) -> list[tuple[int, str]]:
        """``{{ x.names }}`` in a ``run`` command where the schema makes
        ``names`` a list or a mapping: not one word, so it could only fail
        when the step runs; said at validate instead (exit 2, like every
        refusal)."""
        from jinja2 import nodes

        many = {d.alias: d.many for d in self.inputs.values() if d.alias and d.many}
        found = []
        for output in template.tree.find_all(nodes.Output):
            for node in output.nodes:
                if (
                    isinstance(node, nodes.Getattr)
                    and isinstance(node.node, nodes.Name)
                    and node.attr in many.get(node.node.name, ())
                ):
                    name = f"{node.node.name}.{node.attr}"
                    found.append(
                        (
                            max(source.find(name), 0),
                            f"{{{{ {name} }}}} is a list or a mapping (its schema's type), "
                            "not one shell word: loop over it ({% for item in "
                            f"{name} %}}{{{{ item }}}} {{% endfor %}}) or pick a field",
                        )
                    )
        return found

    def host_secret_files(self) -> frozenset[str]:
        """The host files ``from_file:`` secrets are read from, as named and as
        resolved: a run step's value may not name one for a program to read
        (the local sandbox runs on this host, and an ``upload:`` may copy one
        in: review 23's J1).  Judged by last name, like a ``secret_file:``."""
        import os

        found: set[str] = set()
        for spec in self.secret_specs.values():
            named = spec.get("from_file") if isinstance(spec, dict) else None
            if isinstance(named, str) and named:
                given = self.paths.config_dir / named
                found |= {str(given), os.path.realpath(given)}
        return frozenset(found)

    def host_path(self, path: JsonPath, source: str, *, writes: bool = False) -> Template | None:
        """A host path's template (``writes``: where a file lands on the host)."""
        template = self.template(path, source, shell=False, text_is_code=True)
        if template is None:
            return None
        reason = check_relative(source) if template.is_static else None
        if writes and template.names - RUNNER_NAMES:
            reason = check_value_destination(path_components(source, RUNNER_NAMES))
        if template.touches_secret:  # a file's name on disk is never masked (review 30's O1)
            reason = "a host path may not be made from a secret input: no file name is masked"
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
