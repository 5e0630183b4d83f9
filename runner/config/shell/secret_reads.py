"""Which fixed words a command that holds a value names, pipeline and all.

A value may not choose *how* a secret's file is printed either: ``grep -o
{{ key }} npmrc.txt`` with ``[a-z0-9]``, or ``fold -w {{ w }} npmrc.txt``
with ``1``, printed the token a character a line, past the scrubber
(review 24's K7).  The render asks for the fixed words of every command,
pipeline or redirected command that also holds a value, and refuses one
that names a secret's file (``templates``).
"""

from __future__ import annotations

import posixpath
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

    for unit in _value_units(tree, sentinels, carrying):
        holds_value = True
        words_of(unit)
        parent = tree.parent(unit)
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


#: Programs that read every file under the folders they are given (the
#: working folder when none is): a value beside one chooses how a secret's
#: file in there is printed (review 49's G2: ``grep -rno -- {{ q }} .``
#: with ``.`` printed ``.netrc`` one character a line).
_ALWAYS_RECURSIVE = frozenset({"rg", "ag", "ack", "ack-grep", "tar", "bsdtar", "zip", "cpio"})
#: Programs that do when given a recursive option.
_RECURSIVE_WITH_OPTION = frozenset({"grep", "egrep", "fgrep", "zgrep", "ugrep", "diff", "cp"})
_RECURSIVE_OPTIONS = frozenset(
    {"--recursive", "--dereference-recursive", "--directories=recurse", "--archive"}
    | {"-drecurse", "recurse"}
)
#: Options that name a file listing the files to read (``sort
#: --files0-from=list``): its names are not the command's words.
_FILE_LISTS = ("--files0-from", "--files-from", "-T")


def recursive_reads_beside_values(script: str, sentinels: Collection[str]) -> list[str | None]:
    """The folders read recursively, and the files listed in a file, by a
    command in a pipeline (or redirected command) that holds one of
    ``sentinels`` or a variable assigned one: each folder's fixed text,
    ``"."`` for a recursive reader given none, and None for a folder or a
    list whose files are not known before the script runs."""
    tree = Tree(script.encode("utf-8"))
    carrying, _ = _assigned(tree, sentinels)
    found: list[str | None] = []
    for unit in _value_units(tree, sentinels, carrying):
        for command in (n for n in tree.subtree(unit) if n.type == "command"):
            words = [w for w in command.named_children if tree.field(w) != "redirect"]
            texts = [tree.static(w) for w in words]
            while texts and texts[0] in ("command", "builtin", "exec"):
                words, texts = words[1:], texts[1:]
            name = posixpath.basename(texts[0] or "") if texts else ""
            arguments = [
                (word, text if text is not None else UNQUOTED.sub("", tree.text(word)))
                for word, text in zip(words[1:], texts[1:], strict=True)
                if not (
                    any(s in tree.text(word) for s in sentinels) or _mentions(tree, word) & carrying
                )
            ]  # the value's own words left out: judged with the value in
            options = [t for w, t in arguments if t.startswith("-")]
            if any(t.startswith(_FILE_LISTS) for t in options):
                found.append(None)  # sort --files0-from=list: names no check reads
            recursive = name in _ALWAYS_RECURSIVE or (
                name in _RECURSIVE_WITH_OPTION
                and any(_is_recursive_option(t, name) for t in options)
            )
            if not recursive:
                continue
            operands: list[str | None] = [
                tree.static(w) for w, t in arguments if not t.startswith("-")
            ]
            found.extend(operands or ["."])
    return found


def _is_recursive_option(text: str, program: str) -> bool:
    """Does ``text`` ask ``program`` to read folders recursively (``-r``,
    ``-R``, in a cluster too: ``-rno``; ``cp -a``)?"""
    if text in _RECURSIVE_OPTIONS:
        return True
    letters = "rRa" if program == "cp" else "rR"
    return text[:1] == "-" and text[1:2] != "-" and any(c in letters for c in text[1:])


def _value_units(tree: Tree, sentinels: Collection[str], carrying: set[str]) -> list[Any]:
    """Each pipeline or redirected command (or plain command) that holds a
    value or expands a variable assigned one, once."""
    units: list[Any] = []
    seen: set[int] = set()
    for node in tree.nodes:
        if node.type != "command":
            continue
        unit, parent = node, tree.parent(node)
        while parent is not None and parent.type in _UNITS:
            unit, parent = parent, tree.parent(parent)
        if unit.id in seen:
            continue
        seen.add(unit.id)
        text = tree.text(unit)
        if any(s in text for s in sentinels) or _mentions(tree, unit) & carrying:
            units.append(unit)
    return units


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
