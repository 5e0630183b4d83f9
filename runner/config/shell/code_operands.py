"""The words of a data program that are code: a value may not stand there.

``jq`` is a data program (it may receive a value in the default mode), but
its filter is a program: ``jq -n {{ x }}`` with ``$ENV.TOKEN | explode |
map(. + 1) | implode`` prints a step secret shifted past the scrubber
(review 19, F2).  So in the default mode the checker reads jq's words as jq
does (``src/main.c``: options anywhere until ``--``, short options
combined, ``-L`` with its path attached or next, ``--arg``/``--argjson``/
``--rawfile``/``--slurpfile`` with two words, ``--indent`` with one) and
refuses a value where jq reads code: the filter (the first operand), the
file of ``-f``/``--from-file`` (the first operand, or the word after it in
jq 1.8), the module path of ``-L``/``--library-path``, an option word, and
any operand before ``--`` (a value ``--run-tests`` makes jq run its stdin
as tests, programs and all).  ``--arg NAME {{ x }}``, ``--args -- {{ x }}``
and stdin stay data.  In strict mode jq is the author's consumer (out of
scope, as docs/shell-rules.md says).

A value may also choose which environment variable a program prints, and a
step's secrets are environment variables: ``jq -rn --arg k {{ x }}
'$ENV[$k]' | rev`` with ``k=TOKEN`` prints the secret reversed, past the
scrubber (review 24, K4); so does ``printenv -- {{ x }} | rev``.  So, in
either mode, a jq that receives a value (by any route) runs no literal
filter word that reads the environment (``$ENV`` or the builtin ``env``)
other than as a fixed ``$ENV.NAME``/``env.NAME``, and ``printenv`` takes no
value among its words.

The other data programs (``STRICT_PROGRAMS``) were judged in the same review
(issue 25): their formats (``date +FMT``, ``seq -f``, ``hexdump -e``,
``stat -c``, ``printf``'s, which ``option_words`` already fixes) print and
evaluate nothing, and their file options (``grep -f``, ``date -f``,
``hexdump -f``) read patterns, dates or formats as data.
"""

from __future__ import annotations

import re
from typing import Any

from .receivers import ReceiverCheck
from .state import Command, Refused

#: jq's long options followed by two words of their own (a name, then a value or a file).
_JQ_TWO_WORDS = frozenset({"--arg", "--argjson", "--rawfile", "--slurpfile", "--argfile"})
#: Files a program reads as its program text that are its stdin (``jq -f /dev/stdin``).
_STDIN_FILES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
#: A fixed variable read from jq's environment: the one use a value cannot steer.
_JQ_FIXED_VARIABLE = re.compile(r"(?<![\w.$])(?:\$ENV|env)\.[A-Za-z_][A-Za-z0-9_]*(?![\w\[])")
#: jq's environment, as a token of a filter: ``$ENV`` (jq 1.6 reads ``$ ENV``
#: too, and comments are white space) or the builtin ``env`` (not ``.env``,
#: ``$env`` or an object key ``{env: 1}``).
_JQ_ENVIRONMENT = re.compile(r"\$(?:\s|#[^\n]*\n)*ENV(?!\w)|(?<![\w.$])env(?!\w|\s*:(?!:))")


def jq_may_load_modules(words: list[str | None], written: set[str]) -> bool:
    """May jq, given ``words`` (None: not fixed before the script runs), load
    code from a file it is not given: a module its filter imports or
    includes (from ``-L`` or the default search path), or ``~/.jq``, which it
    loads into every program (a file named ``.jq`` among ``written``)?"""
    if ".jq" in written:
        return True
    return any(
        word is None
        or "import" in word
        or "include" in word
        or word.startswith("-L")
        or (word.startswith("-") and not word.startswith("--") and "L" in word)
        or word == "--library-path"
        for word in words
    )


def jq_program_words(words: list[Any], fixed: Any) -> list[tuple[Any, str]]:
    """The words of a jq command line that hold or name its program, with
    their role: the filter (its first operand, unless ``-f`` is given), the
    ``-f``/``--from-file`` file, the ``-L``/``--library-path`` directory.
    ``fixed(word)``: its text, or None when not fixed before the script runs
    (such a word where an option may stand counts as the filter)."""
    found: list[tuple[Any, str]] = []
    from_file = done = False
    operands = 0
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        text = fixed(word)
        if done or text is None or text == "-" or not text.startswith("-"):
            if operands == 0:
                found.append((word, "-f file" if from_file else "filter"))
            operands += 1
            continue
        if text == "--":
            done = True
        elif text in _JQ_TWO_WORDS:
            position += 2
        elif text == "--indent":
            position += 1
        elif text in ("--from-file", "--library-path"):
            role = "-f file" if text == "--from-file" else "-L path"
            from_file = from_file or text == "--from-file"
            found.extend((w, role) for w in words[position : position + 1])
            position += 1
        elif text.startswith(("--from-file=", "--library-path=")):
            # jq 1.6 and 1.7 refuse the glued form; a later jq may read it
            role = "-f file" if text.startswith("--from-file=") else "-L path"
            from_file = from_file or role == "-f file"
            found.append((word, role))
        elif text.startswith("--"):
            from_file = from_file or text == "--from-file"
        else:  # short options, combined: -nr, -nLDIR, -nL DIR, -nf FILE
            before, library, attached = text[1:].partition("L")
            from_file = from_file or "f" in before
            if library and not attached:
                found.extend((w, "-L path") for w in words[position : position + 1])
                position += 1
            elif before.endswith("f") and not library:
                found.extend((w, "-f file") for w in words[position : position + 1])
                position += 1
    return found


