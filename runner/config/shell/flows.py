"""Follow each value from where it stands to every command that reads it.

Pass 3 of ``checker``: a value (a sentinel, or a mention of a tainted
variable, which must be ``"$NAME"``) must be data where it stands (an
argument, a redirect target, a here-string, an assignment, a ``case`` or
``for`` word, one operand of a ``[ ]`` test); from there the climb to the
top of the script finds every reader: the command itself, later pipeline
stages, the commands a compound statement's stdin feeds, and whoever reads
a ``$( )`` or ``<( )`` that holds it.  ``printf`` and ``test`` read some of
their words as options and operators, so those words must be fixed.  Each
reader is judged by ``receivers``; this class builds on it (the module
docstring of ``state`` says why classes).
"""

from __future__ import annotations

from typing import Any

from .option_words import TEST_OPERATORS, OptionWordsCheck
from .rules import RULES
from .state import READING_REDIRECTS, Refused
from .variables import is_code_bearing_env, is_shell_control_name

_SAFE_REDIRECTS = frozenset({">", ">>", "<", ">|", "&>", "&>>", "<>"})
#: Statements that keep a command a plain statement (nothing evaluates it).
_PLAIN_CONTAINERS = frozenset(
    {
        "program",
        "list",
        "pipeline",
        "redirected_statement",
        "negated_command",
        "subshell",
        "compound_statement",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "do_group",
        "for_statement",
        "c_style_for_statement",
        "select_statement",
        "case_statement",
        "case_item",
    }
)
#: The rule for a value found under a node of this type.
_RULE_BY_PARENT = {
    "arithmetic_expansion": "arithmetic",
    "binary_expression": "arithmetic",
    "unary_expression": "arithmetic",
    "postfix_expression": "arithmetic",
    "ternary_expression": "arithmetic",
    "parenthesized_expression": "arithmetic",
    "c_style_for_statement": "arithmetic",
    "subscript": "arithmetic",
    "expansion": "expansion",
    "simple_expansion": "expansion",
    "heredoc_body": "heredoc",
    "heredoc_redirect": "heredoc",
    "heredoc_start": "heredoc",
    "case_item": "case-pattern",
    "for_statement": "for-list",
    "select_statement": "for-list",
    "declaration_command": "declaration",
    "unset_command": "declaration",
    "command_name": "command-name",
    "string": "quoted",
    "translated_string": "quoted",
    "ansi_c_string": "quoted",
    "comment": "quoted",
    "array": "assignment",
    "test_command": "double-bracket",
}


