"""The words ``printf`` and ``test`` read as options and operators.

``printf -v NAME`` assigns (``a[$(cmd)]`` as a name runs cmd), ``printf``'s
format interprets escapes and conversions, and ``test`` reads ``-v``/``-R``
as "is this variable set", whose operand is evaluated as a subscript: so in
a script with values every word of theirs that may be an option or an
operator is decided on the words bash will see, after quote removal, brace
expansion and splitting.  A word the checker cannot fix before the script
runs is refused where it could be one.  A class over ``ReceiverCheck``
(the module docstring of ``state`` says why classes).
"""

from __future__ import annotations

from typing import Any

from .code_operands import CodeOperandsCheck
from .state import Command, Refused
from .tree import BRACE, ESCAPED_TEXT

# fmt: off
TEST_OPERATORS = frozenset([
    "=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef", "<", ">",
    "-n", "-z", "-e", "-f", "-d", "-r", "-w", "-x", "-s", "-L", "-h", "-b", "-c", "-p", "-S",
    "-t", "-g", "-u", "-k", "-O", "-G", "-N",
])
# fmt: on
#: test's binary operators (-a and -o left out: after them test reads a new term).
_BINARY_TEST_OPERATORS = frozenset(
    {"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"}
)
#: test's unary operators whose operand is a string or a file (not -v/-R: a name).
_UNARY_TEST_OPERATORS = TEST_OPERATORS - _BINARY_TEST_OPERATORS


class OptionWordsCheck(CodeOperandsCheck):
    """printf's options and format, test's operators and operands."""

    def printf(self, resolved: Command) -> None:
        """printf reads options, then a format: both must be literal words."""
        position = 0
        words = resolved.arguments
        while position < len(words):
            text = self.fixed(words[position])
            if text is None:
                raise Refused("printf-option", words[position])
            if text == "--":
                position += 1
                if self.consumers is None:
                    return  # after --, a format from a value only prints: no option, no code
                break
            if text.startswith("-v"):  # -v NAME: a name, fixed before the script runs
                if len(text) == 2:
                    position += 1
                    if position >= len(words) or self.fixed(words[position]) is None:
                        raise Refused("printf-option", words[min(position, len(words) - 1)])
                position += 1
                continue
            break
        if position < len(words) and self.fixed(words[position]) is None:
            raise Refused("printf-option", words[position])

    def test_arguments(self, resolved: Command) -> None:
        words = [w for w in resolved.arguments if self.text(w) != "]"]
        statics = [self.fixed(w) for w in words]
        if any(s in ("-v", "-R") for s in statics) and any(s is None for s in statics):
            raise Refused("test-operator", resolved.name_node, "-v/-R")
        if sum(1 for w in words if self.carries(w)) > 1:
            raise Refused("test-operator", resolved.name_node, "two values")
        non_static = [
            w for w, s in zip(words, statics, strict=True) if s is None and not self.carries(w)
        ]
        if non_static and any(self.carries(w) for w in words):
            raise Refused("option-word", non_static[0], self.text(non_static[0])[:40])

    def test_static(self, node: Any) -> str | None:
        """A word of a test as ``test`` gets it: operators are fixed words."""
        if not node.is_named or node.type == "test_operator":
            return self.text(node)
        return self.fixed(node)

    def brace_expands(self, node: Any) -> bool:
        """Does bash brace-expand ``node`` into several words (``{-v,x}``)?"""
        if node.type == "concatenation":
            text = "".join(self.text(c) if c.type == "word" else "Q" for c in node.children)
        elif node.type == "word":
            text = self.text(node)
        else:
            return False
        return BRACE.search(ESCAPED_TEXT.sub("", text)) is not None

    def may_split(self, node: Any) -> bool:
        """Does bash split or glob ``node`` into words the checker cannot count?"""
        kind = node.type
        if kind in ("string", "raw_string", "number", "test_operator") or not node.is_named:
            return False
        if self.brace_expands(node):
            return True
        if kind == "word":
            return self.tree.static(node) is None and not self.carries(node)
        if kind == "concatenation":
            return any(self.may_split(child) for child in node.children)
        return True  # $v, ${v}, $(...), $((...)) unquoted

    def test_words(self, words: list[Any], statics: list[str | None]) -> None:
        """In a script with values, a test reads every word as bash will: a
        word not fixed before the script runs (read back from a file, a file
        name, ``$(pwd)``) must be quoted, may not be the operand of -v/-R
        (``a[$(cmd)]`` runs), and may stand only where test reads an operand
        (after a unary operator, beside a binary one, or alone): elsewhere
        it could be ``-v`` and make the next word a subscript."""
        # a word that carries a value is judged as one (single_bracket_test)
        own = [not self.carries(word) for word in words]
        for word, mine in zip(words, own, strict=True):
            if mine and self.may_split(word):
                raise Refused("split", word, self.text(word)[:40])
        loose = [at for at, s in enumerate(statics) if s is None and own[at]]
        if loose and any(s in ("-v", "-R") for s in statics):
            raise Refused("test-operator", words[loose[0]], "-v/-R")
        count = len(statics)
        for at in loose:
            if count == 1:
                continue
            before = statics[at - 1] if at > 0 else None
            after = statics[at + 1] if at + 1 < count else None
            if (
                before in _UNARY_TEST_OPERATORS
                or before in _BINARY_TEST_OPERATORS
                or after in _BINARY_TEST_OPERATORS
                or (before == "!" and at == count - 1)
            ):
                continue
            raise Refused("test-operator", words[at], "a word in an operator's place")
