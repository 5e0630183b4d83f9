"""The subset of bash the checker models: lines that change what other lines mean.

Pass 1 of ``checker``: a script whose parse bash would not share is refused
whole (``agreement``); so is, in a script with values, anything that
rebinds names or runs text as code (functions,
``alias``, ``eval``, ``source``, ``set``/``shopt`` beyond the usual
options, ``declare -n``, ``${!x}``, backticks, ``>( )``, a command name that
is not a literal word, bash-only syntax in ``sh``).  Builds on the flow
check (``test`` and ``printf`` words, redirects), hence a class over
``FlowCheck`` (the module docstring of ``state`` says why classes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .agreement import AgreementCheck
from .flows import FlowCheck
from .programs import is_executor
from .rules import (
    BUILTINS,
    DECLARATION_BUILTINS,
    REBINDING_BUILTINS,
    SAFE_SET_LETTERS,
    SAFE_SET_OPTIONS,
    SAFE_SHOPT,
    STDIN_BUILTINS,
)
from .state import IDENTIFIER, READING_REDIRECTS, Command, Refused, base_name, system_spelling
from .variables import is_rebinding_name

#: Shell reserved words: a "command" by one of these names is a misparse.
_KEYWORDS = frozenset(
    {
        "!",
        "{",
        "}",
        "if",
        "then",
        "elif",
        "else",
        "fi",
        "for",
        "while",
        "until",
        "do",
        "done",
        "case",
        "esac",
        "in",
        "select",
        "function",
        "time",
        "coproc",
        "[[",
        "]]",
    }
)
#: Bash-only syntax: refused when the step's shell is sh (dash, busybox).
_BASH_ONLY = {
    "herestring_redirect": "<<<",
    "process_substitution": "<( )",
    "array": "arrays",
    "subscript": "arrays",
    "c_style_for_statement": "for (( ))",
    "select_statement": "select",
}


class SubsetCheck(FlowCheck, AgreementCheck):
    """The whole script lies in the subset the checker models."""

    def constructs(self) -> None:
        """Refuse, anywhere in the script, what changes the meaning of other lines."""
        self.index = None
        tree = self.tree
        self.made = self.files_made()
        self._strict_made: set[str] | None = None
        for node in tree.nodes:
            kind = node.type
            if kind == "function_definition":
                name = node.child_by_field_name("name")
                self.refuse("function", node, self.text(name) if name is not None else "")
            elif kind == "command":
                self.command_construct(node)
            elif kind == "declaration_command":
                self.declaration_construct(node)
            elif kind == "translated_string" or (
                kind == "$"
                and (after := node.next_sibling) is not None
                and after.type == "string"
                and after.start_byte == node.end_byte
            ):
                # $"hi": bash replaces it with a message catalog's text and
                # expands that, $( ) and all; the script may write the catalog
                self.refuse("translation", node)
            elif kind == "unset_command":
                words = node.named_children
                self.unset_construct(words, [self.fixed(word) for word in words])
            elif kind == "variable_assignment":
                self.assignment_construct(node)
            elif kind == "array":  # a=([k]=v): k is arithmetic
                if self.dialect == "posix":  # before the check below (review 41's F2)
                    self.refuse("shell-dialect", node, "an array in sh")
                for element in node.named_children:
                    # [k]=, [k]+=, [b[m]]=: the whole key is arithmetic (review 12)
                    key = re.match(r"\[(.*)\]\+?=", self.text(element), re.S)
                    if key and not key.group(1).strip().isdigit():
                        self.refuse("arithmetic", element, self.text(element)[:40])
            elif kind == "unary_expression" and tree.inside(node, ("test_command",)):
                operator = node.child_by_field_name("operator") or node.children[0]
                if self.text(operator) in ("-v", "-R"):
                    operand = node.children[-1]
                    test = tree.inside(node, ("test_command",))
                    if "[" in self.text(node):
                        self.refuse("arithmetic", node, self.text(node)[:40])
                    elif test.children[0].type != "[[":
                        pass  # [ -v "$m" ]: test_words refuses it
                    elif operand is not operator and self.tree.static(operand) is None:
                        if self.carries(operand):
                            continue  # the value's own check refuses it
                        self.refuse("test-operator", operand, "-v/-R of a word not fixed")
            elif kind == "expansion":
                operators = [c for c in node.children if tree.field(c) == "operator"]
                texts = [self.text(c) for c in operators]
                if texts[:1] == ["!"] or (texts[:1] == ["@"] and texts[1:2] != ["Q"]):
                    self.refuse("indirection", node, self.text(node)[:40])
            elif kind == "process_substitution" and self.text(node).startswith(">("):
                self.refuse("stdin", node, ">( )")
            elif kind == "command_substitution" and node.children[0].type == "`":
                self.refuse("quoted", node, "backticks")
            elif kind in ("test_command",) and node.children[0].type == "[[":
                if self.dialect == "posix":
                    self.refuse("shell-dialect", node, "[[ ]] in sh")
            elif kind == "test_command" and node.children[0].type == "[":
                try:
                    self.bracket_test_construct(node)
                except Refused as refused:
                    self.refuse(refused.rule, refused.node, refused.detail)
            elif kind == "compound_statement" and node.children[0].type == "((":
                if self.dialect == "posix":
                    self.refuse("shell-dialect", node, "(( )) in sh")
            elif self.dialect == "posix" and _BASH_ONLY.get(kind):
                self.refuse("shell-dialect", node, f"{_BASH_ONLY[kind]} in sh")
            elif self.dialect == "posix" and kind == "file_redirect":
                operator = next((self.text(c) for c in node.children if not c.is_named), "")
                if operator.startswith("&>"):
                    self.refuse("shell-dialect", node, f"{operator} in sh")

    def command_construct(self, command: Any) -> None:
        try:
            resolved = self.resolve(command)
        except Refused as refused:
            if not self.carries(refused.node):  # else the value's own check reports it
                self.refuse(refused.rule, refused.node, refused.detail)
            return
        if resolved.name_node is None:
            return  # assignments only
        if resolved.name is None:
            if not self.carries(resolved.name_node):
                self.refuse(
                    "unknown-command", resolved.name_node, self.text(resolved.name_node)[:40]
                )
            return
        name, arguments = resolved.name, resolved.arguments
        if name in _KEYWORDS:  # ! { eval "$V"; }: tree-sitter made "{" a command
            self.refuse("syntax", resolved.name_node, f"{name} read as a command")
            return
        statics = [self.fixed(a) for a in arguments]
        if name == "unset":  # command unset 'a[m]': bash evaluates the subscript (review 12)
            self.unset_construct(arguments, statics)
        path = self.tree.static(resolved.name_node) or ""
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if "/" in path and ("proc" in parts or "dev" in parts):  # /proc/self/exe is the shell
            self.refuse("file-flow", resolved.name_node, f"{path[:40]}: a program under /proc")
        elif path and name not in BUILTINS and base_name(path) in self.made_programs():
            # ./mysh may be a copy of bash; so may a bare wc once a copy sits
            # in a PATH directory (cp "$BASH" .venv/bin/wc: the fourteenth review)
            self.refuse("file-flow", resolved.name_node, f"{path[:40]}: a program this script made")
        elif (
            path
            and name not in BUILTINS
            and self.unnamed_file_made
            and (not system_spelling(path) or ("/" not in path and self.consumers is not None))
        ):
            # > w${e}c; ./wc: a file made under a name known only at run
            # time may be any program run by a path (in strict mode, by
            # any name: a PATH directory may hold it; the sixteenth review)
            self.refuse(
                "file-flow",
                resolved.name_node,
                f"{path[:40]}: this script makes a file under a name known only at run time",
            )
        if (
            name in ("test", "[")
            and any(s in ("-v", "-R") for s in statics)
            and any(s is not None and "[" in s for s in statics)
        ):
            self.refuse("arithmetic", resolved.name_node, "test -v of a subscript")
        try:
            if name in ("test", "["):
                words = arguments[:-1] if name == "[" and statics[-1:] == ["]"] else arguments
                self.test_words(words, [self.test_static(w) for w in words])
            elif name == "printf" and not any(self.carries(a) for a in arguments):
                self.printf(resolved)
        except Refused as refused:
            self.refuse(refused.rule, refused.node, refused.detail)
        if is_executor(name) and not (self.consumers and name in self.consumers):
            source = self.stdin_source(command)
            if source is not None:
                self.refuse("executor", resolved.name_node, f"{name} reads its stdin from {source}")
        if name in DECLARATION_BUILTINS:  # builtin declare, command typeset, "export"
            self.refuse("declaration", resolved.name_node, f"{name} through a wrapper")
        elif name in REBINDING_BUILTINS:
            self.refuse("rebinding", resolved.name_node, name)
        elif name == "exec" and arguments:
            self.refuse("rebinding", resolved.name_node, "exec with a command")
        elif name == "exec":  # exec 3>f, exec >f: later commands may print values there
            parent = self.tree.parent(command)
            if parent is not None and parent.type == "redirected_statement":
                try:
                    self.record_redirects(parent)
                except Refused as refused:
                    self.refuse(refused.rule, refused.node, refused.detail)
        elif name == "shopt":
            if (
                any(s is None for s in statics)
                or not any(s in ("-s", "-u") for s in statics)
                or any(
                    not (s in ("-s", "-u", "-q", "-p") or s in SAFE_SHOPT)
                    for s in statics
                    if s is not None
                )
            ):
                self.refuse(
                    "rebinding", resolved.name_node, "shopt " + " ".join(map(str, statics))[:40]
                )
        elif name == "set":
            self.set_construct(resolved, statics)
        elif name in ("mapfile", "readarray") and any(
            s is None or (s.startswith("-") and "C" in s) for s in statics
        ):
            self.refuse("rebinding", resolved.name_node, f"{name} -C")
        elif name == "wait":
            self.wait_construct(resolved.name_node, arguments, statics)
        elif name == "read":  # read -d $m: bash splits $m into more names (a[$(cmd)])
            for word in self.option_arguments(arguments, statics, self._OPTION_ARGUMENTS["read"]):
                if self.fixed(word) is None and not self.carries(word):
                    self.refuse("option-word", word, self.text(word)[:40])

    @staticmethod
    def option_arguments(
        words: list[Any], statics: list[str | None], takes_argument: str
    ) -> Iterator[Any]:
        """The words a builtin reads as its options' arguments (``-d X``)."""
        position = 0
        while position < len(words):
            text = statics[position]
            if text is None or text == "--" or not text.startswith("-") or len(text) < 2:
                return
            letters = text[1:]
            for offset, letter in enumerate(letters):
                if letter in takes_argument:
                    if offset + 1 == len(letters) and position + 1 < len(words):
                        position += 1
                        yield words[position]
                    break
            position += 1

    def files_made(self) -> set[str]:
        """The base names of the files this script may create: redirect
        targets and the words of the programs that copy or link files."""
        made: set[str] = set()
        self.unnamed_file_made = False
        for node in self.tree.nodes:
            words: list[Any] = []
            if node.type == "file_redirect":
                words = [node.child_by_field_name("destination")]
            elif node.type == "command":
                resolved = self.resolve_quietly(node)
                if resolved is not None and resolved.name in self._MAKERS:
                    words = resolved.arguments
            for word in words:
                text = self.tree.static(word) if word is not None else None
                if text and not text.startswith("-"):
                    made.add(base_name(text.split("=", 1)[-1]))
                elif (
                    text is None
                    and word is not None
                    and not self.carries(word)
                    and not self.named_by_environment(word)
                ):
                    self.unnamed_file_made = True  # > "$d", > w${e}c; not >> "$GITHUB_OUTPUT"
        return made

    def made_programs(self) -> set[str]:
        """The names a program this script runs may have been made under:
        the files it makes (``files_made``); in strict mode, also every word
        of a program other than the built-in set (``xxd -r -p - wc`` and
        ``lz4 -d x wc`` write a file no list of copiers names; the
        fourteenth review)."""
        if self.consumers is None:
            return self.made
        if self._strict_made is None:
            made = set(self.made)
            for command in self.commands:
                resolved = self.resolve_quietly(command)
                if resolved is None or resolved.name is None or resolved.name in BUILTINS:
                    continue
                for word in resolved.arguments:
                    text = self.tree.static(word)
                    if text and not text.startswith("-"):
                        made.add(base_name(text.split("=", 1)[-1]))
            self._strict_made = made
        return self._strict_made

    def stdin_source(self, command: Any) -> str | None:
        """Where ``command`` reads its stdin from, if anything but the
        step's own (nothing) or a heredoc: a pipe, a file, a here-string."""
        tree = self.tree
        node = command
        while tree.parent(node) is not None:
            parent = tree.parent(node)
            if parent.type in ("command_substitution", "process_substitution"):
                return None
            if parent.type == "pipeline":
                stages = [c for c in parent.children if c.is_named]
                if stages and stages[0].id != node.id:
                    return "a pipe"
            if parent.type == "redirected_statement":
                for redirect in parent.children:
                    if redirect.type == "herestring_redirect":
                        return "a here-string"
                    if redirect.type == "file_redirect":
                        operator = next(
                            (self.text(c) for c in redirect.children if not c.is_named), ""
                        )
                        target = redirect.child_by_field_name("destination")
                        text = self.tree.static(target) if target is not None else None
                        if operator in READING_REDIRECTS and text != "/dev/null":
                            return "a file"
            node = parent
        return None

    def set_construct(self, resolved: Command, statics: list[str | None]) -> None:
        expect_option = off = False
        for word, text in zip(resolved.arguments, statics, strict=True):
            if text is None:
                self.refuse("rebinding", word, "set with a word read at run time")
                return
            if expect_option:
                expect_option = False
                turning_off = {"xtrace", "verbose"} if off else set()
                if text not in SAFE_SET_OPTIONS | turning_off:
                    self.refuse("rebinding", word, f"set -o {text}")
                continue
            if text == "--" or not text.startswith(("-", "+")):
                self.refuse("rebinding", word, "set with positional parameters")
                return
            letters = set(text[1:])
            # +x, +v turn tracing off: harmless
            allowed = SAFE_SET_LETTERS | (set("xv") if text.startswith("+") else set())
            if not letters <= allowed:
                self.refuse("rebinding", word, f"set {text}")
            expect_option = "o" in letters
            off = text.startswith("+")

    def bracket_test_construct(self, test: Any) -> None:
        """``[ ... ]`` as tree-sitter files it, flattened back to test's words."""
        words: list[Any] = []
        stack = list(reversed(test.children[1:-1]))
        while stack:
            node = stack.pop()
            if node.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
                stack.extend(reversed(node.children))
            else:
                words.append(node)
        self.test_words(words, [self.test_static(w) for w in words])

    def declaration_construct(self, declaration: Any) -> None:
        if self.carries(declaration):
            return  # the value's own check refuses the whole declaration
        for child in declaration.named_children:
            if child.type == "variable_assignment":
                continue
            text = self.fixed(child)
            bad = text is None or text.startswith(("-", "+")) or not IDENTIFIER.fullmatch(text)
            if bad and not self.carries(child):  # else the value's own check reports it
                self.refuse("declaration", child, self.text(child)[:40])

    def wait_construct(self, name: Any, words: list[Any], statics: list[str | None]) -> None:
        """``wait -p NAME`` assigns a job's id to NAME, bash's last ``-p``
        winning: every ``-p``'s name a literal identifier (``wait -p
        'a[$(cmd)]'`` evaluates the subscript, glued ``-p'a[i]'`` too: review
        27's W1; a second ``-p``: 28's W4), never one the shell acts on
        (``PATH``: W2); no word of a value's among its arguments; every other
        literal word a number, a job (``%1``) or such a name; and a word the
        script computes only after a literal ``--``: before it, ``"$f"`` may
        be ``-pNAME`` (29's W5, 30's W6)."""
        if any(self.carries(word) for word in words):
            self.refuse("name-word", name, "wait -p")
            return
        for index, text in enumerate(statics):
            if text == "--":
                return  # the rest are ids, whatever they hold
            if text is None and self.text(words[index]) in ("$!", '"$!"'):
                continue  # the last job's id, set by bash: never an option
            if text is None:
                self.refuse("name-word", name, 'wait "$id" before --: write wait -- "$id"')
                return
            if text == "":
                continue
            named: str | None = text
            if text.startswith("-") and "p" in text[1:]:
                glued = text[text.index("p") + 1 :]
                named = glued or (statics[index + 1] if index + 1 < len(statics) else None)
            elif (
                text.startswith("-") or text.isdigit() or (text.startswith("%") and "[" not in text)
            ):
                continue
            if named is None or not IDENTIFIER.fullmatch(named):
                self.refuse("name-word", name, "wait -p")
                return
            if is_rebinding_name(named):
                self.refuse("shell-control", name, f"wait -p {named}")
                return

    def unset_construct(self, words: list[Any], statics: list[str | None]) -> None:
        """``unset`` takes literal names only (``unset 'a[m]'`` evaluates m),
        and never one a script may not assign: with PATH unset, bash looks
        a bare name up in the working directory (the fifteenth review)."""
        for word, text in zip(words, statics, strict=True):
            if text is None or not (IDENTIFIER.fullmatch(text) or text in ("-v", "-f", "-n")):
                self.refuse("name-word", word, self.text(word)[:40])
            elif is_rebinding_name(text):
                self.refuse("shell-control", word, f"unset {text}")

    def assignment_construct(self, assignment: Any) -> None:
        name = self.assigned_name(assignment)
        if name is None:
            return
        if is_rebinding_name(name):
            owner = self.tree.parent(assignment)
            if name == "IFS" and owner is not None and owner.type == "command":
                resolved = self.resolve_quietly(owner)
                if resolved is not None and resolved.name in STDIN_BUILTINS:
                    return  # IFS= read -r line: for that read only
            if name == "HOME" and owner is not None and owner.type == "command":
                resolved = self.resolve_quietly(owner)
                if resolved is not None and resolved.name not in BUILTINS:
                    return  # HOME=/tmp/h git config: that program's environment only
            self.refuse("shell-control", assignment, name)