class FlowCheck(OptionWordsCheck):
    """Values, from where they stand to their readers."""

    # -- pass 4: values and their readers ------------------------------------------

    def flows(self) -> None:
        for node in self.value_nodes.values():
            self.index = self.sentinel_index(node)
            self.judge(node)
        for node in self.tree.nodes:
            if node.type in ("simple_expansion", "expansion"):
                name = self.expanded_name(node)
                if name is None or not self.is_tainted_name(name):
                    # ${al:m:1}, ${a[m]}: a number that may hold a value picks
                    # the text (review 34's F1), a mention of it all the same
                    name = self.picking_name(node)
                if name is not None and self.is_tainted_name(name):
                    self.index = self.tainted.get(name)
                    try:
                        self.mention(node, name)
                    except Refused as refused:
                        detail = f"${name}: {RULES[refused.rule][0]}"
                        if refused.rule in (
                            "executor",
                            "consumer",
                            "evaluating-builtin",
                            "wrapper",
                            "split",
                            "env-name",
                        ):
                            self.refuse(refused.rule, refused.node, refused.detail)
                        else:
                            self.refuse("tainted-variable", refused.node, detail)
        self.environment_readers()

    def judge(self, node: Any) -> None:
        try:
            self.data_position(node)
        except Refused as refused:
            self.refuse(refused.rule, refused.node, refused.detail)

    def mention(self, node: Any, name: str) -> None:
        """A tainted variable: only ``"$NAME"`` (``"${NAME}"``, ``"${NAME[@]}"``)
        where a value may stand."""
        tree = self.tree
        if tree.inside(node, ("arithmetic_expansion", "c_style_for_statement")) is not None:
            return  # judged by the arithmetic pass
        children = [c.type for c in node.children]
        plain = node.type == "simple_expansion" or children == ["${", "variable_name", "}"]
        if not plain and children == ["${", "subscript", "}"]:
            index = node.children[1].child_by_field_name("index")
            plain = index is not None and (
                self.text(index) in ("@", "*") or self.text(index).isdigit()
            )
        parent = tree.parent(node)
        if not plain:
            raise Refused("expansion", node)
        if parent is None or parent.type != "string":
            heredoc = tree.inside(node, ("heredoc_body", "heredoc_redirect"))
            raise Refused("heredoc" if heredoc is not None else "expansion", node)
        self.data_position(node)

    def data_position(self, node: Any) -> None:
        """``node`` yields a value: accept only if the word it is part of is data,
        and every command it reaches may receive it."""
        tree = self.tree
        word = node
        while tree.parent(word) is not None and tree.parent(word).type in (
            "concatenation",
            "string",
        ):
            word = tree.parent(word)
        parent, field = tree.parent(word), tree.field(word)
        if parent is None:
            raise Refused("unclassified", node)
        if self.brace_expands(word):  # test {-v,{{ x }}}: two words, the value after -v
            raise Refused("split", word, "brace expansion")
        kind = parent.type
        if kind == "command" and field == "argument":
            self.argument(parent, word)
            self.statement(parent, parent)
        elif kind == "file_redirect" and field == "destination":
            operator = next((self.text(c) for c in parent.children if not c.is_named), "")
            if operator not in _SAFE_REDIRECTS:
                raise Refused("redirect", parent, operator)
            statement = tree.parent(parent)
            if operator in READING_REDIRECTS:
                self.stdin_of(statement, parent)  # reads the file the value names
            else:
                self.content_written = True  # : > {{ x }}: the value is a file name now
            self.statement(statement, statement)
        elif kind == "herestring_redirect":
            statement = tree.parent(parent)
            self.stdin_of(statement, parent)
            self.statement(statement, statement)
        elif kind == "variable_assignment" and field == "value":
            self.assignment(parent)
        elif kind == "case_statement" and field == "value":
            self.statement(parent, None)
        elif kind == "for_statement" and field == "value":
            # The loop variable is tainted.  tree-sitter files select as a
            # for_statement: it prints its list as a menu on stderr (review
            # 13), so the menu goes where the statement's stderr goes.
            printing = parent.children[0].type == "select"
            self.statement(parent, parent if printing else None)
        elif kind in ("binary_expression", "unary_expression", "test_command"):
            self.single_bracket_test(word)
        else:
            rule = _RULE_BY_PARENT.get(kind, "unclassified")
            if kind == "case_item" and field != "value":
                rule = "unclassified"
            raise Refused(rule, node, "" if rule != "unclassified" else kind)

    def assignment(self, assignment: Any) -> None:
        tree = self.tree
        name_node = assignment.child_by_field_name("name")
        operator = next((self.text(c) for c in assignment.children if not c.is_named), "")
        if name_node is None or name_node.type != "variable_name" or operator != "=":
            raise Refused("assignment", assignment)
        name = self.text(name_node)
        if is_shell_control_name(name):
            raise Refused("shell-control", assignment, name)
        owner = tree.parent(assignment)
        if owner is not None and owner.type == "declaration_command":
            # declare/local NAME='(...)' on an array evaluates the subscripts in it
            raise Refused("declaration", owner)
        elif owner is not None and owner.type == "command":  # NAME={{ x }} program ...
            if is_code_bearing_env(name):
                raise Refused("env-name", assignment, name)
            resolved = self.resolve(owner)
            if resolved.name_node is not None:
                self.receiver(owner, resolved, "env")
            self.statement(owner, owner)
        else:
            self.statement(owner if owner.type == "variable_assignments" else assignment, None)

    def argument(self, command: Any, word: Any) -> None:
        """``word`` (an argument of ``command``) carries a value."""
        resolved = self.resolve(command)
        if resolved.name_node is not None and (
            resolved.name_node == word
            or (
                resolved.name_node.start_byte >= word.start_byte
                and resolved.name_node.end_byte <= word.end_byte
            )
        ):
            raise Refused("command-name", word)
        if resolved.name is None:
            raise Refused("unknown-command", resolved.name_node, self.text(resolved.name_node)[:40])
        if command.id in self.arguments_judged:
            return  # another value of this command: the same verdict
        self.receiver(command, resolved, "argv")
        if resolved.name == "printf":
            self.printf(resolved)
        if resolved.name in ("test", "["):
            self.test_arguments(resolved)
        self.arguments_judged.add(command.id)

    def single_bracket_test(self, word: Any) -> None:
        """``[ {{ x }} = y ]``: one value; operators from ``TEST_OPERATORS`` only (no ``-v``)."""
        tree = self.tree
        expression = tree.parent(word)
        test = expression if expression.type == "test_command" else tree.parent(expression)
        if test is None or test.type != "test_command":
            if tree.inside(expression, ("test_command",)) is not None:
                outer = tree.inside(expression, ("test_command",))
                if outer.children[0].type == "[[":
                    raise Refused("double-bracket", word)
                raise Refused("test-operator", word, "a compound test")
            raise Refused("arithmetic", word)
        if test.children[0].type != "[":
            raise Refused("double-bracket", word)
        if expression is not test:
            operator = expression.child_by_field_name("operator")
            if operator is None or self.text(operator) not in TEST_OPERATORS:
                raise Refused(
                    "test-operator", word, self.text(operator) if operator is not None else ""
                )
        operands = [n for n in expression.children if n.is_named and tree.field(n) != "operator"]
        if sum(1 for n in operands if self.carries(n)) > 1:
            raise Refused("test-operator", word, "two values")
        self.statement(test, test)  # its error message quotes the value

    def statement(self, node: Any, command: Any) -> None:
        """Climb from a statement to the top: every container must keep it a
        plain statement, and every reader of its output must receive data.
        ``command`` (None: nothing is printed with the value) is what prints."""
        tree = self.tree
        while tree.parent(node) is not None:
            parent, field = tree.parent(node), tree.field(node)
            key = (node.id, 1 if command is not None else 0)
            if key in self.climbed:
                return
            self.climbed.add(key)
            kind = parent.type
            if kind == "command_substitution":
                if command is not None:
                    # What the commands inside print on other descriptors
                    # (>&2, an error) is the enclosing statement's output
                    # (review 13): its redirects and pipeline get the value.
                    outer = self.enclosing_statement(parent)
                    self.statement(outer, outer)
                self.substitution(parent)
                return
            if kind == "process_substitution":
                self.process_substitution(parent)
                return
            if kind == "pipeline" and command is not None:
                self.pipeline_after(parent, node)
            if kind == "redirected_statement" and field == "body":
                if command is not None:
                    self.record_redirects(parent)
            elif kind in _PLAIN_CONTAINERS:
                if kind == "case_item" and field == "value":
                    raise Refused("case-pattern", node)
            elif kind == "function_definition":
                pass  # refused as a whole by the first pass
            else:
                raise Refused(_RULE_BY_PARENT.get(kind, "unclassified"), node, kind)
            node = parent

    def enclosing_statement(self, node: Any) -> Any:
        """The statement ``node`` is part of: the highest ancestor below a
        container of statements (a list, a pipeline, a redirect, a block)."""
        tree = self.tree
        while tree.parent(node) is not None and tree.parent(node).type not in _PLAIN_CONTAINERS:
            node = tree.parent(node)
        return node

    def substitution(self, substitution: Any) -> None:
        """``$( )`` holding a value: its output is the value now."""
        tree = self.tree
        if substitution.children[0].type == "`":
            raise Refused("quoted", substitution, "backticks")
        word = substitution
        while tree.parent(word) is not None and tree.parent(word).type == "concatenation":
            word = tree.parent(word)
        parent, field = tree.parent(word), tree.field(word)
        quoted = parent is not None and parent.type == "string"
        unsplit = parent is not None and (
            (parent.type == "variable_assignment" and field == "value")
            or (parent.type == "case_statement" and field == "value")
            or parent.type == "herestring_redirect"
        )
        if not quoted and not unsplit:
            raise Refused("split", substitution)
        self.data_position(substitution)

    def process_substitution(self, substitution: Any) -> None:
        """``<( )`` holding a value: whoever reads the pipe it names receives it."""
        tree = self.tree
        parent, field = tree.parent(substitution), tree.field(substitution)
        if parent is None:
            raise Refused("unclassified", substitution)
        if parent.type == "command" and field == "argument":
            resolved = self.resolve(parent)
            if resolved.name is None:
                raise Refused("unknown-command", parent)
            self.receiver(parent, resolved, "<( )")
            self.statement(parent, parent)
        elif parent.type == "file_redirect":
            operator = next((self.text(c) for c in parent.children if not c.is_named), "")
            if operator not in READING_REDIRECTS:
                raise Refused("redirect", parent, operator)
            statement = tree.parent(parent)
            self.stdin_of(statement, parent)
            self.statement(statement, statement)
        else:
            raise Refused(
                _RULE_BY_PARENT.get(parent.type, "unclassified"), substitution, parent.type
            )

    def stdin_of(self, statement: Any, redirect: Any) -> None:
        """Every command in ``statement`` may read what ``redirect`` feeds it."""
        if statement is None:
            raise Refused("unclassified", redirect)
        if statement.type == "command":
            resolved = self.resolve(statement)
            if resolved.name_node is None:
                return
            if resolved.name is None:
                raise Refused("unknown-command", resolved.name_node)
            if resolved.name == "exec":
                raise Refused("stdin", statement, "exec with input")
            self.receiver(statement, resolved, "stdin")
            return
        body = (
            statement.child_by_field_name("body")
            if statement.type == "redirected_statement"
            else statement
        )
        self.all_read(body if body is not None else statement)

    def all_read(self, node: Any) -> None:
        """Every command inside ``node`` may read its stdin, which carries a value."""
        for inner in self.tree.subtree(node):
            if inner.type == "command":
                resolved = self.resolve(inner)
                if resolved.name_node is None:
                    continue
                if resolved.name is None:
                    raise Refused("unknown-command", resolved.name_node)
                self.receiver(inner, resolved, "stdin")

    def pipeline_after(self, pipeline: Any, stage: Any) -> None:
        """Every stage after ``stage`` reads what ``stage`` printed."""
        key = (pipeline.id, stage.start_byte)
        if key in self.pipelines_done:
            return
        self.pipelines_done.add(key)
        after = False
        for child in pipeline.children:
            if after and child.is_named:
                self.all_read(child)
            if (
                child.start_byte >= stage.start_byte
                and child.end_byte <= stage.end_byte
                and child.is_named
            ):
                after = True

    def follow_output(self, command: Any) -> None:
        """``command`` read a value on its stdin (judged then as a receiver):
        whatever reads its output receives the value too (``{ m=$(cat); }
        < <(printf %s {{ x }})``, found by the tenth review)."""
        self.index = None
        try:
            self.statement(command, command)
        except Refused as refused:
            self.refuse(refused.rule, refused.node, refused.detail)

    def judge_reader(self, command: Any) -> None:
        """``command`` reads a file that holds a value: it receives it, and
        whatever reads its output does too."""
        self.index = None
        try:
            if command.type == "command":
                resolved = self.resolve(command)
                if resolved.name not in ("pwd", "dirs"):  # they print the directory only
                    self.receiver(command, resolved, "file")
            self.statement(command, command)
        except Refused as refused:
            self.refuse(refused.rule, refused.node, refused.detail)