def jq_environment_read(words: list[Any], fixed: Any) -> tuple[Any, str] | None:
    """The first fixed word of a jq command line (outside ``--arg``'s and
    the like) that reads the environment (``$ENV``, ``env``) but as a fixed
    ``$ENV.NAME``, with the token found; or None."""
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        text = fixed(word)
        if text is None:
            continue
        if text in _JQ_TWO_WORDS:
            position += 2  # a name, then a value or a file: no filter
            continue
        found = _JQ_ENVIRONMENT.search(_JQ_FIXED_VARIABLE.sub("", text))
        if found is not None:
            return word, found.group(0)
    return None


class CodeOperandsCheck(ReceiverCheck):
    """Where a data program reads code, no value stands (default mode)."""

    def receiver(self, command: Any, resolved: Command, via: str) -> None:
        super().receiver(command, resolved, via)
        if resolved.name == "printenv" and via == "argv":
            word = next((w for w in resolved.arguments if self.carries(w)), resolved.name_node)
            raise Refused(
                "code-operand",
                word,
                "printenv prints the variable a value names: name a fixed one, printenv HOME",
            )
        if self.consumers is None and resolved.name == "jq" and via != "env":
            self.jq_words(resolved, via)
        if resolved.name == "jq":
            self.jq_environment(resolved)

    def jq_environment(self, resolved: Command) -> None:
        """A jq that receives a value reads no variable its data may name: no
        literal word outside ``--arg``'s and the like reads ``$ENV`` or
        ``env`` but as a fixed ``$ENV.NAME`` (``$ENV[$k]``, ``env | .[$k]``,
        ``$ENV | to_entries`` print a secret a value chose, transformed)."""
        found = jq_environment_read(resolved.arguments, self.fixed)
        if found is not None:
            word, token = found
            raise Refused(
                "code-operand",
                word,
                f"jq's filter reads the environment ({token}) beside a value: "
                "read a fixed variable, $ENV.HOME",
            )

    def jq_words(self, resolved: Command, via: str) -> None:
        """Read jq's words as jq does; refuse a value where jq reads code, and
        a program text from the stdin (or file) a value reaches jq through."""
        words = resolved.arguments
        program_files: list[Any] = []  # words jq may read its program from
        operands = 0
        from_file = done = False
        position = 0
        while position < len(words):
            word = words[position]
            position += 1
            text = self.fixed(word)
            if self.carries(word):
                if self.text(word).startswith("-"):
                    raise Refused("code-operand", word, "jq reads an option word")
                if operands == 0:
                    role = "-f file" if from_file else "filter"
                    raise Refused("code-operand", word, f"jq's {role}")
                if not done:
                    raise Refused("code-operand", word, "a jq operand before --")
                operands += 1
                continue
            if text is None:
                if done and operands > 0:
                    continue  # a data operand after --: jq reads it as one
                raise Refused("option-word", word, f"jq {self.text(word)[:40]}")
            if done or text == "-" or not text.startswith("-"):
                if operands == 0 and from_file:
                    program_files.append(word)
                operands += 1
                continue
            if text == "--":
                done = True
                continue
            if text == "--run-tests":
                raise Refused("code-operand", word, "jq --run-tests runs what it reads")
            if text in _JQ_TWO_WORDS:
                position = self.jq_option_arguments(words, position, 2)
            elif text == "--indent":
                position = self.jq_option_arguments(words, position, 1)
            elif text.startswith("--"):  # jq 1.6/1.7: -f is a flag; 1.8: FILE follows
                flag = text.split("=", 1)[0]
                from_file = from_file or flag == "--from-file"
                if text == "--library-path":
                    position = self.jq_option_arguments(words, position, 1, code=True)
                elif text == "--from-file":
                    program_files += self.jq_next_is_code(words, position)
            else:  # short options, combined: -nr, -nLDIR, -nL DIR, -nf FILE
                before, library, attached = text[1:].partition("L")
                from_file = from_file or "f" in before
                if library and not attached:
                    position = self.jq_option_arguments(words, position, 1, code=True)
                elif before.endswith("f") and not library:
                    program_files += self.jq_next_is_code(words, position)
        for word in program_files if from_file else ():
            self.jq_program_file(word, via)

    def jq_option_arguments(
        self, words: list[Any], position: int, count: int, code: bool = False
    ) -> int:
        """Skip the ``count`` words an option takes after ``position``; with
        ``code``, the word is a program text or a module path: no value."""
        for word in words[position : position + count]:
            if code and self.carries(word):
                raise Refused("code-operand", word, "jq reads code from this file or path")
            loose = self.fixed(word) is None and not self.carries(word)
            if not code and loose and word.type != "string":  # "$(cmd)" is one word
                raise Refused("option-word", word, f"jq {self.text(word)[:40]}")
        return min(position + count, len(words))

    def jq_next_is_code(self, words: list[Any], position: int) -> list[Any]:
        """The word after ``-f`` (jq 1.8 reads its program from it): no value."""
        self.jq_option_arguments(words, position, 1, code=True)
        return words[position : position + 1]

    def jq_program_file(self, word: Any, via: str) -> None:
        """``jq -f FILE`` reads FILE as its program: not the stdin a value
        comes through, nor a file a value was written to."""
        text = self.fixed(word)
        if text is None:
            raise Refused("code-operand", word, "jq's -f file")
        if via in ("stdin", "<( )") and text in _STDIN_FILES:
            raise Refused("code-operand", word, f"jq -f {text} reads its program from stdin")
        if via == "file" and self.names_tainted_path(word):
            raise Refused("code-operand", word, f"jq -f {text}: a file a value was written to")
