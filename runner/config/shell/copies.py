"""The files a script copies or links, word by word.

A copy or a link of a secret's file is as secret as the file: ``ln -s
npmrc.txt link.txt``, then ``od -c {{ f }}`` with ``link.txt``, printed the
token past the scrubber (review 23's J4).  The render asks which words a
script's ``cp``, ``ln``, ``link``, ``mv``, ``install`` and ``rsync`` copy
from and to, puts the values in, and counts a destination whose source
names a secret's file as one more such file (``templates``).  Followed:
these programs by name or path, their operands after quote removal.  Not
followed: a copy made any other way (``cat f > g``, a wrapper such as
``env cp``); SECURITY.md says so.
"""

from __future__ import annotations

from .tree import Tree

#: Programs whose last operand is a copy or link of the ones before it.
COPIERS = frozenset({"cp", "ln", "link", "mv", "install", "rsync"})


def copied_words(script: str) -> list[tuple[str, list[str]]]:
    """Each copier command of ``script`` as (destination, sources): the
    words as written (values as their sentinels), options left out."""
    tree = Tree(script.encode("utf-8"))
    found = []
    for node in tree.nodes:
        if node.type != "command":
            continue
        name_node = node.child_by_field_name("name")
        name = tree.static(name_node) if name_node is not None else None
        if name is None or name.rsplit("/", 1)[-1] not in COPIERS:
            continue
        operands: list[str] = []
        options_end = False
        for word in node.children_by_field_name("argument"):
            text = tree.static(word)
            if not options_end and text is not None and text.startswith("-"):
                options_end = text == "--"
                continue
            operands.append(tree.text(word))
        if len(operands) >= 2:
            found.append((operands[-1], operands[:-1]))
    return found
