"""Where the values are, which variables may hold one, and what arithmetic may name.

Passes 0 and 2 of ``checker``: every sentinel must be a single-quoted word
of its own; every variable that may hold a value is tainted (assigned one,
a ``read``/``mapfile``/``getopts``/``printf -v`` target, a loop variable
over one, ``cd`` into one); a tainted name may be neither one the shell
runs nor one a program reads as code; and every arithmetic context
(``(( ))``, ``$(( ))``, subscripts, ``${x:off}``, ``[[ -eq ]]``) may name
only numbers and the variables this script sets to numbers.  A class over
``CheckState`` (the module docstring of ``state`` says why).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .state import IDENTIFIER, CheckState
from .variables import BASH_INTEGERS, INTEGER_ASSIGNED, is_code_bearing_env, is_shell_control_name

#: The status of the last command, or of a pipeline's: what a test on a value said.
_STATUS_NAMES = frozenset({"?", "PIPESTATUS"})
_ARITH_NAME = re.compile(rb"(?<![0-9A-Za-z_#$])[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ARITHMETIC_TEST_OPERATORS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
#: Nodes whose text bash reads as arithmetic.
_ARITHMETIC_NODES = frozenset({"arithmetic_expansion", "c_style_for_statement"})


class TaintCheck(CheckState):
    """Locating the values, taint, and arithmetic."""

    # -- pass 0: where the values are -----------------------------------------

    def locate_values(self) -> None:
        """Find every sentinel (one scan for their common prefix) and refuse
        one that is not a single-quoted word of its own."""
        if not self.sentinels:
            return
        by_text = self.by_text
        shortest = min(len(s) for s in self.sentinels)
        low, high = min(self.sentinels), max(self.sentinels)  # their prefix is everyone's
        pairs = enumerate(zip(low, high, strict=False))
        common = next((i for i, (a, b) in pairs if a != b), shortest)
        prefix = low[: min(common, shortest - 1)]
        start = self.source.find(prefix)
        while start >= 0:
            end = self.source.find(b"'", start + len(prefix))
            candidate = self.source[start : end + 1] if end >= 0 else b""
            index = by_text.get(candidate)
            if index is not None:
                self.index = index
                node = self.tree.root.descendant_for_byte_range(start, end + 1)
                if node is None or node.type != "raw_string" or node.start_byte != start:
                    self.refuse("quoted", node if node is not None else self.tree.root)
                else:
                    self.value_nodes[start] = node
                start = self.source.find(prefix, end + 1)
            else:
                start = self.source.find(prefix, start + 1)

    # -- pass 2: taint -----------------------------------------------------------

    def taint(self) -> None:
        """Every variable that may hold a value, and every one that holds a number."""
        tree = self.tree
        defs: list[tuple[str, Any, str]] = []  # (name, node, kind)
        for node in tree.nodes:
            kind = node.type
            if kind == "variable_assignment":
                name = self.assigned_name(node)
                if name is not None:
                    defs.append((name, node, "assign"))
            elif kind in ("for_statement", "select_statement"):
                variable = node.child_by_field_name("variable")
                if variable is not None:
                    defs.append((self.text(variable), node, "select" if kind[0] == "s" else "for"))
            elif kind == "command":
                for name, word in self.read_targets(node):
                    defs.append((name, word, "read"))
                resolved = self.resolve_quietly(node)
                if resolved is not None and resolved.name in ("cd", "pushd", "popd"):
                    # a cd a test on a value decides sets $PWD all the same
                    # (review 34's F7: `[ "$c" = a ] && cd d; case "$PWD"`)
                    defs.extend((name, node, "cd") for name in ("PWD", "OLDPWD", "DIRSTACK"))
            elif kind == "expansion":  # ${N:=word} and ${N=word} assign N
                operators = [self.text(c) for c in node.children if tree.field(c) == "operator"]
                name = self.expanded_name(node)
                if name is not None and operators[:1] in ([":="], ["="]):
                    defs.append((name, node, "default"))
        for node in tree.nodes:  # arithmetic assignments: (( i = 1 )), i++
            if node.type in ("binary_expression", "postfix_expression", "unary_expression"):
                operator = node.child_by_field_name("operator")
                if operator is not None and self.text(operator) in (
                    "=",
                    "+=",
                    "-=",
                    "*=",
                    "/=",
                    "%=",
                    "<<=",
                    ">>=",
                    "&=",
                    "^=",
                    "|=",
                    "++",
                    "--",
                ):
                    target = (
                        node.children[0] if node.type != "unary_expression" else node.children[-1]
                    )
                    if target.type == "subscript":  # (( idx[k] = i )): an element of idx
                        target = target.child_by_field_name("name") or target
                    if target.type in ("variable_name", "word") and IDENTIFIER.fullmatch(
                        self.text(target)
                    ):
                        defs.append((self.text(target), node, "arith"))
        self.value_starts = sorted(self.value_nodes)
        # First what a value flows into, then (implicit flows) what a test on
        # one decides: a variable assigned only literals in the branches of a
        # `case` on a value's characters holds the value all the same
        # (review 33's F1 made it jq's filter and a write's destination).
        # Arithmetic may still name one that only numbers are assigned to.
        for implicit in (False, True):
            self.mark_mentions(implicit=implicit)
            changed = True
            while changed:  # until no definition taints a new name
                changed = False
                for name, node, kind in defs:
                    if name in self.tainted:
                        continue
                    carried = kind in ("read", "select") or self.def_carries(node, kind)
                    if carried or (implicit and self.controlled(node)):
                        self.tainted[name] = self.origin(node)
                        if not carried:
                            self.implicit.add(name)
                        changed = True
                if changed:
                    self.mark_mentions(implicit=implicit)
        flowing = set(self.tainted) - self.implicit
        self.guard_names(defs)
        self.defined = {name for name, _, _ in defs}
        self.definitions = {}
        for name, node, kind in defs:
            self.definitions.setdefault(name, []).append((node, kind))
        for name, node, kind in defs:
            if name in INTEGER_ASSIGNED and not self.is_numeric_def(node, kind):
                self.refuse(
                    "arithmetic",
                    node,
                    f"bash evaluates what is assigned to {name} as arithmetic",
                    index=None,
                )
        numeric_candidates: dict[str, bool] = {}
        for name, node, kind in defs:
            numeric_candidates[name] = numeric_candidates.get(name, True) and self.is_numeric_def(
                node, kind
            )
        self.numeric = {
            name for name, ok in numeric_candidates.items() if ok and name not in flowing
        }

    #: Loops: a ``break`` or ``continue`` in one decides what runs after it.
    _LOOPS = frozenset(
        {"while_statement", "until_statement", "for_statement", "c_style_for_statement"}
        | {"select_statement"}
    )

    def controlled(self, node: Any) -> bool:
        """Does a test that carries a value decide whether ``node`` runs (an
        ``if``/``elif``/``while``/``until`` condition, a ``case`` subject, a
        ``for`` list or a C-style loop's header, the left of ``&&``/``||``, or
        a ``break``/``continue`` in a loop that carries one)?  In a script a
        value shaped (a Jinja loop over one repeated its text), everything
        may have been."""
        if self.shaped:
            return True
        tree = self.tree
        child, parent = node, tree.parent(node)
        while parent is not None:
            kind = parent.type
            tests: list[Any] = []
            if kind == "if_statement":
                tests = [c for c in parent.children if tree.field(c) == "condition"]
                for clause in parent.children:
                    if clause.type == "elif_clause":
                        words = [c.type for c in clause.children]
                        end = words.index("then") if "then" in words else len(words)
                        tests.extend(clause.children[1:end])
            elif kind in self._LOOPS or kind == "case_statement":
                heads = ("condition", "value", "initializer", "update")
                tests = [c for c in parent.children if tree.field(c) in heads]
                if kind != "case_statement" and self.carries(parent):
                    body = [c for c in parent.children if tree.field(c) == "body"]
                    jumps = ("break", "continue")
                    if any(
                        n.type == "command" and self.fixed(n.child_by_field_name("name")) in jumps
                        for b in body
                        for n in tree.subtree(b)
                        if n.child_by_field_name("name") is not None
                    ):
                        return True
            elif kind == "list" and child is not parent.children[0]:
                tests = [parent.children[0]]
            if any(self.carries(test) for test in tests):
                return True
            child, parent = parent, tree.parent(parent)
        return False

    #: Names ``read``, ``mapfile`` and ``getopts`` assign by design.
    _READ_DEFAULTS = frozenset({"REPLY", "MAPFILE", "OPTARG", "OPTIND"})

    def guard_names(self, defs: list[tuple[str, Any, str]]) -> None:
        """A variable that may hold a value may not be one the shell runs
        (``read PS4``, ``for PS4 in``, ``printf -v PS4``) or one a program
        reads as code once exported (``PERL5OPT``, ``GIT_SSH_COMMAND``):
        however it was assigned."""
        for name, node, kind in defs:
            if name not in self.tainted or name in self._READ_DEFAULTS:
                continue
            if kind in ("read", "cd") and name in ("PWD", "OLDPWD", "DIRSTACK"):
                continue  # cd {{ x }}: bash sets them; nothing runs them
            if kind == "assign" and self.tree.field(node) is None:
                owner = self.tree.parent(node)
                if name == "IFS" and owner is not None and owner.type == "command":
                    continue  # IFS= read: checked as a construct
            if is_shell_control_name(name):
                self.refuse("shell-control", node, name, index=self.tainted.get(name))
            elif is_code_bearing_env(name):
                self.refuse("env-name", node, name, index=self.tainted.get(name))

    def def_carries(self, node: Any, kind: str) -> bool:
        if kind == "assign":
            value = node.child_by_field_name("value")
            name = node.child_by_field_name("name")
            subscript_carries = name is not None and name.type == "subscript" and self.carries(name)
            return (value is not None and self.carries(value)) or subscript_carries
        if kind == "for":
            values = [c for c in node.children if self.tree.field(c) == "value"]
            has_in = any(c.type == "in" for c in node.children)
            # for f in *: a file name may be a value (echo > {{ x }})
            return not has_in or any(self.carries(v) or self.tree.static(v) is None for v in values)
        if kind in ("arith", "default"):
            return self.carries(node)
        # "cd": a cd {{ x }} is a read target; this one only a test decides
        return kind != "cd"

    def is_numeric_def(self, node: Any, kind: str) -> bool:
        if kind == "arith":
            return True  # the result of arithmetic is a number
        if kind != "assign":
            return False
        value = node.child_by_field_name("value")
        if value is None:
            return True  # x= is empty, which arithmetic reads as 0
        if value.type == "arithmetic_expansion":
            return True
        text = self.tree.static(value)
        return text is not None and (text == "" or _INTEGER.fullmatch(text) is not None)

    def read_targets(self, command: Any) -> Iterator[tuple[str, Any]]:
        """The variables ``read``, ``mapfile``, ``getopts`` and ``printf -v`` assign;
        refuses a name word that is not fixed before the script runs."""
        resolved = self.resolve_quietly(command)
        if resolved is not None and resolved.name in ("cd", "pushd", "popd"):
            if any(self.carries(word) for word in resolved.arguments):
                for name in ("PWD", "OLDPWD", "DIRSTACK"):  # cd {{ x }}: $PWD is the value now
                    yield name, command
            return
        if resolved is None or resolved.name not in self._OPTION_ARGUMENTS:
            return
        name, words = resolved.name, resolved.arguments
        takes_argument = self._OPTION_ARGUMENTS[name]
        targets: list[tuple[str | None, Any]] = []
        position = 0
        while position < len(words):
            text = self.fixed(words[position])
            if text is None or text == "--" or not text.startswith("-") or len(text) < 2:
                if text == "--":
                    position += 1
                break
            letters = text[1:]
            for offset, letter in enumerate(letters):
                if letter not in takes_argument:
                    continue
                if offset + 1 < len(letters):
                    argument: str | None = letters[offset + 1 :]
                    word = words[position]
                else:
                    position += 1
                    word = words[position] if position < len(words) else words[position - 1]
                    argument = self.fixed(word) if position < len(words) else None
                if (name, letter) in (("read", "a"), ("printf", "v")):
                    targets.append((argument, word))
                break
            position += 1
        rest = words[position:]
        if name == "getopts":
            targets.extend((self.fixed(w), w) for w in rest[1:2])
        elif name in ("read", "mapfile", "readarray"):
            targets.extend((self.fixed(w), w) for w in rest[: None if name == "read" else 1])
        for target, word in targets:
            if target is None or not IDENTIFIER.fullmatch(target):
                if not self.carries(word):  # else the value's own check reports it
                    self.refuse("name-word", word, self.text(word)[:40], index=None)
                continue
            yield target, word

    def mark_mentions(self, *, implicit: bool = True) -> None:
        """Add the mentions of tainted names to the value-carrying leaves: their
        expansions, and their names where bash reads them as arithmetic (a
        number a value decided picks text: ``${al:m:1}``, ``${a[m]}``: review
        34's F1).  ``implicit``: also the names only a test on a value
        decided, and ``$?``/``PIPESTATUS`` (the status of such a test: 34's
        F2); without, what a value flows into (``taint``'s first phase)."""
        starts = set(self.value_nodes) | self.extra_starts

        def counts(name: str) -> bool:
            if name in _STATUS_NAMES:
                return implicit
            return self.is_tainted_name(name) and (implicit or name not in self.implicit)

        for node in self.tree.nodes:
            if node.type in ("simple_expansion", "expansion"):
                name = self.expanded_name(node)
                if name is not None and counts(name):
                    starts.add(node.start_byte)
            elif node.type in ("variable_name", "word") and self._read_as_number(node):
                name = self.text(node)
                if IDENTIFIER.fullmatch(name) and counts(name):
                    starts.add(node.start_byte)
        self.value_starts = sorted(starts)

    # -- pass 3: arithmetic ------------------------------------------------------

    def arithmetic(self) -> None:
        """Every arithmetic context may name only numbers and numeric variables."""
        tree = self.tree
        for node in tree.nodes:
            kind = node.type
            contexts: list[Any] = []
            if kind in _ARITHMETIC_NODES or (
                kind == "compound_statement" and node.children and node.children[0].type == "(("
            ):
                contexts = [node]
            elif kind == "subscript":
                index = node.child_by_field_name("index")
                if index is not None and self.text(index) not in ("@", "*"):
                    contexts = [index]
            elif kind == "expansion":
                operators = [c for c in node.children if tree.field(c) == "operator"]
                if operators and self.text(operators[0]) == ":":  # ${x:offset:length}
                    first = operators[0].start_byte
                    contexts = [c for c in node.children if c.is_named and c.start_byte > first]
            elif kind == "binary_expression" and tree.inside(node, ("test_command",)) is not None:
                operator = node.child_by_field_name("operator")
                if operator is not None and self.text(operator) in _ARITHMETIC_TEST_OPERATORS:
                    test = tree.inside(node, ("test_command",))
                    if test.children[0].type == "[[":
                        contexts = [c for c in node.children if c.is_named and c != operator]
            for context in contexts:
                self.arithmetic_context(context)

    def arithmetic_context(self, context: Any) -> None:
        tree = self.tree
        stack = [context]
        while stack:
            node = stack.pop()
            kind = node.type
            if kind in ("command_substitution", "process_substitution", "raw_string", "string"):
                detail = "" if self.carries(node) else self.text(node)[:40]
                self.refuse("arithmetic", node, detail, index=self.origin(node))
                continue
            if kind == "expansion" and any(tree.field(c) == "operator" for c in node.children):
                # ${n:+V}, ${n/1/V}: bash evaluates the operand's text as arithmetic
                self.refuse("arithmetic", node, self.text(node)[:40], index=self.origin(node))
                continue
            if kind in ("simple_expansion", "expansion"):
                name = self.expanded_name(node)
                if name is None or not self.arithmetic_name(name):
                    self.refuse(
                        "arithmetic", node, self.text(node)[:40], index=self.tainted.get(name or "")
                    )
                continue
            if kind in ("variable_name", "word") and not node.named_child_count:
                for match in _ARITH_NAME.finditer(tree.text_bytes(node)):
                    name = match.group().decode()
                    if not self.arithmetic_name(name):
                        self.refuse("arithmetic", node, name, index=self.tainted.get(name))
                continue
            stack.extend(node.children)

    def arithmetic_name(self, name: str) -> bool:
        if name in ("#", "?", "$", "!"):  # numbers; $- and $0 are words (read as names)
            return True
        return (name in BASH_INTEGERS and name not in self.defined) or name in self.numeric
