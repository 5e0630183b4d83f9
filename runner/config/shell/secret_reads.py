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
    pipeline and redirects, whose text holds one of ``sentinels``."""
    tree = Tree(script.encode("utf-8"))
    found: list[str] = []
    seen: set[int] = set()
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
        for part in tree.subtree(unit):
            if part.type in _WORDS and tree.parent(part).type not in _WORDS:
                fixed = tree.static(part)
                if fixed is not None:
                    found.append(fixed)
    return found
