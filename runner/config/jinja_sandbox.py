"""The Jinja2 environment templates render in: sandboxed, strict, guarded.

``_StrictSandbox`` closes the classic ways out of a Jinja sandbox
(``FORBIDDEN_ATTRIBUTES``); ``guard_outputs`` wraps each ``{{ }}`` that reads
a ``no_leading_option`` or secret input in a filter that checks (or
registers) the exact word it prints.  ``_SHELL`` renders ``run`` commands
through sentinels, ``_TEXT`` everything else.  Split from ``templates``
(issue 27), which re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from jinja2 import StrictUndefined, nodes, pass_context
from jinja2.sandbox import SandboxedEnvironment

from ..engine.inputs import OPTION_STARTS
from .template_values import (
    Fields,
    OptionLikeValueError,
    TemplateSecurityError,
    UnsafeTemplateError,
    _scalar_text,
    _sentinel_word,
    _text,
)

if TYPE_CHECKING:
    from .templates import Template

#: Attributes no template may touch: the classic ways out of a Jinja sandbox.
FORBIDDEN_ATTRIBUTES = frozenset({"mro", "format", "format_map", "__class__", "__subclasses__"})


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

            lines = [each.strip() for each in text.splitlines() if each.strip()]
            if any(len(each) < 3 for each in lines):
                # also one word under 3 characters: a loop over a secret's
                # characters or a slice of it (review 22's I6)
                # output is scrubbed a line at a time: `| list | join("\n")`
                # prints a secret a character a line (review 21's H7)
                raise UnsafeTemplateError(
                    f"the {{{{ }}}} on line {line} prints a word (or a line) of a secret input "
                    "too short to mask (under 3 characters); the value is not shown"
                )
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
    ``{% for %}`` took from it (``loop`` too, inside any ``{% for %}``);
    ``inputs[...]`` with a computed key reads every input.  ``options=False``
    (``write`` content: data, not an argument) skips the option check but
    still registers secrets.  Called once the template passed every check
    (the guard filter is outside the allow-list).
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

    # What an {% if %} (or a loop's filter, or what a loop runs over) decides
    # on a secret prints the secret as surely as {{ }} does: {% if c == 'a'
    # %}{{ 'a' }}, a decoder written in the template (review 26's B1d), and
    # so does a {% set %} under it (review 28's B1f).  Secret guards only.
    def deciding() -> dict[int, set[InputGuard]]:
        found: dict[int, set[InputGuard]] = {}

        def walk(node: nodes.Node, carried: set[InputGuard]) -> None:
            found[id(node)] = carried
            deciders = [node.test] if isinstance(node, nodes.If | nodes.For) else []
            if isinstance(node, nodes.For):  # how often it loops, and its else (27's B1e)
                deciders.append(node.iter)
            for test in deciders:
                if test is not None:
                    secret = {g._replace(options=False) for g in guards_of(test) if g.secret}
                    carried = carried | secret
            for child in node.iter_child_nodes():
                walk(child, carried)

        walk(tree, set())
        return found

    changed = True
    while changed:  # until every set/for variable carries all its guards
        changed = False
        decided = deciding()
        for node in tree.find_all((nodes.Assign, nodes.For)):
            source = node.node if isinstance(node, nodes.Assign) else node.iter
            carried = guards_of(source) | decided[id(node)]
            targets = [node.target, *node.target.find_all(nodes.Name)]
            if isinstance(node, nodes.For):
                # Jinja's own ``loop`` holds the iterable's items too
                # (``loop.previtem``, ``loop.nextitem``: review 25's B1).
                targets.append(nodes.Name("loop", "store"))
            for target in targets:
                if not isinstance(target, nodes.Name):
                    continue
                known = derived.setdefault(target.name, set())
                if not carried <= known:
                    known.update(carried)
                    changed = True
    decided = deciding()
    # A Jinja error names what it looked up: a key read from a secret too
    # (review 27's S2); Template.render hides it then.
    read = [g for name in tree.find_all(nodes.Name) for g in guards_of(name)]
    template.touches_secret = any(g.secret for g in read)
    template.touches_option_guard = options and any(g.options for g in read)
    # The template's own text in a branch a secret chooses, or in a loop a
    # secret decides how often to run, says which way it went (a decoder
    # with no {{ }}: review 29's B1g; a space a time, a count of loops: 30's
    # B1h, B1i); compile_base refuses it.
    template.secret_chosen_text = next(
        (
            child.lineno
            for output in tree.find_all(nodes.Output)
            if decided[id(output)]
            for child in output.nodes
            if isinstance(child, nodes.TemplateData) and child.data
        ),
        None,
    )
    for output in tree.find_all(nodes.Output):
        for index, child in enumerate(output.nodes):
            if isinstance(child, nodes.TemplateData):
                continue
            found = guards_of(child) | decided[id(output)]
            labels = tuple(sorted({g.label for g in found if g.options})) if options else ()
            secret = any(g.secret for g in found)
            if not labels and not secret:
                continue
            template.reads_secret |= secret
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
