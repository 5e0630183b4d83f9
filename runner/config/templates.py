"""Jinja2 templates for hook steps, compiled once, rendered per session.

Two flavours share one ``SandboxedEnvironment`` setup with ``StrictUndefined``:

- ``shell``: for ``run`` steps.  Jinja's ``finalize`` passes every ``{{ }}``
  value through ``shlex.quote``, so an input always reaches the shell as one
  word, whatever it holds.  Lists and mappings are refused (they are not one
  word: loop over them), and so is NUL.
- ``text``: for ``write`` content, ``env`` values and paths: values are
  inserted as they are (NUL still refused).

Names a template uses are checked when the file is compiled: an undeclared
name, or a field its input's schema does not declare, is a validation error
before any session starts.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from jinja2 import StrictUndefined, TemplateSyntaxError, meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from .._errors import AgentsError

#: Names every template may use besides the declared input aliases.
BUILTIN_NAMES = frozenset({"inputs", "session"})


class TemplateValueError(AgentsError):
    """A value cannot be inserted into a template (NUL, or a list in a command)."""


class Fields(Mapping[str, Any]):
    """Read-only view of an input value: ``repo.revision`` and ``repo["revision"]``.

    A plain dict would expose its methods (``repo.items``) where a field of
    that name was meant.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    def __getitem__(self, key: str) -> Any:
        return wrap(self._data[key])

    def __getattr__(self, name: str) -> Any:
        try:
            return wrap(self._data[name])
        except KeyError:
            raise AttributeError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


