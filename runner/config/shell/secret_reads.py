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

from .tree import Tree

#: Nodes a value's command reaches through: its pipeline, its redirects.
_UNITS = frozenset({"pipeline", "redirected_statement"})
#: Nodes that are one word of a command.
_WORDS = frozenset({"word", "string", "raw_string", "concatenation", "number"})


def fixed_words_beside_values(script: str, sentinels: Collection[str]) -> list[str]:
    """The fixed words (quotes removed) of each command of ``script``, with its
    pipeline and redirects, whose text holds one of ``sentinels``; and of
    the redirects around it (``{ fold -w {{ w }}; } < npmrc.txt``) and of
    every ``exec``'s (``exec 3< npmrc.txt``, then ``<&3``: review 40's F5)."""
    tree = Tree(script.encode("utf-8"))
    found: list[str] = []
    seen: set[int] = set()
    holds_value = False

    def words_of(node: object) -> None:
        for part in tree.subtree(node):
            if part.type in _WORDS and tree.parent(part).type not in _WORDS:
                fixed = tree.static(part)
                if fixed is not None:
                    found.append(fixed)

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
        if not any(sentinel in text for sentinel in sentinels):
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
            name = node.child_by_field_name("name") if node.type == "command" else None
            if name is not None and tree.static(name) == "exec":
                redirected = tree.parent(node)
                if redirected is not None and redirected.type == "redirected_statement":
                    words_of(redirected)
                words_of(node)
    return found
