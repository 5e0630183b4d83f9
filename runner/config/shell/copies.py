"""The files a script copies or links, word by word.

A copy or a link of a secret's file is as secret as the file: ``ln -s
npmrc.txt link.txt``, then ``od -c {{ f }}`` with ``link.txt``, printed the
token past the scrubber (review 23's J4).  The render asks which words a
script's ``cp``, ``ln``, ``link``, ``mv``, ``install`` and ``rsync`` copy
from and to, puts the values in, and counts a destination whose source
names a secret's file as one more such file (``templates``).  Followed:
these programs by name or path, their operands after quote removal, as
bash makes them (review 24's K3): a ``{a,b}`` brace makes several words
(``cp npmrc.txt{,.bak}``), ``$NAME`` and ``${NAME}`` become each fixed text
the script assigns NAME (``f=npmrc.txt``) or a ``for NAME in`` loop gives
it, and a backup option (``-b``, ``--backup``, ``-S``/``--suffix``) makes
the old destination's content one more copy (``DEST~``, ``DEST.~1~``).
Not followed: a copy made any other way (``cat f > g``, a wrapper such as
``env cp``), a value bash would split into several words, arrays, ``-t
DIR``; SECURITY.md says so.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from typing import Any

from .tree import Tree

#: Programs whose last operand is a copy or link of the ones before it.
COPIERS = frozenset({"cp", "ln", "link", "mv", "install", "rsync"})
#: At most this many texts for one word, or operand lists for one command:
#: ``{a,b}{c,d}...`` and many assignments stay cheap; past it, words as written.
LIMIT = 64
#: Numbered backups (``--backup=numbered``, or ``VERSION_CONTROL`` in the
#: environment) are ``DEST.~N~``: the first few are counted as copies.
NUMBERED_BACKUPS = 9

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def copied_words(script: str) -> list[tuple[str, list[str]]]:
    """Each copier command of ``script`` as (destination, sources): the
    words as written (values as their sentinels), options left out; a word
    bash expands into several texts gives one pair for each."""
    tree = Tree(script.encode("utf-8"))
    assigned = _assigned_texts(tree)
    found: list[tuple[str, list[str]]] = []
    for node in tree.nodes:
        if node.type != "command":
            continue
        name_node = node.child_by_field_name("name")
        name = tree.static(name_node) if name_node is not None else None
        if name is None or name.rsplit("/", 1)[-1] not in COPIERS:
            continue
        operands: list[list[list[str]]] = []  # each word: its alternatives, each some words
        options_end = False
        suffix_next = False
        backup = False
        suffixes = ["~"]
        for word in node.children_by_field_name("argument"):
            text = tree.static(word)
            if suffix_next:
                suffix_next = False
                suffixes = [text if text is not None else tree.text(word)]
                continue
            if not options_end and text is not None and text.startswith("-"):
                options_end = text == "--"
                option = _backup_option(text, name.rsplit("/", 1)[-1])
                if option is not None:
                    backup = True
                    suffix_next = option == ""
                    if option:
                        suffixes = [option]
                continue
            operands.append(_word_alternatives(tree.text(word), assigned))
        for words in itertools.islice(_operand_lists(operands), LIMIT):
            if len(words) < 2:
                continue
            pair = (words[-1], words[:-1])
            if pair not in found:
                found.append(pair)
            if backup:
                for extra in _backups(words[-1], words[:-1], suffixes):
                    if extra not in found:
                        found.append(extra)
    return found


def _backup_option(text: str, program: str) -> str | None:
    """For an option word that asks ``program`` for a backup of each
    replaced file: the suffix it gives, ``""`` when the next word is the
    suffix, ``"~"`` when it gives none; None for any other option.  Long
    options may be cut short (``--back``, ``--suf=.x``), as getopt allows."""
    if text.startswith("--"):
        name, eq, value = text.partition("=")
        if len(name) >= 4 and "--suffix".startswith(name):
            return value if eq else ""
        return "~" if len(name) >= 5 and "--backup".startswith(name) else None
    letters = text[1:]
    if (
        "S" in letters and program != "rsync"
    ):  # rsync's -S is --sparse  # -S SUFFIX, or -bSsuffix glued: a backup with that suffix
        glued = letters.split("S", 1)[1]
        return glued
    return "~" if "b" in letters else None


def _backups(
    destination: str, sources: list[str], suffixes: list[str]
) -> list[tuple[str, list[str]]]:
    """The backup copies ``cp -b`` and its kin leave: the old destination
    (or, into a directory, the old file of each source's name) under its
    suffix and numbered names, each a copy of what it replaced."""
    replaced = [destination]
    for source in sources:
        last = posixpath.basename(source.rstrip("/"))
        if last:
            replaced.append(posixpath.join(destination, last))
    pairs = []
    for old in replaced:
        names = [old + suffix for suffix in suffixes]
        names += [f"{old}.~{n}~" for n in range(1, NUMBERED_BACKUPS + 1)]
        pairs += [(name, [old]) for name in names]
    return pairs


def _operand_lists(operands: list[list[list[str]]]) -> Any:
    """Each list of operands the command may get: one alternative of each word."""
    for choice in itertools.product(*operands):
        yield [word for words in choice for word in words]


def _word_alternatives(text: str, assigned: dict[str, list[str]]) -> list[list[str]]:
    """The words bash may make of one written word: its braces expanded
    (several words), then each ``$NAME`` given each text assigned to NAME
    (several alternatives)."""
    expanded = _braces(text)
    per_word = [_substituted(piece, assigned) for piece in expanded]
    return [list(choice) for choice in itertools.islice(itertools.product(*per_word), LIMIT)]


def _assigned_texts(tree: Tree) -> dict[str, list[str]]:
    """Each variable's fixed texts: from ``NAME=word`` (``declare``,
    ``export`` and ``local`` too) and ``for NAME in words``, in script
    order, a name's earlier texts put into later ones (``g=$f.bak``).  A
    name also given a text not fixed before the script runs keeps
    ``$NAME`` as written among its texts."""
    texts: dict[str, list[str]] = {}
    unknown: set[str] = set()
    for node in tree.nodes:
        if node.type == "variable_assignment":
            name_node = node.child_by_field_name("name")
            if name_node is None or name_node.type != "variable_name":
                unknown.add(tree.text(name_node).split("[", 1)[0] if name_node else "")
                continue
            name = tree.text(name_node)
            value = node.child_by_field_name("value")
            append = (
                b"+="
                in tree.text_bytes(node)[: value.start_byte - node.start_byte if value else None]
            )
            new: list[str] | None
            if value is None:
                new = [""]
            elif value.type == "array":
                unknown.add(name)
                continue
            else:
                new = _fixed_texts(tree.text(value), texts, unknown, braces=False)
            if new is None:
                unknown.add(name)
                continue
            if append:
                new = [old + piece for old in texts.get(name, [""]) for piece in new]
            _add(texts, name, new)
        elif node.type == "for_statement":
            variable = node.child_by_field_name("variable")
            words = node.children_by_field_name("value")
            if variable is None:
                continue
            name = tree.text(variable)
            if not words:
                unknown.add(name)  # for f; do: the positional parameters
                continue
            for word in words:
                loop = _fixed_texts(tree.text(word), texts, unknown, braces=True)
                if loop is None:
                    unknown.add(name)
                else:
                    _add(texts, name, loop)
    for name in unknown & texts.keys():
        _add(texts, name, ["${" + name + "}"])
    return texts


def _add(texts: dict[str, list[str]], name: str, new: list[str]) -> None:
    known = texts.setdefault(name, [])
    for text in new:
        if text not in known and len(known) < LIMIT:
            known.append(text)


def _fixed_texts(
    text: str, texts: dict[str, list[str]], unknown: set[str], *, braces: bool
) -> list[str] | None:
    """The texts an assigned word (or a ``for`` word) makes, quotes removed,
    when fixed before the script runs (a glob stays as written: bash's match
    is one of the files it names); else None."""
    pieces = _braces(text) if braces else [text]
    found: list[str] = []
    for piece in pieces:
        for option in _substituted(piece, {n: t for n, t in texts.items() if n not in unknown}):
            unquoted = _unquoted(option)
            if unquoted is None:
                return None
            found.append(unquoted)
    return found[:LIMIT]


def _scan(text: str) -> Any:
    """Each character of a written word with its quoting: yields (index,
    state), state one of ``"'"`` (single quotes, ``$'...'`` too), ``'"'``,
    ``"\\\\"`` (escaped) and ``""`` (unquoted); quote characters themselves
    are reported as ``"q"``."""
    state = ""
    dollar_quote = False
    i = 0
    while i < len(text):
        c = text[i]
        if state == "'":
            if c == "'":
                state = ""
                yield i, "q"
            elif c == "\\" and dollar_quote and i + 1 < len(text):
                yield i, "'"
                i += 1
                yield i, "'"
            else:
                yield i, "'"
        elif c == "\\" and i + 1 < len(text) and (state == "" or text[i + 1] in '$`"\\\n'):
            yield i, "q"
            i += 1
            yield i, "\\"
        elif state == "" and c == "'":
            state, dollar_quote = "'", False
            yield i, "q"
        elif state == "" and c == "$" and text[i + 1 : i + 2] == "'":
            state, dollar_quote = "'", True
            yield i, "q"
            i += 1
            yield i, "q"
        elif c == '"':
            state = "" if state == '"' else '"'
            yield i, "q"
        else:
            yield i, state
        i += 1


def _unquoted(text: str) -> str | None:
    """``text`` after quote removal, or None when an expansion or a command
    substitution is left in it (``$x``, ``$(...)``, a backquote, ``$'...'``).
    Single quotes stay: a value's sentinel is a single-quoted word, which
    the render finds as written (``values.literal`` removes the quotes)."""
    out = []
    for i, state in _scan(text):
        c = text[i]
        if state == "q":
            if c == "$":
                return None
            if c == "'":
                out.append(c)
            continue
        if state in ("", '"') and c in "$`":
            return None
        out.append(c)
    return "".join(out)


def _substituted(text: str, assigned: dict[str, list[str]]) -> list[str]:
    """``text`` with each ``$NAME``/``${NAME}`` (not in single quotes) of an
    assigned NAME replaced, in every combination of NAME's texts; the texts
    go in as they are (a sentinel stays one)."""
    start = 0
    positions = [i for i, state in _scan(text) if state in ("", '"') and text[i] == "$"]
    pieces: list[Any] = []
    for i in positions:
        if i < start:
            continue
        braced = text[i + 1 : i + 2] == "{"
        match = _NAME.match(text, i + 2 if braced else i + 1)
        if match is None or match.group() not in assigned:
            continue
        end = match.end()
        if braced:
            if text[end : end + 1] != "}":
                continue
            end += 1
        pieces.append(text[start:i])
        pieces.append(assigned[match.group()])
        start = end
    pieces.append(text[start:])
    results = [""]
    for piece in pieces:
        options = piece if isinstance(piece, list) else [piece]
        results = [r + o for r in results for o in options][:LIMIT]
    return results


def _braces(text: str) -> list[str]:
    """The words bash's brace expansion makes of ``text`` (quotes and
    ``${`` left alone): ``a{b,c}d`` is ``abd acd``, ``{1..3}`` and
    ``{a..c}`` are sequences; at most ``LIMIT`` words."""
    states = dict(_scan(text))
    opens: list[int] = []
    found: list[tuple[int, int, list[str]]] = []
    parameter = 0  # depth inside ${...}, which bash leaves to parameter expansion
    for i, c in enumerate(text):
        if states.get(i) not in ("", '"'):
            continue
        if c == "{" and i > 0 and text[i - 1] == "$" and states.get(i - 1) == states.get(i):
            parameter += 1
        elif parameter:
            parameter += {"{": 1, "}": -1}.get(c, 0)
        elif states.get(i) != "":
            continue
        elif c == "{":
            opens.append(i)
        elif c == "}" and opens:
            first = opens.pop()
            options = _brace_options(text, first, i, states)
            if options is not None:
                found.append((first, i, options))
    if not found:
        return [text]
    # bash expands the brace that opens first, outer before inner: a{b,c{d,e}}
    first, last, options = min(found)
    words: list[str] = []
    for option in options:
        for word in _braces(text[:first] + option + text[last + 1 :]):
            if len(words) < LIMIT:
                words.append(word)
    return words


def _brace_options(text: str, first: int, last: int, states: dict[int, str]) -> list[str] | None:
    """The texts of the brace ``text[first:last+1]``, or None when it is no
    brace expansion (no top-level comma, no sequence)."""
    inner = text[first + 1 : last]
    depth = 0
    commas = []
    for i in range(first + 1, last):
        if states.get(i) != "":
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
        elif text[i] == "," and depth == 0:
            commas.append(i)
    if commas:
        bounds = [first, *commas, last]
        return [text[a + 1 : b] for a, b in itertools.pairwise(bounds)]
    sequence = re.fullmatch(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?", inner)
    if sequence is None:
        return None
    a, b, step_text = sequence.groups()
    step = abs(int(step_text or 1)) or 1
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        x, y = int(a), int(b)
        width = (
            max(len(a), len(b))
            if (a.lstrip("-").startswith("0") or b.lstrip("-").startswith("0"))
            else 0
        )
        values = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [str(v).zfill(width) for v in itertools.islice(values, LIMIT)]
    if a.isalpha() and b.isalpha():
        x, y = ord(a), ord(b)
        values = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [chr(v) for v in itertools.islice(values, LIMIT)]
    return None
