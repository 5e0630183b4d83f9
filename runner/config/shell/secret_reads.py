"""Which fixed words a command that holds a value names, pipeline and all.

A value may not choose *how* a secret's file is printed either: ``grep -o
{{ key }} npmrc.txt`` with ``[a-z0-9]``, or ``fold -w {{ w }} npmrc.txt``
with ``1``, printed the token a character a line, past the scrubber
(review 24's K7).  The render asks for the fixed words of every command,
pipeline or redirected command that also holds a value, and refuses one
that names a secret's file (``templates``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .proc_paths import UNQUOTED
from .tree import Tree

#: Nodes a value's command reaches through: its pipeline, its redirects.
_UNITS = frozenset({"pipeline", "redirected_statement"})
#: Nodes that are one word of a command.
_WORDS = frozenset({"word", "string", "raw_string", "concatenation", "number"})


def fixed_words_beside_values(script: str, sentinels: Collection[str]) -> list[str]:
    """The fixed words (quotes removed; a glob as written) of each command of
    ``script``, with its pipeline and redirects, that holds one of
    ``sentinels`` or a variable assigned one (``w={{ x }}``, ``q="$w"``); of
    the redirects around it (``{ fold -w {{ w }}; } < npmrc.txt``); of every
    ``exec``'s, behind ``command`` or ``builtin`` too (``exec 3< npmrc.txt``,
    then ``<&3``: reviews 40 and 43); and the texts a variable such a command
    expands was assigned (``f=npmrc.txt``, ``for f in npmrc.txt``)."""
    tree = Tree(script.encode("utf-8"))
    found: list[str] = []
    seen: set[int] = set()
    holds_value = False
    carrying, texts = _assigned(tree, sentinels)

    def words_of(node: Any) -> None:
        for part in tree.subtree(node):
            if part.type in _WORDS and tree.parent(part).type not in _WORDS:
                fixed = tree.static(part)
                if fixed is None and "$" not in tree.text(part):
                    fixed = UNQUOTED.sub("", tree.text(part))  # a glob: *.txt
                if fixed is not None:
                    found.append(fixed)
            elif part.type in ("simple_expansion", "expansion"):
                found.extend(texts.get(_name(tree, part), ()))

    for node in tree.nodes:
        if node.type != "command":
            continue
        unit = node
        parent = tree.parent(unit)
        while parent is not None and parent.type in _UNITS:
            unit, parent = parent, tree.parent(parent)
        if unit.id in seen:
            continue
        seen.add(unit.id)
        text = tree.text(unit)
        if (
            not any(sentinel in text for sentinel in sentinels)
            and not _mentions(tree, unit) & carrying
        ):
            continue
        holds_value = True
        words_of(unit)
        while parent is not None:  # the redirects of every statement around it
            if parent.type == "redirected_statement":
                for redirect in parent.children:
                    if redirect.type.endswith("_redirect"):
                        words_of(redirect)
            parent = tree.parent(parent)
    if holds_value:
        for node in tree.nodes:  # exec's descriptors stay open for the whole script
            if node.type == "command" and _is_exec(tree, node):
                redirected = tree.parent(node)
                if redirected is not None and redirected.type == "redirected_statement":
                    words_of(redirected)
                words_of(node)
    return found


def _mentions(tree: Tree, node: Any) -> set[str]:
    """The variables ``node`` expands."""
    return {
        _name(tree, part)
        for part in tree.subtree(node)
        if part.type in ("simple_expansion", "expansion")
    }


def _name(tree: Tree, expansion: Any) -> str:
    """The variable an expansion (``$f``, ``${f}``, ``${f:-x}``) names."""
    for part in tree.subtree(expansion):
        if part.type == "variable_name":
            return tree.text(part)
    return ""


def _is_exec(tree: Tree, command: Any) -> bool:
    """Is ``command`` an ``exec``, bare or behind ``command``/``builtin``?"""
    words = [tree.static(w) for w in command.named_children]
    words = [w for w in words if w is not None and not w.startswith("-")]
    while words and words[0] in ("command", "builtin"):
        words = words[1:]
    return bool(words) and words[0] == "exec"


def _assigned(tree: Tree, sentinels: Collection[str]) -> tuple[set[str], dict[str, list[str]]]:
    """The variables assigned a value (or another such variable), and the
    fixed texts each variable is assigned (``f=npmrc.txt``, ``for f in a b``)."""
    carrying: set[str] = set()
    texts: dict[str, list[str]] = {}
    pairs: list[tuple[str, Any]] = []
    for node in tree.nodes:
        if node.type == "variable_assignment":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and value is not None:
                pairs.append((tree.text(name), value))
        elif node.type == "for_statement":
            variable = node.child_by_field_name("variable")
            for value in node.children_by_field_name("value"):
                if variable is not None:
                    pairs.append((tree.text(variable), value))
    for name, value in pairs:
        fixed = tree.static(value)
        if fixed is not None:
            texts.setdefault(name, []).append(fixed)
    # each value's text and the variables it expands, once; then to a fixed point
    read = [
        (name, any(s in tree.text(value) for s in sentinels), _mentions(tree, value))
        for name, value in pairs
    ]
    changed = True
    while changed:
        changed = False
        for name, holds, mentions in read:
            if name not in carrying and (holds or mentions & carrying):
                carrying.add(name)
                changed = True
    return carrying, texts
