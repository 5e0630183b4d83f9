"""Jinja2 templates for hook steps, compiled once, rendered per session.

Two flavours share one ``SandboxedEnvironment`` setup with ``StrictUndefined``:

- ``shell``: for ``run`` steps.  Jinja's ``finalize`` prints each ``{{ }}``
  value as a sentinel word; ``Template.render`` checks the exact text with
  ``shell_check`` and then puts each value in as one single-quoted word, so
  an input reaches the shell as one word of data, whatever it holds.  Lists
  and mappings are refused (they are not one word: loop over them), and so
  is NUL.
- ``text``: for ``write`` content, ``env`` values and paths: values are
  inserted as they are (NUL still refused).

Names a template uses are checked when the file is compiled: an undeclared
name, or a field its input's schema does not declare, is a validation error
before any session starts.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from jinja2 import StrictUndefined, TemplateSyntaxError, meta, nodes, pass_context
from jinja2.sandbox import SandboxedEnvironment

from ..core.errors import AgentsError
from ..engine.inputs import OPTION_STARTS

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
    if isinstance(value, int | float):
        text = str(value)
    elif isinstance(value, str):
        # str.__str__ turns a Markup (|safe, |tojson) into a plain str: Markup's
        # own methods would HTML-escape the quoting added below.
        text = str.__str__(value)
    else:
        raise TemplateValueError(
            f"a {type(value).__name__} value cannot be inserted as one shell word; "
            "loop over it ({% for item in ... %}{{ item }} {% endfor %}) or pick a field"
        )
    if "\0" in text:
        raise TemplateValueError("a value contains a NUL character, which no command can take")
    return text


def shell_word(value: Any) -> str:
    """``value`` as one single-quoted shell word, always quoted.

    Unlike ``shlex.quote``, a plain value is quoted too, so every value is
    the same kind of token the checker saw as its sentinel (``'…'``): bash
    reads it as literal text wherever the checker allowed it.
    """
    return "'" + _scalar_text(value).replace("'", "'\"'\"'") + "'"


class _RenderedValues:
    """The values one render of a ``run`` template printed, behind sentinels.

    Each ``{{ }}`` prints a sentinel ``'RV<nonce>x<i>'`` (a single-quoted word
    no template or value can contain: the nonce is random per render); the
    checker judges the text with sentinels, then ``substitute`` puts the
    quoted values in, in one pass.
    """

    __slots__ = ("nonce", "quoted")

    def __init__(self) -> None:
        self.nonce = os.urandom(8).hex()
        self.quoted: list[str] = []

    def add(self, value: Any) -> str:
        self.quoted.append(shell_word(value))
        return self.sentinel(len(self.quoted) - 1)

    def sentinel(self, index: int) -> str:
        return f"'RV{self.nonce}x{index}'"

    @property
    def sentinels(self) -> list[str]:
        return [self.sentinel(i) for i in range(len(self.quoted))]

    def _pattern(self) -> Any:
        import re

        return re.compile(rf"'RV{self.nonce}x([0-9]+)'")

    def all_present(self, text: str) -> bool:
        """Is every sentinel still in ``text``?  One scan, not one per value."""
        found = {int(index) for index in self._pattern().findall(text)}
        return len(found) == len(self.quoted)

    def substitute(self, text: str) -> str:
        return self._pattern().sub(lambda m: self.quoted[int(m.group(1))], text)


_RENDERING: ContextVar[_RenderedValues | None] = ContextVar("runner_rendering", default=None)


@pass_context
def _sentinel_word(context: Any, value: Any) -> str:
    # pass_context keeps Jinja from finalizing constants at compile time,
    # so every value, constant or not, passes here at render time.
    values = _RENDERING.get()
    if values is None:  # rendered outside Template.render: never print a raw value
        raise TemplateSecurityError("run templates render only through Template.render")
    return values.add(value)


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

    def wrap_str_format(self, value: Any) -> None:
        # Jinja (3.1.5+) hands out str.format and str.format_map wrapped in its
        # sandboxed formatter before it asks is_safe_attribute; here they are
        # refused like every FORBIDDEN_ATTRIBUTES name, through ., [] and |attr.
        return None

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
        # The ignore: a node that is no Getattr here is a Getitem, which mypy cannot tell.
        name = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)  # type: ignore[attr-defined]
        if isinstance(name, str) and (name.startswith("_") or name in FORBIDDEN_ATTRIBUTES):
            found.append((node.lineno, repr(name)))
    return found


#: The private filter ``guard_outputs`` wraps a ``{{ }}`` in: a name the Jinja
#: lexer cannot produce, so no template can call it, or know it is there.
GUARD_FILTER = "runner:guard"
#: A render context holding this key is a preview with secrets masked (progress
#: titles, ``runner render``): its words are not secrets to register.
MASKED_CONTEXT = "runner:masked"


class InputGuard(NamedTuple):
    """What the words read from one input must obey: ``label`` names it in
    errors; ``options``: no word may start like an option (``no_leading_option``);
    ``secret``: every word is a secret to scrub (``secret: true``)."""

    label: str
    options: bool
    secret: bool


def _guard_filter(as_text: Any) -> Any:
    """The guard of one environment: ``as_text`` is how its finalize turns a value
    into the text it prints, so the guard judges exactly that text."""

    @pass_context
    def guard(context: Any, value: Any, options: tuple[str, ...], secret: bool, line: int) -> Any:
        text = as_text(value)
        if options and text.startswith(OPTION_STARTS):
            raise OptionLikeValueError(
                f"the {{{{ }}}} on line {line} prints a word read from input "
                f"{' and '.join(options)}, which is declared no_leading_option, and that word "
                f"starts with {text[0]!r} (after the template's filters): a program could read "
                "it as an option; the value is not shown"
            )
        if secret and not context.get(MASKED_CONTEXT):
            from ..core.events import add_secrets
            from ..core.redaction import secret_text_forms

            add_secrets(secret_text_forms(text))
        return value

    return guard


def guard_outputs(
    template: Template | None,
    by_name: Mapping[str, InputGuard],
    by_input_id: Mapping[str, InputGuard],
    *,
    options: bool = True,
) -> None:
    """Wrap every ``{{ }}`` of ``template`` that reads a guarded input in the guard
    filter, which sees the exact word printed, after the template's own filters.

    ``by_name`` maps the names templates use (aliases) to their input's guard,
    ``by_input_id`` the ids ``inputs['...']`` takes.  A ``{{ }}`` reads an input
    when its expression names it, or names a variable a ``{% set %}`` or a
    ``{% for %}`` took from it; ``inputs[...]`` with a computed key reads every
    input.  ``options=False`` (``write`` content: data, not an argument) skips the
    option check but still registers secrets.  Called once the template passed
    every check (the guard filter is outside the allow-list).
    """
    if template is None or template.tree is None or not (by_name or by_input_id):
        return
    tree = template.tree
    derived: dict[str, set[InputGuard]] = {}  # a set/for variable -> the guards it carries

    def guards_of(node: nodes.Node) -> set[InputGuard]:
        found: set[InputGuard] = set()
        for name in [node, *node.find_all(nodes.Name)]:
            if not isinstance(name, nodes.Name) or name.ctx != "load":
                continue
            if name.name in by_name:
                found.add(by_name[name.name])
            found |= derived.get(name.name, set())
            if name.name == "inputs" and by_input_id:
                found |= _inputs_read(node, name, by_input_id)
        return found

    changed = True
    while changed:  # until every set/for variable carries all its guards
        changed = False
        for node in tree.find_all((nodes.Assign, nodes.For)):
            source = node.node if isinstance(node, nodes.Assign) else node.iter
            carried = guards_of(source)
            for target in [node.target, *node.target.find_all(nodes.Name)]:
                if not isinstance(target, nodes.Name):
                    continue
                known = derived.setdefault(target.name, set())
                if not carried <= known:
                    known.update(carried)
                    changed = True
    for output in tree.find_all(nodes.Output):
        for index, child in enumerate(output.nodes):
            if isinstance(child, nodes.TemplateData):
                continue
            found = guards_of(child)
            labels = tuple(sorted({g.label for g in found if g.options})) if options else ()
            secret = any(g.secret for g in found)
            if not labels and not secret:
                continue
            line = child.lineno
            output.nodes[index] = nodes.Filter(
                child,
                GUARD_FILTER,
                [nodes.Const(labels), nodes.Const(secret), nodes.Const(line)],
                [],
                None,
                None,
                lineno=line,
            )
    template._compiled = None  # compiled on the next render, with the guards


def _inputs_read(
    expression: nodes.Node, name: nodes.Name, by_input_id: Mapping[str, InputGuard]
) -> set[InputGuard]:
    """The guards of the inputs ``inputs`` (the node ``name``) is indexed with
    in ``expression``: ``inputs['id']`` or ``inputs.id`` reads that one input;
    any other use of ``inputs`` (a computed key, a loop over it) reads them all."""
    for node in [expression, *expression.find_all((nodes.Getitem, nodes.Getattr))]:
        if isinstance(node, nodes.Getitem | nodes.Getattr) and node.node is name:
            key = node.attr if isinstance(node, nodes.Getattr) else node.arg
            if isinstance(key, nodes.Const):
                key = key.value
            if isinstance(key, str):
                return {by_input_id[key]} if key in by_input_id else set()
    return set(by_input_id.values())


_SHELL = _environment(_sentinel_word)
_TEXT = _environment(_text)
# The guard each {{ }} that reads a flagged input is wrapped in (guard_outputs).
_SHELL.filters[GUARD_FILTER] = _guard_filter(_scalar_text)
_TEXT.filters[GUARD_FILTER] = _guard_filter(_text)


class UnsafeTemplateError(TemplateSecurityError):
    """A rendered ``run`` command puts a value where bash would not read it as data.

    Raised before the command runs; the message names each position and its
    fix, never a value.
    """


class OptionLikeValueError(UnsafeTemplateError):
    """A word read from a ``no_leading_option`` input would reach its program
    starting with ``-`` or ``+``, once the template's filters ran.  Raised before
    the step runs; the message names the input, never the value."""


class TemplateProblem(NamedTuple):
    """A problem found in a template, at an offset of its source."""

    offset: int
    message: str


class Template:
    """One checked template and the names it reads.

    ``tree`` is the parsed template; it is compiled to Python on first
    render, once, so that validating a large file pays only for parsing.
    A template without Jinja markup has no tree and renders as itself.
    ``tainted`` (run commands only) names environment variables that hold a
    value, whose uses the run-time check follows too; ``consumers`` (None:
    the default mode) the only programs that may receive a value.
    """

    __slots__ = ("_compiled", "consumers", "names", "shell", "source", "tainted", "tree")

    def __init__(
        self,
        source: str,
        shell: bool,
        names: frozenset[str],
        tree: Any = None,
        tainted: frozenset[str] = frozenset(),
        consumers: frozenset[str] | None = None,
    ) -> None:
        self.source = source
        self.shell = shell
        self.names = names
        self.tree = tree
        self.tainted = tainted
        self.consumers = consumers
        self._compiled: Any = None

    @property
    def is_static(self) -> bool:
        return self.tree is None

    def render(self, context: Mapping[str, Any], *, shell: str | None = None) -> str:
        """The text to run.  For a ``run`` command this is the guarantee:
        the exact text is checked with sentinels before any value goes in,
        as the shell that runs it (``shell``: its path or name; None: bash)
        reads it."""
        if self.tree is None:
            if self.shell and self.tainted:
                _refuse_unsafe(self.source, [], self.tainted, shell, self.consumers)
            return self.source
        if self._compiled is None:
            environment = _SHELL if self.shell else _TEXT
            self._compiled = environment.from_string(self.tree)
        if not self.shell:
            return self._compiled.render(**context)
        values = _RenderedValues()
        token = _RENDERING.set(values)
        try:
            text = self._compiled.render(**context)
        finally:
            _RENDERING.reset(token)
        sentinels = values.sentinels
        if not values.all_present(text):
            # A value was printed, then rewritten (an escaping or filtering tag):
            # the command would not hold the value the check saw.
            raise UnsafeTemplateError(
                "run command refused before it ran: a value was changed after it was quoted "
                "(a Jinja tag that filters or escapes output); use plain {{ }}"
            )
        _refuse_unsafe(text, sentinels, self.tainted, shell, self.consumers)
        return values.substitute(text)


def _refuse_unsafe(
    text: str,
    sentinels: list[str],
    tainted: Collection[str],
    shell: str | None = None,
    consumers: Collection[str] | None = None,
) -> None:
    from .shell.checker import check_script

    findings = check_script(text, sentinels, tainted, shell=shell, consumers=consumers)
    if findings:
        where = "; ".join(
            f"line {f.line}, column {f.column}"
            + (f" (value {f.index + 1})" if f.index is not None else "")
            + f": {f.message}"
            for f in findings
        )
        raise UnsafeTemplateError(f"run command refused before it ran: {where}")


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


#: The Jinja of a ``run`` command is an allow-list too: these nodes, filters
#: and tests only.  Everything else (autoescape, filter blocks, macros, call,
#: block set, include, calls of methods...) could rewrite a value after it was
#: quoted or print text the check never saw.
_ALLOWED_NODES = (
    nodes.Template,
    nodes.Output,
    nodes.TemplateData,
    nodes.If,
    nodes.For,
    nodes.Assign,
    nodes.Name,
    nodes.Const,
    nodes.Getattr,
    nodes.Getitem,
    nodes.Slice,
    nodes.Filter,
    nodes.Test,
    nodes.Compare,
    nodes.Operand,
    nodes.And,
    nodes.Or,
    nodes.Not,
    nodes.Neg,
    nodes.Pos,
    nodes.CondExpr,
    nodes.Concat,
    nodes.List,
    nodes.Tuple,
    nodes.Keyword,
    nodes.Add,
    nodes.Sub,
    nodes.Mul,
    nodes.Div,
    nodes.FloorDiv,
    nodes.Mod,
)
ALLOWED_FILTERS = frozenset(
    [
        "join",
        "default",
        "d",
        "length",
        "count",
        "lower",
        "upper",
        "trim",
        "first",
        "last",
        "string",
        "int",
        "float",
        "replace",
        "sort",
        "unique",
        "list",
    ]
)
ALLOWED_TESTS = frozenset(
    [
        "defined",
        "undefined",
        "none",
        "true",
        "false",
        "boolean",
        "string",
        "number",
        "integer",
        "float",
        "sequence",
        "mapping",
        "in",
        "eq",
        "ne",
        "equalto",
        "lt",
        "gt",
        "le",
        "ge",
        "even",
        "odd",
    ]
)
_TAGS = {
    nodes.FilterBlock: "{% filter %}",
    nodes.Macro: "{% macro %}",
    nodes.CallBlock: "{% call %}",
    nodes.AssignBlock: "{% set %}...{% endset %}",
    nodes.Include: "{% include %}",
    nodes.Import: "{% import %}",
    nodes.FromImport: "{% from ... import %}",
    nodes.Extends: "{% extends %}",
    nodes.Block: "{% block %}",
    nodes.ScopedEvalContextModifier: "{% autoescape %}",
    nodes.EvalContextModifier: "{% autoescape %}",
    nodes.With: "{% with %}",
    nodes.Call: "a call",
    nodes.Scope: "{% autoescape %} or {% with %}",
}


def _jinja_problems(source: str, tree: nodes.Template) -> list[TemplateProblem]:
    problems = []
    refused_lines: set[int] = set()
    for node in tree.find_all(nodes.Node):
        where = _offset_of_line(source, getattr(node, "lineno", None) or 1)
        if not isinstance(node, _ALLOWED_NODES):
            if where in refused_lines:  # one refused tag per line is enough
                continue
            refused_lines.add(where)
            what = next((tag for kind, tag in _TAGS.items() if isinstance(node, kind)), None)
            what = what or type(node).__name__
            problems.append(
                TemplateProblem(
                    where,
                    f"{what} is not allowed in a run command (allowed: if, for, "
                    "set NAME = expression, and the filters "
                    f"{', '.join(sorted(ALLOWED_FILTERS))}): "
                    "compute the value in a plain {{ }}",
                )
            )
        elif isinstance(node, nodes.Filter) and node.name not in ALLOWED_FILTERS:
            problems.append(
                TemplateProblem(
                    where,
                    f"the filter |{node.name} is not allowed in a run command "
                    f"(allowed: {', '.join(sorted(ALLOWED_FILTERS))})",
                )
            )
        elif isinstance(node, nodes.Test) and node.name not in ALLOWED_TESTS:
            problems.append(
                TemplateProblem(where, f"the test 'is {node.name}' is not allowed in a run command")
            )
        elif isinstance(node, nodes.TemplateData) and ("{{" in node.data or "{%" in node.data):
            problems.append(
                TemplateProblem(
                    where,
                    "{% raw %} around {{ }} or {% %} is not allowed in a run command: "
                    "the shell would get the braces, not a value",
                )
            )
    return problems


#: More branch combinations than this and a run template is refused.
MAX_SKELETONS = 256


def shell_skeletons(tree: nodes.Template, sentinel: Any) -> tuple[list[str], list[nodes.Node]]:
    """Every text a template can print, with ``sentinel(i)`` where ``{{ }}`` number i prints.

    Built from the parse tree, so Jinja syntax (string literals, raw blocks,
    comments) cannot disguise what the shell will read.  Each branch of an
    ``if`` is a separate variant, and a loop body appears 0, 1 and 2 times.
    This is the early, static check of ``runner validate``; the guarantee is
    the check of the exact text in ``Template.render``.
    """
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
                    parts.append(sentinel(len(outputs)))
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
        for child_node in node.iter_child_nodes():
            if isinstance(child_node, nodes.Stmt | nodes.Output):
                variants = combine(variants, of_node(child_node))
        return variants

    return of_nodes(tree.body), outputs


class _TooManyBranches(Exception):
    pass


def _placeholder_offsets(source: str) -> list[int]:
    import re

    return [m.start() for m in re.finditer(r"\{\{", source)]


def _shell_problems(
    source: str,
    tree: nodes.Template | None,
    tainted: frozenset[str],
    shell_name: str | None = None,
    consumers: frozenset[str] | None = None,
) -> list[TemplateProblem]:
    """The early check of ``runner validate``: every if/for combination, parsed."""
    from functools import partial

    from .shell.checker import check_script as check

    check_script = partial(check, shell=shell_name, consumers=consumers)
    if tree is None:
        findings = check_script(source, [], tainted)
        return [
            TemplateProblem(_offset_of_line(source, f.line) + f.column - 1, f.message)
            for f in findings
        ]
    problems = _jinja_problems(source, tree)
    if "\0" in source:
        problems.append(TemplateProblem(source.index("\0"), "a command may not contain NUL"))
    if problems:
        return problems
    sentinel = _RenderedValues().sentinel  # the same words the run-time check uses
    try:
        skeletons, outputs = shell_skeletons(tree, sentinel)
    except _TooManyBranches:
        return [
            TemplateProblem(
                0,
                f"more than {MAX_SKELETONS} if/for combinations to check; "
                "split the command into several steps",
            )
        ]
    sentinels = [sentinel(i) for i in range(len(outputs))]
    offsets = _placeholder_offsets(source)
    results = [check_script(skeleton, sentinels, tainted) for skeleton in skeletons]
    parsed = [r for r in results if not any(f.rule == "syntax" for f in r)]
    if not parsed and results:
        # No combination parses: report the syntax error (one combination
        # that does not parse, among others that do, may be impossible).
        parsed = results[:1]
    problems = []
    reported: set[tuple[int | None, str]] = set()
    for findings in parsed:
        for finding in findings:
            key = (finding.index, finding.rule)
            if key in reported:
                continue
            reported.add(key)
            if finding.index is None:
                offset = _offset_of_line(source, finding.line)
            elif len(offsets) == len(outputs):
                offset = offsets[finding.index]
            else:
                offset = _offset_of_line(source, outputs[finding.index].lineno)
            problems.append(TemplateProblem(offset, finding.message))
    return sorted(problems, key=lambda p: p.offset)


def compile_template(
    source: str,
    *,
    shell: bool,
    fields_by_name: Mapping[str, frozenset[str] | None],
    tainted_env: Collection[str] = (),
    shell_name: str | None = None,
    consumers: Collection[str] | None = None,
) -> tuple[Template | None, list[TemplateProblem]]:
    """Compile ``source`` and check the names it uses.

    ``fields_by_name`` maps each usable name to the fields its schema declares
    (None: any field).  ``tainted_env`` (run commands): environment variables
    of the step whose values are templated; ``shell_name`` the configured
    shell (None: bash, or sh where the image has no bash); ``consumers`` the
    programs of strict mode (None: the default mode).  Returns the template
    (None when there are problems) and the problems found.
    """
    tainted = frozenset(tainted_env) if shell else frozenset()
    strict = frozenset(consumers) if consumers is not None and shell else None
    if not any(marker in source for marker in ("{{", "{%", "{#")):
        # Plain text: nothing to compile (most step fields are like this).
        problems = _shell_problems(source, None, tainted, shell_name, strict) if tainted else []
        if problems:
            return None, problems
        return Template(source, shell, frozenset(), tainted=tainted, consumers=strict), []
    environment = _SHELL if shell else _TEXT
    try:
        tree = environment.parse(source)
    except TemplateSyntaxError as exc:
        return None, [
            TemplateProblem(_offset_of_line(source, exc.lineno), f"template syntax: {exc.message}")
        ]
    problems = [
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
        problems.extend(_shell_problems(source, tree, tainted, shell_name, strict))
    if problems:
        return None, sorted(problems, key=lambda p: p.offset)
    return Template(source, shell, names, tree, tainted, strict), []
