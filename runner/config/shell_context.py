"""Where a ``{{ }}`` placeholder sits in shell syntax, found without running anything.

Values are shell-quoted for the author, so a placeholder must stand where a
word can start: quoting it again (``"{{ x }}"``) would glue the quotes into
the value, and inside backticks or a heredoc the shell re-reads the text as
code.  :func:`quoted_placeholders` scans a ``run`` template and reports every
placeholder that sits inside single or double quotes, ``$'...'``, backticks or
a heredoc body.  ``$( )`` starts a fresh context, so ``"$(cat {{ f }})"`` is
fine.  Jinja ``{% %}`` and ``{# #}`` blocks are skipped: they print nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^']*)'|\"([^\"]*)\"|\\?([A-Za-z_][A-Za-z0-9_]*))")

HINTS = {
    "single quotes": "values are quoted for you; remove the quotes",
    "double quotes": "values are quoted for you; remove the quotes",
    "$'...' quotes": "values are quoted for you; remove the quotes",
    "backticks": "the shell re-reads backtick text as code; use $( ) instead",
    "a heredoc": "heredoc text is not re-quoted; write the file with a write: step instead",
}


@dataclass(frozen=True)
class QuotedPlaceholder:
    offset: int  # of the "{{" in the template source
    context: str  # a key of HINTS

    @property
    def message(self) -> str:
        return f"{{{{ }}}} inside {self.context}: {HINTS[self.context]}"


def _skip_jinja(source: str, i: int) -> int:
    """Index just past the Jinja tag starting at ``i``, or ``i`` if none starts there."""
    closers = {"{{": "}}", "{%": "%}", "{#": "#}"}
    closer = closers.get(source[i : i + 2])
    if closer is None:
        return i
    end = source.find(closer, i + 2)
    return len(source) if end < 0 else end + 2


def quoted_placeholders(source: str) -> list[QuotedPlaceholder]:
    """Every placeholder of ``source`` that is not at a shell word position."""
    found: list[QuotedPlaceholder] = []
    # Stack of contexts: "normal", "subst" (inside $( ), with a paren depth),
    # "double", "single", "ansi", "backtick".
    stack: list[list] = [["normal", 0]]
    pending_heredocs: list[tuple[str, bool]] = []
    i = 0
    n = len(source)
    word_start = True
    while i < n:
        context = stack[-1][0]
        two = source[i : i + 2]
        if two in ("{{", "{%", "{#"):
            if two == "{{" and context in ("double", "single", "ansi", "backtick"):
                names = {
                    "double": "double quotes",
                    "single": "single quotes",
                    "ansi": "$'...' quotes",
                    "backtick": "backticks",
                }
                found.append(QuotedPlaceholder(i, names[context]))
            i = _skip_jinja(source, i)
            word_start = False
            continue
        char = source[i]
        if context == "single":
            if char == "'":
                stack.pop()
            i += 1
            continue
        if context in ("ansi", "backtick"):
            if char == "\\":
                i += 2
                continue
            if (context == "ansi" and char == "'") or (context == "backtick" and char == "`"):
                stack.pop()
            i += 1
            continue
        if context == "double":
            if char == "\\":
                i += 2
            elif char == '"':
                stack.pop()
                i += 1
            elif two == "$(":
                stack.append(["subst", 1])
                i += 2
            elif char == "`":
                stack.append(["backtick", 0])
                i += 1
            else:
                i += 1
            continue
        # normal or subst: unquoted shell text
        if char == "\\":
            i += 2
            word_start = False
            continue
        if char == "#" and word_start:
            end = source.find("\n", i)
            i = n if end < 0 else end
            continue
        if char == "\n":
            i += 1
            word_start = True
            if pending_heredocs:
                i = _skip_heredoc_bodies(source, i, pending_heredocs, found)
                pending_heredocs = []
            continue
        if two == "<<" and source[i : i + 3] != "<<<":
            match = _HEREDOC.match(source, i)
            if match:
                delimiter = match.group(2) or match.group(3) or match.group(4) or ""
                pending_heredocs.append((delimiter, bool(match.group(1))))
                i = match.end()
                word_start = False
                continue
        if two == "$'":
            stack.append(["ansi", 0])
            i += 2
        elif two == "$(":
            stack.append(["subst", 1])
            i += 2
        elif char == "'":
            stack.append(["single", 0])
            i += 1
        elif char == '"':
            stack.append(["double", 0])
            i += 1
        elif char == "`":
            stack.append(["backtick", 0])
            i += 1
        elif context == "subst" and char == "(":
            stack[-1][1] += 1
            i += 1
        elif context == "subst" and char == ")":
            stack[-1][1] -= 1
            if stack[-1][1] == 0:
                stack.pop()
            i += 1
        else:
            i += 1
        word_start = char in " \t;|&()<>"
    return found


def _skip_heredoc_bodies(
    source: str, i: int, heredocs: list[tuple[str, bool]], found: list[QuotedPlaceholder]
) -> int:
    """Consume the bodies of the heredocs opened on the previous line."""
    for delimiter, strip_tabs in heredocs:
        while i < len(source):
            end = source.find("\n", i)
            line_end = len(source) if end < 0 else end
            line = source[i:line_end]
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                i = line_end + 1
                break
            start = source.find("{{", i, line_end)
            while start >= 0:
                found.append(QuotedPlaceholder(start, "a heredoc"))
                start = source.find("{{", start + 2, line_end)
            i = line_end + 1
    return min(i, len(source))
