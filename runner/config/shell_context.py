"""Where each ``{{ }}`` placeholder lands in shell syntax, found without running anything.

Values are shell-quoted for the author, so a placeholder must stand where
the shell reads a plain word.  Elsewhere quoting does not protect it:

- inside quotes (``"{{ x }}"``) the added quotes become part of the value;
- inside backticks or a heredoc body the shell re-reads the text as code;
- in arithmetic (``$(( ))``, ``(( ))``, ``[[ ]]``, ``let``, array subscripts
  in ``${ }``) bash evaluates a quoted ``a[$(cmd)]`` and runs ``cmd``;
- ``eval``, ``declare``/``typeset`` (and ``local``/``export``/``readonly``
  with flags) evaluate their arguments again.

The scan runs on a *skeleton* of the template built from Jinja's parse tree
(see ``templates.shell_skeleton``): the literal text the template can print,
with one ``MARK`` character where each ``{{ }}`` prints.  Scanning what Jinja
prints, not the raw source, means no Jinja trick (a string literal holding
``}}``, a ``{% raw %}`` block) can hide a quote from the check.  ``$( )``
starts a fresh context, so ``"$(cat {{ f }})"`` is fine.  When in doubt the
scan refuses: it errs on the side of a validation error, never of running a
value as code.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: Placeholder number i is the private-use character MARK_BASE + i in a
#: skeleton (run templates may not contain private-use characters).
MARK_BASE = 0xE000
MARK_LIMIT = 0xF8FF
MARK = chr(MARK_BASE)


def mark(index: int) -> str:
    return chr(MARK_BASE + index)


def is_mark(char: str) -> bool:
    return MARK_BASE <= ord(char) <= MARK_LIMIT


HINTS = {
    "single quotes": "values are quoted for you; remove the quotes",
    "double quotes": "values are quoted for you; remove the quotes",
    "$'...' quotes": "values are quoted for you; remove the quotes",
    "backticks": "the shell re-reads backtick text as code; use $( ) instead",
    "a heredoc": "heredoc text is not re-quoted; write the file with a write: step instead",
    "a heredoc delimiter": "use a fixed delimiter word such as EOF",
    "arithmetic": "bash evaluates arithmetic operands as code; use a test: [ {{ x }} -gt 0 ]",
    "[[ ]]": "bash evaluates [[ ]] operands arithmetically; use [ ] (test) instead",
    "${ }": "put the value in a plain word instead of a parameter expansion",
    "eval": "eval runs its arguments as code; pass the value as a plain argument",
    "a declaration": "declare, typeset and let can evaluate values; assign with NAME={{ x }}",
    "an assignment": "this script declares integer or array variables, whose assignments "
    "evaluate values; assign to a plain variable instead",
    "a case statement": "case patterns are not checked here; set a variable first "
    '(NAME={{ x }}) and write case "$NAME"',
    "a command name": "a value may be an argument, never the command itself",
    "a variable name": "this command takes variable names, whose subscripts bash evaluates; "
    "pass the value as a plain argument",
    "an array subscript": "bash evaluates array subscripts; use a plain variable",
}

_METACHARACTERS = set(" \t\n;|&()<>")
_COMMAND_SEPARATORS = set(";|&(\n")
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "time", "{"}
_EVALUATING = {
    "eval": "eval",
    "trap": "eval",
    "source": "eval",
    ".": "eval",
    "alias": "eval",
    "let": "a declaration",
    "declare": "a declaration",
    "typeset": "a declaration",
}
#: Words that run the next word as the command: skipped to find the real one.
_PREFIXES = {"command", "builtin", "time", "coproc", "-p", "nohup", "env"}
#: Commands that take variable names (and evaluate their subscripts).
_NAME_TAKING = {"read", "mapfile", "readarray", "unset", "getopts", "printf", "test", "[", "wait"}
_ALWAYS_NAMES = {"read", "mapfile", "readarray", "unset", "getopts"}
_SUBSCRIPT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[")
_CASE = re.compile(r"(?:^|[\s;&|(])case\s")
_DECLARING_WITH_FLAGS = {"local", "export", "readonly"}
_ATTRIBUTE_DECLARATION = re.compile(r"\b(?:declare|typeset|local|export|readonly)\s+-\w*[iaA]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


class UnsafePlaceholder(NamedTuple):
    """The ``index``-th placeholder of a template sits in ``context``."""

    index: int
    context: str

    @property
    def message(self) -> str:
        return f"{{{{ }}}} inside {self.context}: {HINTS[self.context]}"


class _Scanner:
    def __init__(self, skeleton: str) -> None:
        self.text = skeleton
        self.found: dict[int, str] = {}
        self.integer_variables = bool(_ATTRIBUTE_DECLARATION.search(skeleton))
        self.has_case = bool(_CASE.search(skeleton))

    def flag(self, position: int, context: str) -> None:
        self.found.setdefault(ord(self.text[position]) - MARK_BASE, context)

    def flag_range(self, start: int, end: int, context: str) -> None:
        for position in range(start, min(end, len(self.text))):
            if is_mark(self.text[position]):
                self.flag(position, context)

    # Each scan_* method starts after an opening token and returns the index
    # just past its closing token (or the end of the text, if it never closes).

    def scan_single(self, i: int, context: str = "single quotes") -> int:
        end = self.text.find("'", i)
        end = len(self.text) if end < 0 else end
        self.flag_range(i, end, context)
        return end + 1

    def scan_escaped_until(self, i: int, closer: str, context: str) -> int:
        """$'...' and backticks: backslash escapes, no nesting we need to follow."""
        n = len(self.text)
        while i < n and self.text[i] != closer:
            if is_mark(self.text[i]):
                self.flag(i, context)
            i += 2 if self.text[i] == "\\" else 1
        return i + 1

    def scan_double(self, i: int) -> int:
        n = len(self.text)
        while i < n:
            char = self.text[i]
            if is_mark(char):
                self.flag(i, "double quotes")
            if char == "\\":
                i += 2
            elif char == '"':
                return i + 1
            elif self.text.startswith("$((", i):
                i = self.scan_arithmetic(i + 3)
            elif self.text.startswith("$(", i):
                i = self.scan_commands(i + 2, closer=")")
            elif self.text.startswith("${", i):
                i = self.scan_parameter(i + 2)
            elif char == "`":
                i = self.scan_escaped_until(i + 1, "`", "backticks")
            else:
                i += 1
        return n

    def scan_arithmetic(self, i: int) -> int:
        depth = 0
        n = len(self.text)
        while i < n:
            if is_mark(self.text[i]):
                self.flag(i, "arithmetic")
            if self.text[i] == "(":
                depth += 1
            elif self.text[i] == ")":
                if depth == 0 and self.text.startswith("))", i):
                    return i + 2
                depth -= 1
            i += 1
        return n

    def scan_parameter(self, i: int) -> int:
        depth = 1
        n = len(self.text)
        start = i
        while i < n and depth:
            if self.text[i] in "'\"`":
                # Quotes inside ${...} follow rules this scan does not model:
                # refuse every placeholder from here on.
                self.flag_range(start, n, "${ }")
                return n
            if self.text[i] == "{":
                depth += 1
            elif self.text[i] == "}":
                depth -= 1
            elif self.text[i] == "\\":
                i += 1
            i += 1
        self.flag_range(start, i, "${ }")
        return i

    def scan_old_arithmetic(self, i: int) -> int:
        end = self.text.find("]", i)
        end = len(self.text) if end < 0 else end
        self.flag_range(i, end, "arithmetic")
        return end + 1

    def scan_double_bracket(self, i: int) -> int:
        end = self.text.find("]]", i)
        end = len(self.text) if end < 0 else end
        self.flag_range(i, end, "[[ ]]")
        return end + 2

    def read_heredoc_word(self, i: int) -> tuple[str | None, int]:
        """The delimiter after ``<<``/``<<-`` (quotes removed), or None if unsure."""
        n = len(self.text)
        while i < n and self.text[i] in " \t":
            i += 1
        start = i
        while i < n and self.text[i] not in _METACHARACTERS:
            i += 1
        word = self.text[start:i]
        marks = any(is_mark(c) for c in word)
        quoting = re.search(r"[\\'\"]", word)
        # A quote or backslash before the end of the word (E\ OF, "E"OF):
        # the delimiter is not something this scan can read exactly.
        unclear = quoting is not None and not re.fullmatch(r"'[^']*'|\"[^\"]*\"|\\?\w+", word)
        if not word or marks or "$" in word or "`" in word or unclear:
            if marks:
                self.flag_range(start, i, "a heredoc delimiter")
            return None, i
        return word.replace("'", "").replace('"', "").replace("\\", ""), i

    def skip_heredoc_bodies(self, i: int, heredocs: list[tuple[str | None, bool]]) -> int:
        n = len(self.text)
        for delimiter, strip_tabs in heredocs:
            if delimiter is None:  # a delimiter we cannot read: all the rest may be body
                self.flag_range(i, n, "a heredoc")
                return n
            while i < n:
                end = self.text.find("\n", i)
                line_end = n if end < 0 else end
                line = self.text[i:line_end]
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    i = line_end + 1
                    break
                self.flag_range(i, line_end, "a heredoc")
                i = line_end + 1
        return min(i, n)

    def scan_commands(self, i: int, closer: str | None = None) -> int:
        """Unquoted shell text, up to ``closer`` (for ``$( )``) or the end."""
        n = len(self.text)
        depth = 0
        heredocs: list[tuple[str | None, bool]] = []
        command: str | None = None  # the first word of the current simple command
        command_flags = False
        at_command_start = True
        in_command_word = False  # inside the command's own word (/bin/{{ x }})
        word_start = True
        while i < n:
            char = self.text[i]
            if is_mark(char):
                word_before = self._word_before(i)
                assignment = _ASSIGNMENT.match(word_before)
                if self.has_case:
                    self.flag(i, "a case statement")
                elif assignment and _SUBSCRIPT.match(word_before) and "]" not in word_before:
                    self.flag(i, "an array subscript")
                elif assignment and (at_command_start or command is None):
                    if self.integer_variables:  # NAME={{ x }} before the command
                        self.flag(i, "an assignment")
                elif at_command_start or command is None or in_command_word:
                    if _SUBSCRIPT.match(word_before):
                        self.flag(i, "an array subscript")
                    else:
                        self.flag(i, "a command name")
                elif command in _EVALUATING:
                    self.flag(i, _EVALUATING[command])
                elif command in _DECLARING_WITH_FLAGS and command_flags:
                    self.flag(i, "a declaration")
                elif command in _NAME_TAKING and (command_flags or command in _ALWAYS_NAMES):
                    self.flag(i, "a variable name")
                elif _SUBSCRIPT.match(word_before) and "]" not in word_before:
                    self.flag(i, "an array subscript")
                elif self.integer_variables and _ASSIGNMENT.search(word_before):
                    self.flag(i, "an assignment")
                i += 1
                word_start = at_command_start = False
                continue
            if char == "\\":
                i += 2
                word_start = at_command_start = False
                continue
            if char == "#" and word_start:
                end = self.text.find("\n", i)
                i = n if end < 0 else end
                continue
            if char == "\n":
                i += 1
                if heredocs:
                    i = self.skip_heredoc_bodies(i, heredocs)
                    heredocs = []
                command, command_flags = None, False
                word_start = at_command_start = True
                continue
            if self.text.startswith("<<<", i):  # a here-string: its word is a plain word
                i += 3
                word_start = True
                continue
            if self.text.startswith("<<", i):
                strip_tabs = self.text.startswith("<<-", i)
                delimiter, i = self.read_heredoc_word(i + (3 if strip_tabs else 2))
                heredocs.append((delimiter, strip_tabs))
                word_start = False
                continue
            arithmetic_command = at_command_start and self.text.startswith("((", i)
            if self.text.startswith("$((", i) or arithmetic_command:
                i = self.scan_arithmetic(i + (3 if char == "$" else 2))
                word_start = at_command_start = False
                continue
            if self.text.startswith("$[", i):
                i = self.scan_old_arithmetic(i + 2)
                word_start = at_command_start = False
                continue
            if word_start and self.text.startswith("[[", i):
                i = self.scan_double_bracket(i + 2)
                word_start = at_command_start = False
                continue
            if self.text.startswith("$(", i):
                i = self.scan_commands(i + 2, closer=")")
            elif self.text.startswith("${", i):
                i = self.scan_parameter(i + 2)
            elif self.text.startswith("$'", i):
                i = self.scan_escaped_until(i + 2, "'", "$'...' quotes")
            elif char == "'":
                i = self.scan_single(i + 1)
            elif char == '"':
                i = self.scan_double(i + 1)
            elif char == "`":
                i = self.scan_escaped_until(i + 1, "`", "backticks")
            elif char == "(":
                depth += 1
                i += 1
            elif char == ")":
                if closer == ")" and depth == 0:
                    return i + 1
                depth -= 1
                i += 1
            elif char in _METACHARACTERS:
                in_command_word = False
                i += 1
                if char in _COMMAND_SEPARATORS:
                    command, command_flags = None, False
                    at_command_start = True
                word_start = True
                continue
            else:
                if word_start:
                    word = self._word_at(i)
                    if at_command_start and word not in _KEYWORDS and not _ASSIGNMENT.match(word):
                        if word not in _PREFIXES:  # `command eval` is still eval
                            command, at_command_start = word, False
                            in_command_word = True
                    elif word.startswith("-") and command is not None:
                        command_flags = True
                i += 1
            word_start = False
        return n

    def _word_at(self, i: int) -> str:
        """The word starting at ``i``, with quotes and backslashes removed
        (``ev''al`` and ``\\eval`` are still ``eval``)."""
        end = i
        while end < len(self.text) and self.text[end] not in _METACHARACTERS:
            if is_mark(self.text[end]) or self.text[end] in "$`":
                break
            end += 1
        return re.sub(r"[\\'\"]", "", self.text[i:end])

    def _word_before(self, i: int) -> str:
        start = i
        while start > 0 and self.text[start - 1] not in _METACHARACTERS:
            start -= 1
        return self.text[start:i]


def unsafe_placeholders(skeleton: str) -> list[UnsafePlaceholder]:
    """Every placeholder of ``skeleton`` that does not stand as a plain shell word."""
    scanner = _Scanner(skeleton)
    scanner.scan_commands(0)
    return [UnsafePlaceholder(index, context) for index, context in sorted(scanner.found.items())]