def wrap(value: Any) -> Any:
    if isinstance(value, Mapping) and not isinstance(value, Fields):
        return Fields(value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        text = str(value)
    else:
        raise TemplateValueError(
            f"a {type(value).__name__} value cannot be inserted as one shell word; "
            "loop over it ({% for item in ... %}{{ item }} {% endfor %}) or pick a field"
        )
    if "\0" in text:
        raise TemplateValueError("a value contains a NUL character, which no command can take")
    return text


def _shell_word(value: Any) -> str:
    return shlex.quote(_scalar_text(value))


def _text(value: Any) -> str:
    if isinstance(value, Fields):
        value = dict(value)
    text = value if isinstance(value, str) else str(value)
    if "\0" in text:
        raise TemplateValueError("a value contains a NUL character")
    return text


#: Attributes no template may touch: the classic ways out of a Jinja sandbox.
FORBIDDEN_ATTRIBUTES = frozenset({"mro", "format", "format_map", "__class__", "__subclasses__"})


class TemplateSecurityError(AgentsError):
    """A template reached for something the sandbox forbids."""


class _StrictSandbox(SandboxedEnvironment):
    """Jinja's sandbox, made loud: an unsafe attribute is an error, not ''."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if attr in FORBIDDEN_ATTRIBUTES:
            return False
        return super().is_safe_attribute(obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # repo.items is the field "items" when the input has one, not the
        # Mapping method of that name.
        if isinstance(obj, Fields) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise TemplateSecurityError(
            f"templates may not access {attribute!r} of a {type(obj).__name__}"
        )


def _environment(finalize: Any) -> SandboxedEnvironment:
    return _StrictSandbox(
        undefined=StrictUndefined,
        finalize=finalize,
        autoescape=False,
        keep_trailing_newline=True,
    )


def _unsafe_access(tree: nodes.Template) -> list[tuple[int, str]]:
    """(line, what) for every attribute or filter that reaches outside the sandbox."""
    found = []
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Filter):
            if node.name == "attr":
                found.append((node.lineno, "the |attr filter"))
            continue
        name = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)
        if isinstance(name, str) and (name.startswith("_") or name in FORBIDDEN_ATTRIBUTES):
            found.append((node.lineno, repr(name)))
    return found


_SHELL = _environment(_shell_word)
_TEXT = _environment(_text)


class TemplateProblem(NamedTuple):
    """A problem found in a template, at an offset of its source."""

    offset: int
    message: str


class Template:
    """One checked template and the names it reads.

    ``tree`` is the parsed template; it is compiled to Python on first
    render, once, so that validating a large file pays only for parsing.
    A template without Jinja markup has no tree and renders as itself.
    """

    __slots__ = ("_compiled", "names", "shell", "source", "tree")

    def __init__(self, source: str, shell: bool, names: frozenset[str], tree: Any = None) -> None:
        self.source = source
        self.shell = shell
        self.names = names
        self.tree = tree
        self._compiled: Any = None

    @property
    def is_static(self) -> bool:
        return self.tree is None

    def render(self, context: Mapping[str, Any]) -> str:
        if self.tree is None:
            return self.source
        if self._compiled is None:
            environment = _SHELL if self.shell else _TEXT
            self._compiled = environment.from_string(self.tree)
        return self._compiled.render(**context)


def _offset_of_line(source: str, lineno: int) -> int:
    offset = 0
    for _ in range(max(0, lineno - 1)):
        found = source.find("\n", offset)
        if found < 0:
            break
        offset = found + 1
    return offset


def _name_offset(source: str, name: str) -> int:
    import re

    for match in re.finditer(r"\{\{.*?\}\}|\{%.*?%\}", source, re.S):
        inner = re.search(rf"(?<![\w.]){re.escape(name)}\b", match.group(0))
        if inner:
            return match.start() + inner.start()
    return 0


#: Block tags that rewrite what their body prints, after values were quoted
#: (a filter could strip the quotes again), or hide output in ways the shell
#: check cannot follow.  Not allowed in ``run`` commands.
_FORBIDDEN_IN_SHELL = {
    nodes.FilterBlock: "{% filter %}",
    nodes.Macro: "{% macro %}",
    nodes.CallBlock: "{% call %}",
    nodes.AssignBlock: "{% set %}...{% endset %}",
    nodes.Include: "{% include %}",
    nodes.Import: "{% import %}",
    nodes.FromImport: "{% from ... import %}",
    nodes.Extends: "{% extends %}",
}


#: More branch combinations than this and a run template is refused.
MAX_SKELETONS = 256


def shell_skeletons(tree: nodes.Template) -> tuple[list[str], list[nodes.Node]]:
    """Every text a template can print, with a marker where each ``{{ }}`` prints.

    Built from the parse tree, so Jinja syntax (string literals, raw blocks,
    comments) cannot disguise what the shell will read.  Each branch of an
    ``if`` is a separate variant, and a loop body appears 0, 1 and 2 times,
    so text that only joins up in one combination is still seen.  Output
    number *i* is marked by ``shell_context.mark(i)``.
    """
    from .shell_context import mark

    outputs: list[nodes.Node] = []

    def combine(first: list[str], second: list[str]) -> list[str]:
        joined = [a + b for a in first for b in second]
        if len(joined) > MAX_SKELETONS:
            raise _TooManyBranches
        return joined

    def of_nodes(body: list[nodes.Node]) -> list[str]:
        variants = [""]
        for node in body:
            variants = combine(variants, of_node(node))
        return variants

    def of_node(node: nodes.Node) -> list[str]:
        if isinstance(node, nodes.Output):
            parts = []
            for child in node.nodes:
                if isinstance(child, nodes.TemplateData):
                    parts.append(child.data)
                else:
                    parts.append(mark(len(outputs)))
                    outputs.append(child)
            return ["".join(parts)]
        if isinstance(node, nodes.If):
            branches = of_nodes(node.body)
            for elif_ in node.elif_:
                branches += of_node(elif_)
            branches += of_nodes(node.else_) if node.else_ else [""]
            return branches
        if isinstance(node, nodes.For):
            once = of_nodes(node.body)
            none = of_nodes(node.else_) if node.else_ else [""]
            return none + once + combine(once, once)
        variants = [""]
        for child in node.iter_child_nodes():
            if isinstance(child, nodes.Stmt | nodes.Output):
                variants = combine(variants, of_node(child))
        return variants

    return of_nodes(tree.body), outputs


class _TooManyBranches(Exception):
    pass


def _placeholder_offsets(source: str) -> list[int]:
    import re

    return [m.start() for m in re.finditer(r"\{\{", source)]


def _shell_problems(source: str, tree: nodes.Template) -> list[TemplateProblem]:
    from .shell_context import unsafe_placeholders

    problems = []
    for node_type, tag in _FORBIDDEN_IN_SHELL.items():
        for node in tree.find_all(node_type):
            problems.append(
                TemplateProblem(
                    _offset_of_line(source, node.lineno),
                    f"{tag} is not allowed in a run command: it can change values after "
                    "they were quoted; compute the value in a plain {{ }} instead",
                )
            )
    if "\0" in source:
        problems.append(TemplateProblem(source.index("\0"), "a command may not contain NUL"))
    private = next((i for i, c in enumerate(source) if 0xE000 <= ord(c) <= 0xF8FF), None)
    if private is not None:
        problems.append(
            TemplateProblem(private, "a command may not contain private-use characters")
        )
    if problems:
        return problems
    try:
        skeletons, outputs = shell_skeletons(tree)
    except _TooManyBranches:
        return [
            TemplateProblem(
                0,
                f"more than {MAX_SKELETONS} if/for combinations to check; "
                "split the command into several steps",
            )
        ]
    if len(outputs) > 0xF8FF - 0xE000:
        return [TemplateProblem(0, "too many {{ }} in one command")]
    offsets = _placeholder_offsets(source)
    reported: set[int] = set()
    for skeleton in skeletons:
        for unsafe in unsafe_placeholders(skeleton):
            if unsafe.index in reported:
                continue
            reported.add(unsafe.index)
            if len(offsets) == len(outputs):
                offset = offsets[unsafe.index]
            else:  # {{ inside raw blocks shifts the count: fall back to the line
                offset = _offset_of_line(source, outputs[unsafe.index].lineno)
            problems.append(TemplateProblem(offset, unsafe.message))
    return sorted(problems, key=lambda p: p.offset)


def compile_template(
    source: str,
    *,
    shell: bool,
    fields_by_name: Mapping[str, frozenset[str] | None],
) -> tuple[Template | None, list[TemplateProblem]]:
    """Compile ``source`` and check the names it uses.

    ``fields_by_name`` maps each usable name to the fields its schema declares
    (None: any field).  Returns the template (None on a syntax error) and the
    problems found.
    """
    if not any(marker in source for marker in ("{{", "{%", "{#")):
        # Plain text: nothing to check or compile (most step fields are like this).
        return Template(source, shell, frozenset()), []
    environment = _SHELL if shell else _TEXT
    try:
        tree = environment.parse(source)
    except TemplateSyntaxError as exc:
        return None, [
            TemplateProblem(_offset_of_line(source, exc.lineno), f"template syntax: {exc.message}")
        ]
    problems: list[TemplateProblem] = [
        TemplateProblem(
            _offset_of_line(source, line),
            f"templates may not use {what}: it reaches outside the template sandbox",
        )
        for line, what in _unsafe_access(tree)
    ]
    names = frozenset(meta.find_undeclared_variables(tree))
    known = set(fields_by_name) | BUILTIN_NAMES
    for name in sorted(names - known):
        if name == "secrets":
            problems.append(
                TemplateProblem(
                    _name_offset(source, name),
                    "secrets are never templated into text; give the step "
                    "`secrets: {ENV_NAME: secret}` and use $ENV_NAME in the command",
                )
            )
            continue
        declared = ", ".join(sorted(fields_by_name)) or "none"
        problems.append(
            TemplateProblem(
                _name_offset(source, name),
                f"undeclared name {name!r} (declared inputs: {declared}; "
                "give an input `as: name` to use it here)",
            )
        )
    for node in tree.find_all(nodes.Getattr):
        if isinstance(node.node, nodes.Name) and node.node.ctx == "load":
            fields = fields_by_name.get(node.node.name)
            if fields is not None and node.attr not in fields:
                problems.append(
                    TemplateProblem(
                        _name_offset(source, f"{node.node.name}.{node.attr}"),
                        f"input {node.node.name!r} has no field {node.attr!r} "
                        f"(its schema declares: {', '.join(sorted(fields)) or 'none'})",
                    )
                )
    if shell:
        problems.extend(_shell_problems(source, tree))
    if problems:
        return None, sorted(problems, key=lambda p: p.offset)
    return Template(source, shell, names, tree), []
