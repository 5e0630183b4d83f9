"""Which fixed words a command that holds a value names, pipeline and all.

A value may not choose *how* a secret's file is printed either: ``grep -o
{{ key }} npmrc.txt`` with ``[a-z0-9]``, or ``fold -w {{ w }} npmrc.txt``
with ``1``, printed the token a character a line, past the scrubber
(review 24's K7).  The render asks for the fixed words of every command,
pipeline or redirected command that also holds a value, and refuses one
that names a secret's file (``templates``).
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Collection
from typing import Any

from .copies import _braces
from .proc_paths import UNQUOTED
from .rules import BUILTINS
from .state import IDENTIFIER
from .tree import Tree

#: Nodes a value's command reaches through: its pipeline, its redirects.
_UNITS = frozenset({"pipeline", "redirected_statement"})
#: Nodes that are one word of a command.
_WORDS = frozenset({"word", "string", "raw_string", "concatenation", "number"})


def fixed_words_beside_values(
    script: str, sentinels: Collection[str], tainted: Collection[str] = ()
) -> list[str]:
    """The fixed words (quotes removed; a glob as written, braces expanded)
    of each command of ``script``, with its pipeline and redirects, that
    holds one of ``sentinels`` or a variable assigned one (``w={{ x }}``,
    ``q="$w"``) or a templated ``env:`` value (``tainted``: review 51's F6);
    of the redirects around it (``{ fold -w {{ w }}; } < npmrc.txt``); of
    every ``exec``'s, behind ``command`` or ``builtin`` too (``exec 3<
    npmrc.txt``, then ``<&3``: reviews 40 and 43); the texts a variable
    such a command expands was assigned (``f=npmrc.txt``, ``for f in
    npmrc.txt``), and the words of what gave it its text (``read -r l <
    npmrc.txt``, ``l=$(cat npmrc.txt)``: review 51's F5).  A word with an
    expansion counts by its fixed text after the last one
    (``"$PWD/npmrc.txt"``: F3), and a name a program or redirect opens that
    the script builds at run time counts as ``*``, any file (review 52)."""
    tree = Tree(script.encode("utf-8"))
    found: list[str] = []
    holds_value = False
    pairs = _assignments(tree)
    carrying, texts = _assigned(tree, pairs, sentinels, tainted)
    sources = _sources(tree, pairs)
    followed: set[str] = set()

    def built_name(word: Any) -> bool:
        """Is ``word`` a name a program or a redirect opens (not a builtin's
        word, not a value's) whose text a variable or a substitution builds
        when the script runs (``"$f$g"``, ``"${f#x}"``, an ``env:`` value's
        ``"$F"``: review 52)?"""
        parent = tree.parent(word)
        opener = parent.type == "file_redirect" or (
            parent.type == "command"
            and tree.field(word) == "argument"
            and _program(tree, parent) not in BUILTINS
        )
        tail = _tail(tree, word)
        if not opener or tail is None:
            return False
        tail = UNQUOTED.sub("", tail)
        if "/" in tail and tail.rsplit("/", 1)[1]:
            return False  # "$PWD/notes.txt": its last name is fixed, and judged as such
        return not any(s in tree.text(word) for s in sentinels) and not (
            _mentions(tree, word) & carrying
        )

    def words_of(node: Any) -> None:
        for part in tree.subtree(node):
            if part.type in _WORDS and tree.parent(part).type not in _WORDS:
                found.extend(_word_names(tree, part))
                if built_name(part):
                    found.append("*")
            elif part.type in ("simple_expansion", "expansion"):
                name = _name(tree, part)
                found.extend(texts.get(name, ()))
                if name not in followed:
                    followed.add(name)
                    for source in sources.get(name, ()):
                        words_of(source)

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


def _word_names(tree: Tree, word: Any) -> list[str]:
    """The names one written word may give a program: its fixed text (a glob
    as written), its braces expanded (``.net{rc,}``: review 51's F4); for a
    word with expansions, the fixed text after the last one, by which a
    file's last name is judged (``"$PWD"/.netrc``: F3)."""
    fixed = tree.static(word)
    if fixed is not None:
        return [fixed]
    tail = _tail(tree, word)
    text = tree.text(word) if tail is None else tail
    return [UNQUOTED.sub("", piece) for piece in _braces(text)] if UNQUOTED.sub("", text) else []


def _tail(tree: Tree, word: Any) -> str | None:
    """The text of ``word`` after its last part known only at run time (an
    expansion, a substitution), as written; None when it has none."""
    built = [n for n in tree.subtree(word) if n.type in _BUILT]
    if not built:
        return None
    last = max(built, key=lambda n: n.end_byte)
    return tree.source[last.end_byte : word.end_byte].decode("utf-8", "replace")


#: Programs that read every file under the folders they are given (the
#: working folder when none is): beside a value, one chooses how a secret's
#: file in there is printed (review 49's G2: ``grep -rno -- {{ q }} .``
#: with ``.`` printed ``.netrc`` one character a line).  Which folder does
#: not matter: a link may lead anywhere (review 51's F2: ``ln -s . all``).
_ALWAYS_RECURSIVE = frozenset({"rg", "ag", "ack", "ack-grep", "tar", "bsdtar", "zip", "cpio"})
#: Programs that do when given a recursive option, and its short letters.
_RECURSIVE_LETTERS = {
    **dict.fromkeys(("grep", "egrep", "fgrep", "zgrep", "ugrep"), "rRd"),
    "diff": "r",
    "cp": "rRa",
}
#: Long options (any abbreviation of two letters or more: getopt_long takes
#: ``--recur``; ``--dir=rec`` is ``--directories=recurse``: review 51's F1).
_RECURSIVE_LONG = ("recursive", "dereference-recursive", "directories", "archive")
#: Options that name a file listing the files to read (``sort
#: --files0-from=list``): its names are not the command's words.
_FILE_LISTS = ("--files0-from", "--files-from", "-T")


def recursive_readers_beside_values(
    script: str, sentinels: Collection[str], tainted: Collection[str] = ()
) -> list[str]:
    """The programs, in a pipeline (or redirected command) that holds one of
    ``sentinels``, a variable assigned one or a templated ``env:`` value,
    that read folders recursively or the files a list names."""
    tree = Tree(script.encode("utf-8"))
    carrying, _ = _assigned(tree, _assignments(tree), sentinels, tainted)
    found: list[str] = []
    for unit in _value_units(tree, sentinels, carrying):
        for command in (n for n in tree.subtree(unit) if n.type == "command"):
            name = _program(tree, command)
            texts = [
                UNQUOTED.sub("", tree.text(w))
                for w in command.named_children
                if tree.field(w) == "argument"
            ]
            options = [t for t in itertools.takewhile(lambda t: t != "--", texts) if t[:1] == "-"]
            lists = [t for t in options if t.startswith(_FILE_LISTS)]
            if lists:
                found.append(f"{name} {lists[0]}")
            elif name in _ALWAYS_RECURSIVE or (
                name in _RECURSIVE_LETTERS
                and any(_is_recursive_option(t, _RECURSIVE_LETTERS[name]) for t in options)
            ):
                found.append(name)
    return found


def _is_recursive_option(text: str, letters: str) -> bool:
    """Does ``text`` ask to read folders recursively: a short option in
    ``letters`` (in a cluster too: ``-rno``; ``-d ACTION``), or an
    abbreviation of a recursive long option?"""
    if text.startswith("--"):
        name = text[2:].split("=", 1)[0]
        return len(name) >= 2 and any(long.startswith(name) for long in _RECURSIVE_LONG)
    return any(c in letters for c in text[1:])


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


#: Nodes whose text is known only when the script runs.
_BUILT = frozenset(
    {"simple_expansion", "expansion", "command_substitution", "arithmetic_expansion"}
)


def _program(tree: Tree, command: Any) -> str:
    """The program ``command`` runs (its name's last part; after ``command``,
    ``builtin`` or ``exec``), or ``""`` when its name is not fixed."""
    words = [tree.static(w) for w in command.named_children if tree.field(w) != "redirect"]
    while words and words[0] in ("command", "builtin", "exec"):
        words = words[1:]
    return posixpath.basename(words[0]) if words and words[0] else ""


def _is_exec(tree: Tree, command: Any) -> bool:
    """Is ``command`` an ``exec``, bare or behind ``command``/``builtin``?"""
    words = [tree.static(w) for w in command.named_children]
    words = [w for w in words if w is not None and not w.startswith("-")]
    while words and words[0] in ("command", "builtin"):
        words = words[1:]
    return bool(words) and words[0] == "exec"


def _assignments(tree: Tree) -> list[tuple[str, Any]]:
    """Each (name, value node) an assignment or a ``for`` loop's word gives."""
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
    return pairs


def _sources(tree: Tree, pairs: list[tuple[str, Any]]) -> dict[str, list[Any]]:
    """What gives each variable its text: its ``pairs`` (assignments, ``for``
    words), and the pipeline or redirected command of a ``read``,
    ``mapfile`` or ``readarray`` that sets it (``read -r l < npmrc.txt``)."""
    found: dict[str, list[Any]] = {}
    for name, value in pairs:
        found.setdefault(name, []).append(value)
    for node in tree.nodes:
        if node.type == "command":
            words = [tree.static(w) for w in node.named_children]
            if not words or words[0] not in ("read", "mapfile", "readarray"):
                continue
            names = [w for w in words[1:] if w is not None and IDENTIFIER.fullmatch(w)]
            default = "REPLY" if words[0] == "read" else "MAPFILE"
            unit, parent = node, tree.parent(node)
            while parent is not None and parent.type in _UNITS | {"while_statement", "do_group"}:
                unit, parent = parent, tree.parent(parent)
            for name in [*names, default]:
                found.setdefault(name, []).append(unit)
    return found


def _assigned(
    tree: Tree,
    pairs: list[tuple[str, Any]],
    sentinels: Collection[str],
    tainted: Collection[str] = (),
) -> tuple[set[str], dict[str, list[str]]]:
    """The variables of ``pairs`` assigned a value (or another such
    variable; a templated ``env:`` value's own name is one), and the fixed
    texts each is assigned (``f=npmrc.txt``, ``for f in a b``)."""
    carrying: set[str] = set(tainted)
    texts: dict[str, list[str]] = {}
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
