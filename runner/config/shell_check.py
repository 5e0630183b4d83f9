"""Where an input value may stand in a ``run`` command, decided on a bash parse tree.

Values are inserted as single-quoted words, and quoting protects a value
only where bash reads that word as data.  So the rule is an **allow-list of
positions**, checked on the tree that tree-sitter-bash builds from the exact
text that will run (``templates`` renders each value as a unique *sentinel*
word first, checks, then puts the quoted values in):

=======================  ===================================================
position                 verdict
=======================  ===================================================
argument of a command    allowed when the command name is a literal word and
                         the command is not a shell, a wrapper that runs its
                         arguments, a function of the script, or a builtin
                         outside ``SAFE_BUILTINS`` (``printf``: not first;
                         ``test``/``[``: one value, no ``-v``/``-R``)
redirection target       allowed for ``> >> < >| &> &>> <>`` and ``<<<``
``NAME=`` value          allowed for a plain name that is not shell-control
                         (``SHELL_CONTROL_NAMES``); NAME becomes *tainted*
``case`` subject         allowed (``case {{ x }} in``)
``"$NAME"`` of a         allowed where a value is allowed; any other mention
tainted NAME             of NAME (unquoted, ``${!NAME}``, arithmetic, ``[[``,
                         ``declare``, inside quotes or heredocs) is refused
anything else            refused: command names, arithmetic, ``[[ ]]``,
                         parameter expansions, heredocs, ``case`` patterns,
                         ``for ... in`` lists, declarations, quotes, comments,
                         arrays, subscripts, unparsable text
=======================  ===================================================

A position inside ``$( )`` or ``<( )`` counts only if the substitution
itself stands in an allowed position (``eval "$(echo {{ x }})"`` is refused).
Whatever this module does not recognise is refused; each refusal names its
rule and the fix (``RULES``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from typing import Any, NamedTuple

#: rule -> (what the position is, what to write instead)
RULES: dict[str, tuple[str, str]] = {
    "quoted": (
        "inside quotes, a comment or a heredoc",
        "values are quoted for you: write {{ x }} as a word of its own, without quotes",
    ),
    "command-name": (
        "in command position",
        "a value may be an argument, never the command itself",
    ),
    "unknown-command": (
        "an argument of a command whose name is not a literal word",
        "call the program by its literal name",
    ),
    "evaluating-builtin": (
        "an argument of a builtin that evaluates code or takes variable names",
        "pass the value to echo, printf, cd, test or a program; assign with NAME={{ x }}",
    ),
    "shell": (
        "an argument of a shell, which runs it as code",
        "run the commands directly in this step instead of through another shell",
    ),
    "wrapper": (
        "an argument of a command that runs its arguments as a command",
        "call the program directly (command, builtin, env, nohup, nice, setsid, time "
        "and timeout with a literal duration are followed)",
    ),
    "function": (
        "an argument of a function defined in this script",
        "call a program or builtin with the value, not a function",
    ),
    "alias": (
        "in a script that defines aliases",
        "remove the alias: it can turn any command into eval",
    ),
    "printf-option": (
        "the first argument of printf, where -v would make it assign a variable",
        "give printf a literal format first: printf '%s\\n' {{ x }}",
    ),
    "test-operator": (
        "an operand of test/[ with another value or -v/-R",
        "test one value at a time, without -v/-R: [ {{ x }} = yes ]",
    ),
    "redirect": (
        "the target of a redirection that can name a file descriptor",
        "use >, >>, < or <<< with a value",
    ),
    "assignment": (
        "an assignment that is not a plain NAME=",
        "assign to a plain variable: NAME={{ x }}",
    ),
    "shell-control": (
        "an assignment to a variable that changes how the shell runs",
        "use another variable name",
    ),
    "declaration": (
        "a declaration (declare, typeset, local, export, readonly, unset)",
        "assign with NAME={{ x }} instead",
    ),
    "arithmetic": (
        "arithmetic, where bash evaluates a[$(cmd)] as code",
        "compare as text or with test: [ {{ x }} -gt 0 ]",
    ),
    "double-bracket": (
        "[[ ]], whose operands bash may evaluate as arithmetic",
        "use [ ] (test) instead",
    ),
    "expansion": (
        "a parameter expansion",
        'put the value in a plain word, or assign NAME={{ x }} and use "$NAME"',
    ),
    "heredoc": (
        "a heredoc",
        "heredoc text is not re-quoted; write the file with a write: step instead",
    ),
    "case-pattern": (
        "a case pattern",
        'set a variable first (NAME={{ x }}) and write case "$NAME" in',
    ),
    "for-list": (
        "a for ... in list",
        "loop in the template instead: {% for item in x.items %}...{% endfor %}",
    ),
    "tainted-variable": (
        'a use of a variable that holds a value, other than "$NAME" in an allowed position',
        'use the variable only as "$NAME" (in double quotes) in an argument',
    ),
    "syntax": (
        "in a command that does not parse, or that bash and sh may read differently",
        "fix the shell syntax (the check reads the command with a bash grammar); "
        "write $'...' text with '...' or printf",
    ),
    "unclassified": (
        "in a position the checker does not classify as data",
        "make the value an argument of a simple command",
    ),
}


class Finding(NamedTuple):
    """Placeholder number ``index`` (None: the whole command) breaks ``rule``."""

    index: int | None
    rule: str
    line: int
    column: int
    detail: str = ""

    @property
    def message(self) -> str:
        what, hint = RULES[self.rule]
        detail = f" ({self.detail})" if self.detail else ""
        return f"{{{{ }}}} {what}{detail} [{self.rule}]: {hint}"


#: Bash builtins whose arguments are plain data.  Every other builtin either
#: evaluates text (eval, trap, let...), takes variable names (read, declare,
#: unset, printf -v...) or changes the shell (set, shopt, alias, enable).
SAFE_BUILTINS = frozenset(
    {"echo", "printf", "cd", "pwd", "true", "false", ":", "test", "[", "pushd", "popd"}
)
BUILTINS = frozenset(
    [
        ".",
        ":",
        "[",
        "alias",
        "bg",
        "bind",
        "break",
        "builtin",
        "caller",
        "cd",
        "command",
        "compgen",
        "complete",
        "compopt",
        "continue",
        "declare",
        "dirs",
        "disown",
        "echo",
        "enable",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fc",
        "fg",
        "getopts",
        "hash",
        "help",
        "history",
        "jobs",
        "kill",
        "let",
        "local",
        "logout",
        "mapfile",
        "popd",
        "printf",
        "pushd",
        "pwd",
        "read",
        "readarray",
        "readonly",
        "return",
        "set",
        "shift",
        "shopt",
        "source",
        "suspend",
        "test",
        "times",
        "trap",
        "true",
        "type",
        "typeset",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
        "coproc",
        "select",
        "function",
        "time",
    ]
)
#: Programs that run an argument as shell code.
SHELLS = frozenset(
    [
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "ash",
        "rbash",
        "yash",
        "posh",
        "busybox",
        "fish",
        "csh",
        "tcsh",
        "su",
        "sudo",
        "doas",
        "runuser",
        "ssh",
        "watch",
        "script",
    ]
)
#: Commands that run their arguments as a command, and how to find that command.
#: None: not followed (a value among their arguments is refused).
WRAPPERS: dict[str, str | None] = {
    "command": "plain",
    "builtin": "plain",
    "nohup": "plain",
    "setsid": "plain",
    "nice": "plain",
    "time": "time",
    "env": "env",
    "timeout": "timeout",
    "exec": None,
    "xargs": None,
    "coproc": None,
    "chroot": None,
    "stdbuf": None,
    "strace": None,
    "ionice": None,
    "taskset": None,
    "unshare": None,
    "nsenter": None,
    "flock": None,
    "chrt": None,
    "parallel": None,
}
#: Variables that change how bash (or the dynamic loader) runs, or that bash
#: computes itself: no value may be assigned to them.
SHELL_CONTROL_NAMES = frozenset(
    [
        "ENV",
        "PS0",
        "PS1",
        "PS2",
        "PS3",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "PATH",
        "CDPATH",
        "GLOBIGNORE",
        "HISTFILE",
        "HISTCMD",
        "HISTCONTROL",
        "HISTIGNORE",
        "INPUTRC",
        "TMOUT",
        "MAIL",
        "MAILPATH",
        "MAILCHECK",
        "OPTIND",
        "OPTARG",
        "OPTERR",
        "FUNCNEST",
        "EXECIGNORE",
        "POSIXLY_CORRECT",
        "RANDOM",
        "SRANDOM",
        "SECONDS",
        "LINENO",
        "EPOCHSECONDS",
        "EPOCHREALTIME",
        "GROUPS",
        "FUNCNAME",
        "DIRSTACK",
        "PIPESTATUS",
        "PPID",
        "UID",
        "EUID",
        "SHELL",
        "SHLVL",
        "TIMEFORMAT",
        "COLUMNS",
        "LINES",
        "HOSTFILE",
        "FIGNORE",
        "READLINE_LINE",
        "READLINE_POINT",
        "PWD",
        "OLDPWD",
        "REPLY",
    ]
)
_SHELL_CONTROL_PREFIXES = ("BASH", "LD_", "COMP_", "HIST", "BASH_FUNC_")

_TEST_OPERATORS = frozenset(
    [
        "=",
        "==",
        "!=",
        "-eq",
        "-ne",
        "-lt",
        "-le",
        "-gt",
        "-ge",
        "-nt",
        "-ot",
        "-ef",
        "<",
        ">",
        "-n",
        "-z",
        "-e",
        "-f",
        "-d",
        "-r",
        "-w",
        "-x",
        "-s",
        "-L",
        "-h",
        "-b",
        "-c",
        "-p",
        "-S",
        "-t",
        "-g",
        "-u",
        "-k",
        "-O",
        "-G",
        "-N",
    ]
)
_SAFE_REDIRECTS = frozenset({">", ">>", "<", ">|", "&>", "&>>", "<>"})
_LITERAL = re.compile(r"[A-Za-z0-9_./+:@%,-]+|\[")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_./+:@%,-]*")
_ESCAPED = re.compile(rb"\\.", re.S)
_PLAIN_DELIMITER = re.compile(rb"[A-Za-z0-9_]+")
_QUOTED_DELIMITER = re.compile(rb"(['\"])([A-Za-z0-9_]+)\1")
_DURATION = re.compile(r"[0-9]+(\.[0-9]+)?[smhd]?")
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
    }
)
_BODY_CONTAINERS = frozenset(
    {"for_statement", "c_style_for_statement", "select_statement", "function_definition"}
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
}


def is_shell_control_name(name: str) -> bool:
    """True for variables a value must never be assigned to (``PS4``, ``LD_PRELOAD``...)."""
    return name in SHELL_CONTROL_NAMES or name.startswith(_SHELL_CONTROL_PREFIXES)


_PARSER: Any = None


def _parser() -> Any:
    """The tree-sitter parser, built on first use (validate of a file without values skips it)."""
    global _PARSER
    if _PARSER is None:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        _PARSER = Parser(Language(tree_sitter_bash.language()))
    return _PARSER


class _Refused(Exception):
    def __init__(self, rule: str, node: Any, detail: str = "") -> None:
        self.rule, self.node, self.detail = rule, node, detail


def _field(node: Any) -> str | None:
    parent = node.parent
    if parent is None:
        return None
    for index, child in enumerate(parent.children):
        if child == node:
            return parent.field_name_for_child(index)
    return None


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


class _Check:
    """One script: finds every sentinel and tainted variable and judges its position."""

    def __init__(self, source: bytes, sentinels: Sequence[bytes], tainted: Collection[str]):
        self.source = source
        self.tree = _parser().parse(source)
        self.root = self.tree.root_node
        self.sentinels = sentinels
        #: tainted variable -> index of the placeholder it holds (None: a step env value)
        self.tainted: dict[str, int | None] = dict.fromkeys(tainted)
        self.pending = list(self.tainted)
        self.findings: list[Finding] = []
        self.index: int | None = None  # the placeholder being judged
        nodes = list(_walk(self.root))
        self.functions = {
            self.text(n.child_by_field_name("name"))
            for n in nodes
            if n.type == "function_definition" and n.child_by_field_name("name") is not None
        }
        self.commands = [n for n in nodes if n.type == "command"]
        self.raw_strings: dict[bytes, list[Any]] = {}
        for n in nodes:
            if n.type == "raw_string":
                self.raw_strings.setdefault(self.text_bytes(n), []).append(n)
        self.error = next((n for n in nodes if self.misparsed(n)), None)

    # -- helpers ---------------------------------------------------------------

    def misparsed(self, node: Any) -> bool:
        """A node bash would not read the way the parser did: an error, a
        missing token, a word holding unescaped blanks (tree-sitter lexes
        ``a<newline>\\eval`` as one word), or ``$'...'``, which sh (dash)
        does not read as a quote at all."""
        if node.type == "ERROR" or node.is_missing or node.type == "ansi_c_string":
            return True
        if node.type in ("word", "number"):
            unescaped = _ESCAPED.sub(b"", self.text_bytes(node))
            return any(blank in unescaped for blank in (b" ", b"\t", b"\n"))
        return False

    def text_bytes(self, node: Any) -> bytes:
        return self.source[node.start_byte : node.end_byte]

    def text(self, node: Any) -> str:
        return self.text_bytes(node).decode("utf-8", "replace")

    def refuse(self, rule: str, node: Any, detail: str = "") -> None:
        row, column = node.start_point
        self.findings.append(Finding(self.index, rule, row + 1, column + 1, detail))

    def command_name(self, command: Any) -> str | None:
        """The literal name of a ``command`` node, or None."""
        name = command.child_by_field_name("name")
        return self.literal(name) if name is not None else None

    def literal(self, node: Any) -> str | None:
        """The text of a plain literal word (no quotes, escapes or expansions), else None."""
        if node.type == "command_name" and node.named_child_count == 1:
            node = node.named_children[0]
        if node.type not in ("word", "number") or node.named_child_count:
            return None
        text = self.text(node)
        return text if _LITERAL.fullmatch(text) else None

    def carries_value(self, node: Any) -> bool:
        """Does ``node`` contain a sentinel or a mention of a tainted variable?"""
        text = self.text_bytes(node)
        if any(s in text for s in self.sentinels):
            return True
        return any(_mention(name).search(text) for name in self.tainted)

    # -- the walk --------------------------------------------------------------

    def run(self) -> list[Finding]:
        if self.error is not None and (self.sentinels or self.tainted):
            self.refuse("syntax", self.error)
            return self.findings
        unclear = self.unclear_heredoc() if (self.sentinels or self.tainted) else None
        if unclear is not None:
            self.refuse("heredoc", unclear, "its end is not a line bash would surely end it on")
            return self.findings
        alias = next((c for c in self.commands if self.command_name(c) == "alias"), None)
        if self.sentinels and alias is not None:
            self.refuse("alias", alias)
            return self.findings
        for index, sentinel in enumerate(self.sentinels):
            self.index = index
            found = self.raw_strings.get(sentinel, [])
            occurrences = self.source.count(sentinel)
            if occurrences == 0:
                continue  # this value was not printed (a loop or branch not taken)
            if len(found) != occurrences:
                where = self._node_at(self.source.index(sentinel))
                self.refuse("quoted", where)
                continue
            for node in found:
                self.judge(node)
        while self.pending:
            name = self.pending.pop()
            self.index = self.tainted[name]
            self.judge_mentions(name)
        return self.findings

    def unclear_heredoc(self) -> Any:
        """A heredoc whose end bash might place elsewhere than the parser did.

        tree-sitter and bash disagree on some heredocs (a delimiter line with
        trailing spaces, a line joined by a trailing backslash); a value the
        parser saw after the heredoc could be inside its body for bash, where
        quotes do not protect it.  So every heredoc must end provably: a
        plain delimiter, its end line exactly the delimiter, no earlier body
        line equal to it, and (unquoted) no body line ending in a backslash.
        """
        lines = self.source.split(b"\n")
        for node in _walk(self.root):
            if node.type != "heredoc_redirect":
                continue
            kinds = {c.type: c for c in node.children}
            start, end = kinds.get("heredoc_start"), kinds.get("heredoc_end")
            if start is None or end is None:
                return node
            word = self.text_bytes(start)
            quoted = _QUOTED_DELIMITER.fullmatch(word)
            delimiter = quoted.group(2) if quoted else word
            if not _PLAIN_DELIMITER.fullmatch(delimiter):
                return node
            strip_tabs = "<<-" in kinds
            body = kinds.get("heredoc_body")
            first = body.start_point[0] if body is not None else end.start_point[0]
            last = end.start_point[0]
            if first > last:
                return node

            keys = [line.lstrip(b"\t") if strip_tabs else line for line in lines[first : last + 1]]
            if keys[-1] != delimiter:
                return node
            for line, line_key in zip(lines[first:last], keys, strict=False):
                if line_key == delimiter or (not quoted and line.endswith(b"\\")):
                    return node
        return None

    def judge(self, node: Any) -> None:
        try:
            self.data_position(node)
        except _Refused as refused:
            self.refuse(refused.rule, refused.node, refused.detail)

    def _node_at(self, offset: int) -> Any:
        return self.root.descendant_for_byte_range(offset, offset + 1)

    def data_position(self, node: Any) -> None:
        """``node`` yields a value: accept only if the word it is part of is data."""
        word = node
        while word.parent is not None and word.parent.type in ("concatenation", "string"):
            word = word.parent
        parent, field = word.parent, _field(word)
        if parent is None:
            raise _Refused("unclassified", node)
        kind = parent.type
        if kind == "command" and field == "argument":
            self.command_arguments(parent, word)
            self.statement(parent)
        elif kind == "file_redirect" and field == "destination":
            operator = next((self.text(c) for c in parent.children if not c.is_named), "")
            if operator not in _SAFE_REDIRECTS:
                raise _Refused("redirect", parent, operator)
            self.statement(parent.parent)
        elif kind == "herestring_redirect":
            self.statement(parent.parent)
        elif kind == "variable_assignment" and field == "value":
            self.assignment(parent)
        elif kind == "case_statement" and field == "value":
            self.statement(parent)
        elif kind in ("binary_expression", "unary_expression", "test_command"):
            self.single_bracket_test(word)
        else:
            rule = _RULE_BY_PARENT.get(kind, "unclassified")
            if kind == "case_item" and field != "value":
                rule = "unclassified"
            raise _Refused(rule, node, "" if rule != "unclassified" else kind)

    def assignment(self, assignment: Any) -> None:
        name_node = assignment.child_by_field_name("name")
        operator = next((self.text(c) for c in assignment.children if not c.is_named), "")
        if name_node is None or name_node.type != "variable_name" or operator != "=":
            raise _Refused("assignment", assignment)
        name = self.text(name_node)
        if is_shell_control_name(name):
            raise _Refused("shell-control", assignment, name)
        owner = assignment.parent
        if owner is not None and owner.type == "declaration_command":
            raise _Refused("declaration", owner)
        if owner is not None and owner.type == "command":  # NAME={{ x }} program ...
            self.command_arguments(owner, None)
            self.statement(owner)
        else:
            self.statement(owner if owner.type == "variable_assignments" else assignment)
        if name not in self.tainted:
            self.tainted[name] = self.index
            self.pending.append(name)

    def statement(self, node: Any) -> None:
        """Climb from a command to the top: every container must keep it a plain statement."""
        while node.parent is not None:
            parent, field = node.parent, _field(node)
            kind = parent.type
            if kind == "command_substitution" and parent.children[0].type == "`":
                # bash re-reads backtick text for backslashes before parsing it,
                # so a value's own backtick would end the substitution.
                raise _Refused("quoted", node, "backticks")
            if kind in ("command_substitution", "process_substitution"):
                self.data_position(parent)  # its output is the value now
                return
            if (
                kind in _PLAIN_CONTAINERS
                or (kind == "case_item" and field != "value")
                or (kind == "case_statement" and field != "value")
                or (kind in _BODY_CONTAINERS and field == "body")
                or kind == "redirected_statement"
            ):
                pass
            else:
                raise _Refused(_RULE_BY_PARENT.get(kind, "unclassified"), node, kind)
            node = parent

    def command_arguments(self, command: Any, value_word: Any) -> None:
        """The command must be a literal program or safe builtin that takes data."""
        name_node = command.child_by_field_name("name")
        if name_node is None:  # only assignments: NAME={{ x }} alone
            return
        words = [name_node, *(c for c in command.children if _field(c) == "argument")]
        position = 0
        while True:
            word = words[position]
            if word == value_word or self.carries_value(word):
                raise _Refused("command-name", word)
            name = self.literal(word)
            if name is None:
                raise _Refused("unknown-command", word, self.text(word)[:40])
            base = name.rsplit("/", 1)[-1]
            if name in self.functions:
                raise _Refused("function", word, name)
            if base in WRAPPERS:
                position = self.wrapped(words, position, base)
                continue
            break
        arguments = words[position + 1 :]
        if base in SHELLS:
            raise _Refused("shell", word, base)
        if name in BUILTINS and name not in SAFE_BUILTINS:
            raise _Refused("evaluating-builtin", word, name)
        if name == "printf":
            literal_args = [self.literal(a) for a in arguments]
            if any(a is not None and a.startswith("-v") for a in literal_args):
                raise _Refused("evaluating-builtin", word, "printf -v")
            # The first argument may be read as an option (-v NAME), unless it is "--".
            if arguments and literal_args[0] != "--" and self.carries_value(arguments[0]):
                raise _Refused("printf-option", arguments[0])
        if name in ("test", "["):
            literal_args = [self.literal(a) for a in arguments]
            if any(a in ("-v", "-R") for a in literal_args):
                raise _Refused("test-operator", word, "-v/-R")
            if sum(1 for a in arguments if self.carries_value(a)) > 1:
                raise _Refused("test-operator", word, "two values")

    def single_bracket_test(self, word: Any) -> None:
        """``[ {{ x }} = y ]``: one value; operators from ``_TEST_OPERATORS`` only (no ``-v``)."""
        expression = word.parent
        test = expression if expression.type == "test_command" else expression.parent
        if test is None or test.type != "test_command":
            if _inside(expression, "test_command"):
                raise _Refused("test-operator", word, "a compound test")
            raise _Refused("arithmetic", word)
        if test.children[0].type != "[":
            raise _Refused("double-bracket", word)
        if (
            expression is not test
            and self.text(expression.child_by_field_name("operator")) not in _TEST_OPERATORS
        ):
            raise _Refused(
                "test-operator", word, self.text(expression.child_by_field_name("operator"))
            )
        operands = [n for n in expression.children if n.is_named and _field(n) != "operator"]
        if sum(1 for n in operands if self.carries_value(n)) > 1:
            raise _Refused("test-operator", word, "two values")
        self.statement(test)

    def wrapped(self, words: list[Any], position: int, wrapper: str) -> int:
        """The position of the command a wrapper runs; refuses what it cannot follow."""
        style = WRAPPERS[wrapper]
        if style is None:
            raise _Refused("wrapper", words[position], wrapper)
        position += 1
        if style == "time" and position < len(words) and self.literal(words[position]) == "-p":
            position += 1
        if style == "timeout":
            duration = self.literal(words[position]) if position < len(words) else None
            if duration is None or not _DURATION.fullmatch(duration):
                raise _Refused("wrapper", words[position - 1], "timeout needs a literal duration")
            position += 1
        while style == "env" and position < len(words):
            if words[position].type != "word" or not _ENV_ASSIGNMENT.fullmatch(
                self.text(words[position])
            ):
                break
            position += 1
        if position >= len(words):
            raise _Refused("wrapper", words[position - 1], wrapper)
        text = self.literal(words[position])
        if text is not None and text.startswith("-"):
            raise _Refused("wrapper", words[position], f"{wrapper} {text}")
        return position

    def judge_mentions(self, name: str) -> None:
        """Every mention of a tainted variable must be ``"$NAME"`` in an allowed position."""
        for match in _mention(name).finditer(self.source):
            node = self.root.descendant_for_byte_range(match.start(), match.end())
            if _inside(node, "comment"):
                continue
            try:
                self.allowed_mention(node, name)
            except _Refused as refused:
                self.refuse("tainted-variable", refused.node, f"${name}: {RULES[refused.rule][0]}")

    def allowed_mention(self, node: Any, name: str) -> None:
        parent = node.parent
        if node.type == "variable_name" and parent is not None:
            if parent.type == "variable_assignment" and _field(node) == "name":
                operator = next((self.text(c) for c in parent.children if not c.is_named), "")
                owner = parent.parent
                if operator == "=" and (owner is None or owner.type != "declaration_command"):
                    return  # NAME=... assigns it again
                raise _Refused("assignment", parent)
            plain = parent.type == "simple_expansion" or (
                parent.type == "expansion"
                and [c.type for c in parent.children] == ["${", "variable_name", "}"]
            )
            if plain and parent.parent is not None and parent.parent.type == "string":
                self.data_position(parent)
                return
            raise _Refused(_RULE_BY_PARENT.get(parent.type, "unclassified"), node)
        raise _Refused(_RULE_BY_PARENT.get(node.type, "unclassified"), node)


def _inside(node: Any, kind: str) -> bool:
    while node is not None:
        if node.type == kind:
            return True
        node = node.parent
    return False


def _mention(name: str) -> re.Pattern[bytes]:
    """``name`` as a whole identifier (``N`` in ``$N`` and ``N=``, not in ``NN``)."""
    return re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name.encode()) + rb"(?![A-Za-z0-9_])")


def check_script(
    script: str, sentinels: Sequence[str], tainted: Collection[str] = ()
) -> list[Finding]:
    """Every placeholder of ``script`` that does not stand where bash reads data.

    ``sentinels[i]`` is the exact word (``'RV…'``) that stands for value *i*;
    ``tainted`` names variables that already hold a value (a step's templated
    ``env``).  An empty result means every value is data.
    """
    if not sentinels and not tainted:
        return []
    check = _Check(script.encode("utf-8"), [s.encode("utf-8") for s in sentinels], tainted)
    return sorted(set(check.run()), key=lambda f: (f.line, f.column, f.rule))
