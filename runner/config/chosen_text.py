"""Template text chosen by a value's parts: a decoder written in Jinja.

``{% for c in x.v %}{% if c == '$' %}${% elif c == '(' %}(...{% endif %}{% endfor %}``
prints no value: it spells the value out in the template's own text, which
every check reads as the author's code, so ``$(cmd)`` in the value ran
(review 31's C1).  What makes such a decoder is a test on a *part* of a
value (a character, an item, a digit) choosing the template's text: one
branch per character, once per position.  A test on a value as a whole
(``{% if x.mode == 'release' %}``, ``{% if x.debug %}``, ``x.n > 3``,
``'lint' in x.checks``) picks one of the texts the author wrote out in full,
and a loop over a value repeats the same text per item; both stay allowed.

So in a ``run`` command and a host path, the template's own text may not
sit under an ``{% if %}`` (any branch of it) or a loop's ``if`` filter
whose test reads a part of a value, nor in the ``{% else %}`` of a loop over
a part (``{% for _ in w[4:5] %}{% else %}`` asks how long ``w`` is).  A
part is: a ``{% for %}`` variable over a value, and that loop's ``loop``
(its items, and its counters too when it runs over a part: ``loop.first
and loop.last`` over ``w[3:5]`` is a test of ``w``'s length; over a value
itself they count it, a whole); an index or a slice (``x.v[0]``; a constant
string key is a field); ``|first``, ``|last``, ``|list``; ``%``, ``//``
and ``/``, which take digits out of a number; and a ``{% set %}`` variable
made from any of these or set under such a test.  The body of a loop over
a part only repeats, and stays allowed.  Calls are refused in ``run``
already (``template_checks``).  A choice printed with ``{{ }}`` (``{{ '$' if
c == 'a' else 'b' }}``) is a value: it is quoted like any other.
"""

from __future__ import annotations

from collections.abc import Collection

from jinja2 import nodes

NONE, WHOLE, PART = 0, 1, 2
#: Filters whose result is a part of what they are given.
PARTING_FILTERS = frozenset({"first", "last", "list"})
#: Arithmetic that takes digits out of a number.
PARTING_ARITHMETIC = (nodes.Mod, nodes.FloorDiv, nodes.Div)
#: ``loop`` attributes that say where a loop is, not what it holds.
LOOP_POSITIONS = frozenset(
    {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0"}
)


def value_chosen_text(tree: nodes.Template, values: Collection[str]) -> int | None:
    """The line of the first text of ``tree`` a test on a part of a value
    chooses, or None.  ``values``: the names that hold values (the inputs a
    template reads; ``session`` is the runner's, not a value)."""
    kinds: dict[str, int] = dict.fromkeys(values, WHOLE)
    kinds.pop("loop", None)  # Jinja's own: resolved against its loop below
    loops: dict[int, nodes.For | None] = {}  # node -> the innermost loop it runs in

    def place(node: nodes.Node, loop: nodes.For | None) -> None:
        loops[id(node)] = loop
        for child in node.iter_child_nodes():
            inside = isinstance(node, nodes.For) and child is not node.iter
            place(child, node if inside else loop)  # type: ignore[arg-type]

    place(tree, None)

    def kind(node: nodes.Node, parting: bool = False) -> int:
        """NONE, WHOLE (reads a value as a whole) or PART (reads a part of one)."""
        if isinstance(node, nodes.Name) and node.name == "loop" and node.ctx == "load":
            return loop_kind(node, None)
        if (
            isinstance(node, nodes.Getattr)
            and isinstance(node.node, nodes.Name)
            and node.node.name == "loop"
        ):
            return loop_kind(node, node.attr)
        if isinstance(node, nodes.Name):
            held = kinds.get(node.name, NONE) if node.ctx == "load" else NONE
            return PART if held and parting else held
        if isinstance(node, nodes.Getitem):
            field = isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str)
            return max(kind(node.node, parting or not field), kind(node.arg, parting))
        if isinstance(node, nodes.Filter) and node.name in PARTING_FILTERS:
            inner = kind(node.node, True) if node.node is not None else NONE
            rest = (kind(c, parting) for c in node.iter_child_nodes() if c is not node.node)
            return max(inner, *rest, NONE)
        parting = parting or isinstance(node, PARTING_ARITHMETIC)
        return max((kind(child, parting) for child in node.iter_child_nodes()), default=NONE)

    def loop_kind(node: nodes.Node, attr: str | None) -> int:
        """``loop`` of the loop ``node`` runs in: its counters read what its
        iterable is (a value's count, or a part's: ``loop.first and
        loop.last`` over ``w[3:5]`` asks whether ``w`` has 4 characters);
        its items (``previtem``, ``nextitem``) are parts of a value."""
        loop = loops.get(id(node))
        over = kind(loop.iter) if loop is not None else NONE
        return over if attr in LOOP_POSITIONS else (PART if over else NONE)

    def chosen() -> dict[int, bool]:
        """For every node: does a test on a part of a value decide whether it runs?"""
        found: dict[int, bool] = {}

        def walk(node: nodes.Node, decided: bool) -> None:
            found[id(node)] = decided
            if isinstance(node, nodes.If):
                tests = [node.test, *(branch.test for branch in node.elif_)]
                decided = decided or any(kind(test) == PART for test in tests)
            for child in node.iter_child_nodes():
                if isinstance(node, nodes.For) and child is not node.iter:
                    # Its filter decides everything in it; how often a part's
                    # items run it decides its else (an empty w[4:5] says how
                    # long w is), not its body, which only repeats.
                    filtered = node.test is not None and kind(node.test) == PART
                    empty = kind(node.iter) == PART and any(child is e for e in node.else_)
                    walk(child, decided or filtered or empty)
                else:
                    walk(child, decided)

        walk(tree, False)
        return found

    changed = True
    while changed:  # until every set and loop variable holds what it may
        changed = False
        decided = chosen()
        for node in tree.find_all((nodes.Assign, nodes.For)):
            target: nodes.Node
            if isinstance(node, nodes.Assign):
                held, target = kind(node.node), node.target
            elif isinstance(node, nodes.For):  # the items of a value are its parts
                held, target = (PART if kind(node.iter) else NONE), node.target
            else:
                continue
            held = PART if decided[id(node)] else held
            targets = [target, *target.find_all(nodes.Name)]
            for name in [t.name for t in targets if isinstance(t, nodes.Name)]:
                if held > kinds.get(name, NONE):
                    kinds[name] = held
                    changed = True
    decided = chosen()
    return next(
        (
            child.lineno
            for output in tree.find_all(nodes.Output)
            if decided[id(output)]
            for child in output.nodes
            if isinstance(child, nodes.TemplateData) and child.data
        ),
        None,
    )
