"""What text a variable that may hold a value holds, for the render's path checks.

The render checks every word in which a value names a file a program opens
or a write lands (``templates``), with the values put in.  A value often
reaches that word through a variable: ``p=/{{ x }}; od -c "$p"``,
``for f in {{ a }} {{ b }}``, ``read -r f <<< {{ x }}``.  The twentieth
review's round found each of them unchecked (only ``d={{ x }}`` was
followed), so ``/proc/self/environ`` reached ``od``.  This pass says, for
each variable that may hold a value, what it holds:

- **exact**: the texts it may hold, spelled as the script spells them
  (sentinels and quotes in): a variable the script assigns only words made
  of literal text, values and other exact variables, or a ``for`` variable
  over such words.  The render checks each text, values in.
- **part**: a piece of a known text: a ``read`` (not ``-a``) from a
  here-string whose word is exact.  ``read`` only cuts (fields, lines,
  backslashes removed), so the render checks the whole source for the
  names a piece could spell (``proc``, ``fd``, ``stdin``).
- **unknown** (None): anything else: text a program computed (``$( )``, a
  pipe into ``read``, ``read`` from a file), ``mapfile``, ``getopts``,
  ``printf -v``, ``${x:=...}``, arithmetic, positional parameters, ``$_``.
  Such a variable may not name a file at all (``writes`` refuses the word).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from .state import CheckState

#: At most this many texts for a word with several variables that hold values.
_MAX_COMBINATIONS = 256
#: Node types whose text a program or the shell computes while the script runs.
_COMPUTED = frozenset({"command_substitution", "process_substitution", "arithmetic_expansion"})
#: What ``read`` may read from a redirect: a here-string's word.
_SOURCES = frozenset({"herestring_redirect"})


class Held(NamedTuple):
    """What a variable holds: ``exact`` texts, or a ``part`` of ``texts``."""

    kind: str  # "exact" or "part"
    texts: tuple[str, ...]


class HeldTextCheck(CheckState):
    """The texts of the words and variables that may hold a value."""

    _held: dict[str, Held | None] | None = None
    _in_progress: set[str] | None = None

    def word_texts(self, word: Any) -> list[str] | None:
        """The texts ``word`` may have, as the script spells them, with each
        variable that may hold a value put in; None when one holds text
        computed at run time or only a part of a known text."""
        if self._computed_inside(word):
            return None
        spans: list[tuple[int, int, tuple[str, ...]]] = []
        for part in self._parts(word):
            if part.type in _COMPUTED:
                # "$(printf /pr)"{{ x }}: text known only at run time, spelled
                # as an expansion, which the path checks read as any text (H6)
                spans.append((part.start_byte, part.end_byte, ("${_computed_}",)))
                continue
            if part.type not in ("simple_expansion", "expansion"):
                continue
            name = self.expanded_name(part)
            if name is None:
                continue
            plain = part.type == "simple_expansion" or self.text(part) == "${" + name + "}"
            if not self.is_tainted_name(name):
                # d=/; "$d{{ x }}": a variable with no value, spelled out where known
                known = self.held(name) if plain and name in self.definitions else None
                if known is not None and known.kind == "exact" and known.texts:
                    spans.append((part.start_byte, part.end_byte, known.texts))
                elif plain:
                    # "$d"{{ x }} with d=$(printf /pr): left as ${d}, so the
                    # value's text is not read as part of its name (review 21's H6)
                    spans.append((part.start_byte, part.end_byte, ("${" + name + "}",)))
                continue
            if not plain:
                return None  # ${x#...}, ${x:-...}: computed (taint refuses most anyway)
            held = self.held(name)
            if held is None or held.kind != "exact":
                return None
            spans.append((part.start_byte, part.end_byte, held.texts))
        if not spans:
            return [self.text(word)]
        if len(spans) > 1 and _product(len(s[2]) for s in spans) > _MAX_COMBINATIONS:
            return None
        spans.sort()
        source = self.source
        texts = []
        for choice in itertools.product(*(s[2] for s in spans)):
            pieces, at = [], word.start_byte
            for (start, end, _), text in zip(spans, choice, strict=True):
                pieces.append(source[at:start].decode("utf-8", "replace"))
                pieces.append(text)
                at = end
            pieces.append(source[at : word.end_byte].decode("utf-8", "replace"))
            texts.append("".join(pieces))
        return texts

    def _parts(self, word: Any) -> list[Any]:
        """``word``'s nodes, not descending into what bash computes
        (``$( )``, ``$(( ))``): those stand whole."""
        found, stack = [], [word]
        while stack:
            node = stack.pop()
            found.append(node)
            if node.type not in _COMPUTED or node is word:
                stack.extend(node.children)
        return found

    def sole_variable(self, word: Any) -> str | None:
        """The name when ``word`` is only one variable (``"$f"``, ``$f``, ``"${f}"``)."""
        text = self.text(word).strip('"')
        name = text[1:].strip("{}")
        if text in ("$" + name, "${" + name + "}") and name.replace("_", "a").isalnum():
            return name
        return None

    def held(self, name: str) -> Held | None:
        """What the variable ``name`` (one that may hold a value) holds."""
        if self._held is None or self._in_progress is None:
            self._held, self._in_progress = {}, set()
        if name in self._held:
            return self._held[name]
        if name in self._in_progress:
            return None  # p="$p/x": grows at run time
        self._in_progress.add(name)
        try:
            found = self._held_by_definitions(name)
        finally:
            self._in_progress.discard(name)
        self._held[name] = found
        return found

    def _held_by_definitions(self, name: str) -> Held | None:
        definitions = self.definitions.get(name, [])
        if not definitions:
            # a templated env: value the script never assigns: the render
            # checks that value itself (refuse_unsafe_env_values)
            # (templates puts the rendered value in for ${NAME}: review 22's I2)
            return Held("exact", ("${" + name + "}",)) if name in self.env_tainted else None
        if name in self.env_tainted:
            return None  # the env value or what the script assigns: both unknown here
        exact: list[str] = []
        parts: list[str] = []
        for node, kind in definitions:
            if kind == "assign":
                texts = self._assigned(node)
            elif kind == "for":
                texts = self._looped(node)
            elif kind == "read":
                source = self._read_source(node)
                if source is None:
                    return None
                parts += source
                continue
            else:
                return None
            if texts is None:
                return None
            exact += texts
        if parts:
            return Held("part", tuple(parts + exact))
        return Held("exact", tuple(dict.fromkeys(exact)))

    def _assigned(self, node: Any) -> list[str] | None:
        if any(child.type == "+=" for child in node.children):
            return None  # p+=x: grows at run time
        name = node.child_by_field_name("name")
        if name is not None and name.type == "subscript":
            return None  # an array's element
        value = node.child_by_field_name("value")
        if value is None:
            return [""]
        if value.type == "array":
            return None
        return self.word_texts(value)

    def _looped(self, node: Any) -> list[str] | None:
        if not any(child.type == "in" for child in node.children):
            return None  # for f; do: the positional parameters
        texts: list[str] = []
        for value in (c for c in node.children if self.tree.field(c) == "value"):
            found = self.word_texts(value)
            if found is None:
                return None
            texts += found
        return texts

    def _read_source(self, target: Any) -> list[str] | None:
        """The texts a ``read`` target is cut from: the exact texts of the
        here-string that feeds the ``read`` (its own, or one on the loop
        around it); None for any other source."""
        command = target
        while command is not None and command.type != "command":
            command = self.tree.parent(command)
        if command is None:
            return None
        resolved = self.resolve_quietly(command)
        if resolved is None or resolved.name != "read":
            return None  # mapfile, getopts, printf -v, cd's PWD
        words = [self.fixed(w) or "" for w in resolved.arguments]
        if any(w.startswith("-") and ("a" in w[1:] or "u" in w[1:]) for w in words):
            return None  # read -a: an array; read -u 3: another descriptor (review 21's H5)
        own = [c for c in command.children if c.type.endswith("redirect")]
        if own:  # read -r p <<< {{ x }}
            return self._here_string(own)
        node = command
        while node is not None:
            parent = self.tree.parent(node)
            if parent is not None and parent.type == "pipeline":
                return None  # fed by a program's output
            if parent is not None and parent.type == "redirected_statement":
                redirects = [c for c in parent.children if c.type.endswith("redirect")]
                if redirects:
                    return self._here_string(redirects)
            if parent is not None and parent.type in ("while_statement", "until_statement"):
                node = parent
                continue
            if parent is None or parent.type in ("program", "function_definition"):
                return None  # the step's own stdin
            node = parent
        return None

    def _here_string(self, redirects: list[Any]) -> list[str] | None:
        """The texts of the one here-string among ``redirects``; None for
        any other redirect (a file, a descriptor, a second source)."""
        if len(redirects) != 1 or redirects[0].type not in _SOURCES:
            return None
        word = next(iter(redirects[0].named_children), None)
        return self.word_texts(word) if word is not None else None

    def _computed_inside(self, word: Any) -> bool:
        return any(
            part.type in _COMPUTED and self.carries(part) for part in self.tree.subtree(word)
        )


def _product(counts: Any) -> int:
    total = 1
    for count in counts:
        total *= count
    return total
