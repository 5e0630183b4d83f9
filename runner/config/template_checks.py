"""What ``runner validate`` checks in a template before any session.

The Jinja allow-list (``_jinja_problems``: nodes, filters, tests and tags a
``run`` command may use), and the early shell check: every if/for
combination of a ``run`` template rendered with sentinels
(``shell_skeletons``) and judged by the shell checker, each finding placed
at its ``{{ }}``.  Split from ``templates`` (issue 27), which re-exports
every name here.
"""

from __future__ import annotations

from typing import Any

from jinja2 import nodes

from .template_values import TemplateProblem, _RenderedValues


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


#: What a script a value shaped (``chosen_text``) is checked with before its
#: first line: a value given to ``:``, so that the checker treats the script
#: as one that holds a value (no shell, interpreter or computed command name
#: runs in it) even where it prints none.  On the first line, so that the
#: lines the checker reports stay the script's; never run.
SHAPED_MARK = ": {}; "

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
    exported: frozenset[str] = frozenset(),
    *,
    shaped: bool,
) -> list[TemplateProblem]:
    """The early check of ``runner validate``: every if/for combination, parsed
    (``shaped``: each marked as holding a value, as ``Template.render`` does)."""
    from functools import partial

    from .shell.checker import check_script as check

    check_script = partial(check, shell=shell_name, consumers=consumers, exported=exported)
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
    if shaped:
        mark = SHAPED_MARK.format(sentinel(len(outputs)))
        skeletons = [mark + skeleton for skeleton in skeletons]
        sentinels.append(sentinel(len(outputs)))
    results = [check_script(skeleton, sentinels, tainted, shaped=shaped) for skeleton in skeletons]
    parsed = [r for r in results if not any(f.rule == "syntax" for f in r)]
    if not parsed and results:
        # No combination parses: report the syntax error (one combination
        # that does not parse, among others that do, may be impossible).
        parsed = results[:1]
    problems = []
    reported: set[tuple[int | None, str, str]] = set()
    for findings in parsed:
        for finding in findings:
            key = (finding.index, finding.rule, finding.detail)
            if key in reported:
                continue
            reported.add(key)
            if finding.index is None or finding.index >= len(outputs):  # None, or the mark
                offset = _offset_of_line(source, finding.line)
            elif len(offsets) == len(outputs):
                offset = offsets[finding.index]
            else:
                offset = _offset_of_line(source, outputs[finding.index].lineno)
            problems.append(TemplateProblem(offset, finding.message))
    return sorted(problems, key=lambda p: p.offset)


def path_components(source: str, runner_names: frozenset[str]) -> list[tuple[str, str | None]]:
    """The ``/``-separated components of a path template, each with the name
    the template fixes it to, or None.  Fixed: literal text, comments, and
    ``{{ }}`` that look up one of the runner's names whole (``{{ session.id }}``,
    written ``\0`` in the name); not: a ``{% %}``, a ``{% raw %}``, any other
    ``{{ }}`` (a constant ``{{ '.' }}`` too: review 27's A1d).  Cut by Jinja's
    own lexer, so a ``/`` or ``}}`` inside a tag's string is no cut (review
    26's A1c)."""
    from jinja2 import Environment

    environment = Environment()
    stored = {n.name for n in environment.parse(source).find_all(nodes.Name) if n.ctx == "store"}
    if stored & runner_names:  # {% set session = x %}: no longer the runner's (review 28's A1e)
        runner_names = frozenset()
    components: list[list[Any]] = [["", ""]]  # [source text, fixed name or None]
    tag: list[str] | None = None
    for _, kind, value in environment.lex(source):
        if tag is not None:
            tag[1] += value
            if kind.endswith("_end"):
                text = tag[1]
                components[-1][0] += text
                if tag[0] == "variable_begin" and _looks_up(environment, text, runner_names):
                    if components[-1][1] is not None:
                        components[-1][1] += "\0"
                elif tag[0] != "comment_begin":
                    components[-1][1] = None
                tag = None
        elif kind.endswith("_begin"):
            tag = [kind, value]
        else:  # data
            first, *rest = value.split("/")
            components[-1][0] += first
            if components[-1][1] is not None:
                components[-1][1] += first
            components.extend([piece, piece] for piece in rest)
    return [(text, name) for text, name in components]


def _looks_up(environment: Any, tag: str, names: frozenset[str]) -> bool:
    """Is ``tag`` a ``{{ }}`` of one of ``names``' attributes, whole (``session.id``)?"""
    body = environment.parse(tag).body
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
        return False
    node = body[0].nodes[0]
    return (
        isinstance(node, nodes.Getattr)
        and isinstance(node.node, nodes.Name)
        and node.node.name in names
    )


def untracked_constructs(tree: nodes.Template) -> list[tuple[int, str]]:
    """The constructs outside the ``run`` allow-list (``{% with %}``,
    ``{% filter %}``, a block ``{% set %}``, a call such as ``namespace()``),
    with their lines: what ``guard_outputs`` cannot follow a secret through."""
    found = []
    for node in tree.find_all(nodes.Node):
        if not isinstance(node, _ALLOWED_NODES):
            what = next((tag for kind, tag in _TAGS.items() if isinstance(node, kind)), None)
            found.append((getattr(node, "lineno", None) or 1, what or type(node).__name__))
    return found
