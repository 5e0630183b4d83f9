"""Template text a value chooses or repeats: a decoder written in Jinja.

``{% for c in x.v %}{% if c == '$' %}${% elif c == '(' %}(...{% endif %}{% endfor %}``
prints no value: it spells the value out in the template's own text, which
every check read as the author's code, so ``$(cmd)`` in the value ran
(review 31's C1).  Telling a test on a part of a value from a test on the
whole does not hold: ``('3=$') in x.v`` with ``loop.index``, ``(x.n *
p)|int is odd`` and an input named ``loop`` all spelled a value out
(review 32).  So the rule is on what decides, not on how it reads:

- **Chosen**: in a ``run`` command and a host path, the template's own text
  may not sit under an ``{% if %}`` (any branch), a loop's ``if`` filter or
  a loop's ``{% else %}`` whose test reads a value at all: an input, a
  ``{% set %}`` or ``{% for %}`` variable made from one (or set under such a
  test), or ``loop`` of a loop over one (its counters count the value).
  Nor under a loop whose iterable *decides* on a value (``{% for _ in ([1]
  if c == '$' else []) %}`` is an ``if``).  Decide in the shell instead
  (``if [ {{ x.mode }} = release ]; then``), where the value stays a quoted
  word, or print the choice with ``{{ 'a' if ... else 'b' }}``, which is a
  value and quoted.
- **Repeated**: the body of a loop over a value repeats the author's text
  once per item (``{% for f in x.files %}cp -- {{ f }} out/; {% endfor %}``,
  the way to take a list), but how often is the value's to say: ``+1`` once
  per character, turned into a letter by bash and run with ``bash -c``
  (review 32's F5).  Such a template is *shaped* by a value: its script is
  checked as one that holds a value even when it prints none (no shell or
  interpreter runs in it, no command name is computed), so a count stays
  data.  A host path may not repeat its text at all.

Calls are refused in ``run`` already (``template_checks``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from jinja2 import nodes

#: What ``runner validate`` says of text a value chooses.
CHOSEN_TEXT = (
    "the template's own text in an {% if %} (or a loop's if, or its else) that a value "
    "decides: a value could spell itself out as code, one branch per character; decide "
    "in the shell, where the value stays one quoted word (if [ {{ x.mode }} = release ]; "
    "then ...), or print the choice with {{ 'a' if ... else 'b' }}, which is quoted"
)

#: ... and of a host path that repeats its text once per item of a value.
REPEATED_PATH = (
    "a host path may not repeat its own text once per item of a value ({% for %} over an "
    "input): the value would choose how many folders deep (or how many ..) it goes; "
    "print the value with {{ }} instead"
)


#: Filters after which a loop over a value still runs once per item.
COUNT_KEEPING_FILTERS = frozenset({"list", "sort", "default", "d"})


class ValueText(NamedTuple):
    """``chosen``: the line of the first text a value chooses, or None;
    ``shaped``: some text is repeated once per item of a value."""

    chosen: int | None
    shaped: bool


def value_text(tree: nodes.Template, values: Collection[str]) -> ValueText:
    """How the values of ``values`` (the names that hold them: the inputs a
    template reads, ``loop`` too when an input is named so; ``session`` is
    the runner's, not a value) choose or repeat the text of ``tree``."""
    holding = set(values)
    loops: dict[int, nodes.For | None] = {}  # node -> the innermost loop it runs in

    def place(node: nodes.Node, loop: nodes.For | None) -> None:
        loops[id(node)] = loop
        for child in node.iter_child_nodes():
            # A loop's iterable and its if filter see the enclosing loop's
            # ``loop`` (Jinja 3.1: review 33's J2 read ``loop.nextitem`` there).
            inside = isinstance(node, nodes.For) and child is not node.iter
            inside = inside and child is not node.test  # type: ignore[attr-defined]
            place(child, node if inside else loop)  # type: ignore[arg-type]

    place(tree, None)

    def reads(node: nodes.Node) -> bool:
        """Does ``node`` read a value (a name holding one, or ``loop`` of a
        loop over one)?"""
        for name in [node, *node.find_all(nodes.Name)]:
            if not isinstance(name, nodes.Name) or name.ctx != "load":
                continue
            if name.name in holding:
                return True
            if name.name == "loop":
                loop = loops.get(id(name))
                if loop is not None and reads(loop.iter):
                    return True
        return False

    def plain(node: nodes.Node) -> bool:
        """Is ``node`` a value itself, or a field of one, sorted or made a
        list, with no value in its keys, bounds or filter arguments (or a
        list written out, whose length is the author's)?"""
        if isinstance(node, nodes.Name):
            return reads(node)
        if isinstance(node, nodes.List | nodes.Tuple):
            return True  # as many items as written, whatever they hold
        if isinstance(node, nodes.Getattr):
            return plain(node.node)
        if isinstance(node, nodes.Getitem):
            return plain(node.node) and not reads(node.arg)
        if isinstance(node, nodes.Filter) and node.node is not None:
            if node.name not in COUNT_KEEPING_FILTERS:
                return False  # |replace('$', 'XY'): how long says what it held (34's J1)
            rest = [c for c in node.iter_child_nodes() if c is not node.node]
            return plain(node.node) and not any(reads(c) for c in rest)
        return False

    def decides(node: nodes.Node) -> bool:
        """Does a loop over ``node`` decide on a value, rather than repeat
        once per item of one?  A value anywhere but at its root (``[1][c|
        length:]``, ``x.v|replace(c, '')``: review 33's J1) or in a test
        (``[1] if c == '$' else []``) decides how often, which is an if."""
        return reads(node) and not plain(node)

    def walk(node: nodes.Node, decided: bool, found: dict[int, bool]) -> None:
        found[id(node)] = decided
        if isinstance(node, nodes.If):
            tests = [node.test, *(branch.test for branch in node.elif_)]
            decided = decided or any(reads(test) for test in tests)
        for child in node.iter_child_nodes():
            if isinstance(node, nodes.For) and child is not node.iter:
                filtered = node.test is not None and reads(node.test)
                empty = any(child is e for e in node.else_) and reads(node.iter)
                walk(child, decided or filtered or empty or decides(node.iter), found)
            else:
                walk(child, decided, found)

    def chosen() -> dict[int, bool]:
        found: dict[int, bool] = {}
        walk(tree, False, found)
        return found

    changed = True
    while changed:  # until every set and loop variable made from a value holds one
        changed = False
        decided = chosen()
        for node in tree.find_all((nodes.Assign, nodes.For)):
            source = node.node if isinstance(node, nodes.Assign) else node.iter  # type: ignore[attr-defined]
            if not (decided[id(node)] or reads(source)):
                continue
            target: nodes.Node = node.target  # type: ignore[attr-defined]
            for name in [target, *target.find_all(nodes.Name)]:
                if isinstance(name, nodes.Name) and name.name not in holding:
                    holding.add(name.name)
                    changed = True
    decided = chosen()
    texts = [
        (output, child)
        for output in tree.find_all(nodes.Output)
        for child in output.nodes
        if isinstance(child, nodes.TemplateData) and child.data
    ]
    line = next((child.lineno for output, child in texts if decided[id(output)]), None)

    def repeated(node: nodes.Node) -> bool:
        """Does ``node`` run once per item of a value (in any loop around it)?"""
        loop = loops.get(id(node))
        while loop is not None:
            if reads(loop.iter):
                return True
            loop = loops.get(id(loop))
        return False

    shaped = any(repeated(output) for output, _child in texts)
    return ValueText(line, shaped)
