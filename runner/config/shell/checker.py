"""Can an input value, wherever it flows in a ``run`` script, reach anything that runs it?

Values are inserted as single-quoted words, and quoting protects a value
only while bash treats it as data.  ``templates`` renders each value as a
unique *sentinel* word first; this module reads the exact text that will run
with tree-sitter-bash and answers for the whole script, in three passes:

1. **The whole script lies in the subset the checker models.**  A script that
   holds a value (a sentinel, or a step ``env:`` variable templated from one)
   may not define functions, rebind names (``alias``, ``hash``, ``enable``,
   ``trap``, ``eval``, ``source``, ``let``, ``exec CMD``, ``shopt``/``set``
   beyond the usual options, ``PATH``/``PS4``/``BASH_*`` assignments),
   declare with options (``declare -n``), expand indirectly (``${!x}``,
   ``${x@P}``), use backticks or ``>( )``, or call a command by a name that
   is not a literal word.  These lines carry no value, but change what the
   lines that do mean.
2. **Taint by default.**  Every variable that may hold a value is *tainted*:
   one assigned anything that carries a value, every ``read``/``mapfile``/
   ``getopts``/``printf -v`` target, ``for`` variables over a value,
   ``REPLY``, ``$_``, the positional parameters.  Names are compared after
   bash's quote removal (the parse tree's words), and a name that cannot be
   read before the script runs is refused.  Arithmetic (``(( ))``,
   ``$(( ))``, subscripts, ``${x:off}``, ``[[ -eq ]]``) may only name
   variables this script sets to numbers.
3. **Follow each value to its readers.**  A value reaches a command through
   its arguments, a here-string, a ``<`` redirect, ``<( )``, a pipe from a
   command that received one (every later stage), the stdin of a compound
   statement, a ``NAME=value cmd`` prefix, or a static file it was written
   to.  Every such reader must be allowed to receive data: never a shell, an
   interpreter or a program GTFOBins lists as running commands (``executors``),
   never a builtin outside ``SAFE_BUILTINS``; in strict mode (``consumers``)
   only the named programs and ``STRICT_RECEIVERS``.  A value's word must be
   data where it stands (``"$NAME"`` for a tainted variable; an unquoted
   ``$( )`` that carries one is split again and refused).

Whatever this module does not recognise is refused; each refusal names its
rule and the fix (``shell_rules.RULES``).  The cost is linear in the size of
the script: one walk builds parent and field maps, sentinels are found with
one scan, and each container is climbed once.
"""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from .rules import (
    ALWAYS_TAINTED,
    BASH_INTEGERS,
    BUILTINS,
    DECLARATION_BUILTINS,
    FOLLOWED_WRAPPERS,
    REBINDING_BUILTINS,
    RULES,
    RUNNING_OPTIONS,
    SAFE_BUILTINS,
    SAFE_SET_LETTERS,
    SAFE_SET_OPTIONS,
    SAFE_SHOPT,
    STDIN_BUILTINS,
    STREAM_FILTERS,
    STRICT_RECEIVERS,
    dialect_of,
    is_code_bearing_env,
    is_executor,
    is_interpreter,
    is_rebinding_name,
    is_shell_control_name,
)

__all__ = ["RULES", "Finding", "check_script", "is_shell_control_name"]


class Finding(NamedTuple):
    """Placeholder number ``index`` (None: the whole command) breaks ``rule``."""

    index: int | None  # type: ignore[assignment]  # the field shadows tuple.index
    rule: str
    line: int
    column: int
    detail: str = ""

    @property
    def message(self) -> str:
        what, hint = RULES[self.rule]
        detail = f" ({self.detail})" if self.detail else ""
        whole = self.index is None and self.rule not in ("syntax", "heredoc", "quoted")
        subject = "a script with values:" if whole else "{{ }}"
        return f"{subject} {what}{detail} [{self.rule}]: {hint}"


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARITH_NAME = re.compile(rb"(?<![0-9A-Za-z_#$])[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
_DURATION = re.compile(r"[0-9]+(\.[0-9]+)?[smhd]?")
_GLOB = re.compile(r"[*?\[]")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_ESCAPED_TEXT = re.compile(r"\\.", re.S)
_ESCAPED = re.compile(rb"\\.", re.S)
#: Nodes inside which bash keeps every byte as it is (quotes, comments, heredocs).
_QUOTING_NODES = frozenset(
    {"raw_string", "string", "string_content", "heredoc_body", "heredoc_content", "comment"}
)
_PLAIN_DELIMITER = re.compile(rb"[A-Za-z0-9_]+")
_QUOTED_DELIMITER = re.compile(rb"(['\"])([A-Za-z0-9_]+)\1")
_SAFE_REDIRECTS = frozenset({">", ">>", "<", ">|", "&>", "&>>", "<>"})
_READING_REDIRECTS = frozenset({"<", "<>"})
_WRITING_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
#: The devices a redirect may name that hold nothing (a file "null" elsewhere is a file).
_DEVICES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
#: How a value reaches a receiver, for messages (argv: no words added).
_VIA = {
    "stdin": "through its stdin",
    "env": "through its environment",
    "<( )": "through a <( ) argument",
    "file": "reading a file a value was written to",
}
_ARITHMETIC_TEST_OPERATORS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
# fmt: off
_TEST_OPERATORS = frozenset([
    "=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef", "<", ">",
    "-n", "-z", "-e", "-f", "-d", "-r", "-w", "-x", "-s", "-L", "-h", "-b", "-c", "-p", "-S",
    "-t", "-g", "-u", "-k", "-O", "-G", "-N",
])
# fmt: on
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
#: test's binary operators (-a and -o left out: after them test reads a new term).
_BINARY_TEST_OPERATORS = frozenset(
    {"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"}
)
#: test's unary operators whose operand is a string or a file (not -v/-R: a name).
_UNARY_TEST_OPERATORS = _TEST_OPERATORS - _BINARY_TEST_OPERATORS
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
#: Nodes whose text bash reads as arithmetic.
_ARITHMETIC_NODES = frozenset({"arithmetic_expansion", "c_style_for_statement"})
#: Bash-only syntax: refused when the step's shell is sh (dash, busybox).
_BASH_ONLY = {
    "herestring_redirect": "<<<",
    "process_substitution": "<( )",
    "array": "arrays",
    "subscript": "arrays",
    "c_style_for_statement": "for (( ))",
    "select_statement": "select",
}


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


class _Tree:
    """The parse of one script, with the maps tree-sitter does not keep cheaply:
    each node's parent and field (``Node.parent`` walks down from the root)."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.root = _parser().parse(source).root_node
        self.nodes: list[Any] = []
        self.parents: dict[int, Any] = {}
        self.fields: dict[int, str | None] = {}
        cursor = self.root.walk()
        parents: list[Any] = []
        while True:
            node = cursor.node
            self.nodes.append(node)
            self.fields[node.id] = cursor.field_name
            if parents:
                self.parents[node.id] = parents[-1]
            if cursor.goto_first_child():
                parents.append(node)
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    return
                parents.pop()

    def parent(self, node: Any) -> Any:
        return self.parents.get(node.id)

    def field(self, node: Any) -> str | None:
        return self.fields.get(node.id)

    def text_bytes(self, node: Any) -> bytes:
        return self.source[node.start_byte : node.end_byte]

    def text(self, node: Any) -> str:
        return self.text_bytes(node).decode("utf-8", "replace")

    def inside(self, node: Any, kinds: Collection[str]) -> Any:
        """The nearest ancestor (or ``node``) of one of ``kinds``, else None."""
        while node is not None:
            if node.type in kinds:
                return node
            node = self.parent(node)
        return None

    def subtree(self, node: Any) -> Iterator[Any]:
        stack = [node]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(current.children)

    def static(self, node: Any) -> str | None:
        """The word bash makes of ``node`` after quote removal, when it is
        fixed before the script runs (no expansion, substitution or glob);
        else None.  ``CO''UNT`` is ``COUNT``; ``"-v"`` and ``\\-v`` are ``-v``."""
        kind = node.type
        if kind == "command_name" and node.named_child_count == 1:
            return self.static(node.named_children[0])
        if kind in ("word", "number"):
            if node.named_child_count:
                return None
            raw = self.text(node)
            if raw.startswith("~") or _BRACE.search(_ESCAPED_TEXT.sub("", raw)):
                return None  # tilde or brace expansion: {eval,} is eval
            text = re.sub(r"\\(.)", r"\1", raw.replace("\\\n", ""), flags=re.S)
            if _GLOB.search(raw.replace("\\[", "").replace("\\*", "").replace("\\?", "")):
                return None
            return text
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "variable_name":
            return self.text(node)
        if kind == "string":
            parts = []
            for child in node.children:
                if child.type == '"':
                    continue
                if child.type != "string_content":
                    return None
                raw = self.text(child)
                parts.append(re.sub(r'\\([$`"\\\n])', r"\1", raw).replace("\\\n", ""))
            return "".join(parts)
        if kind == "concatenation":
            if _BRACE.search(_ESCAPED_TEXT.sub("", self.text(node))):
                return None  # brace expansion across parts: {eval,}
            pieces = [self.static(child) for child in node.children]
            if any(part is None for part in pieces):
                return None
            return "".join(pieces)  # type: ignore[arg-type]
        return None


class _Command(NamedTuple):
    """A command as it runs: ``name`` after followed wrappers (None when not a
    literal word), the node of that name, and the words after it."""

    name: str | None
    name_node: Any
    arguments: list[Any]


class _Check:
    """One script: the three passes of the module docstring."""

    def __init__(
        self,
        source: bytes,
        sentinels: Sequence[bytes],
        tainted: Collection[str],
        dialect: str,
        consumers: Collection[str] | None,
    ) -> None:
        self.tree = _Tree(source)
        self.source = source
        self.sentinels = sentinels
        self.by_text = {s: i for i, s in enumerate(sentinels)}
        self.env_tainted = frozenset(tainted)
        self.dialect = dialect
        self.consumers = frozenset(consumers) if consumers is not None else None
        self.findings: list[Finding] = []
        self.index: int | None = None  # the placeholder being judged
        #: tainted variable -> the placeholder it holds (None: unknown or env)
        self.tainted: dict[str, int | None] = dict.fromkeys(tainted)
        self.tainted.update(dict.fromkeys(ALWAYS_TAINTED))
        self.numeric: set[str] = set()
        self.tainted_paths: set[str] = set()
        #: whether a redirect wrote a value to a file, or a program that may
        #: write files read one as content (``programs_beside_files``)
        self.value_in_file = False
        self.content_written = False
        #: Commands that got a value as an argument and may have made a file of it.
        self.makers: set[int] = set()
        self.made: set[str] = set()
        #: starts of the commands whose output carries a value read from a file
        self.extra_starts: set[int] = set()
        self.value_nodes: dict[int, Any] = {}  # start byte -> sentinel node
        self.value_starts: list[int] = []  # sorted starts of every value-carrying leaf
        self.climbed: set[tuple[int, int]] = set()
        self.resolved: dict[int, _Command | _Refused] = {}
        self.arguments_judged: set[int] = set()
        self.received: set[int] = set()
        self.pipelines_done: set[tuple[int, int]] = set()
        self.commands = [n for n in self.tree.nodes if n.type == "command"]

    # -- helpers ---------------------------------------------------------------

    def refuse(self, rule: str, node: Any, detail: str = "", index: Any = ...) -> None:
        row, column = node.start_point
        which = self.index if index is ... else index
        self.findings.append(Finding(which, rule, row + 1, column + 1, detail))

    def text(self, node: Any) -> str:
        return self.tree.text(node)

    def carries(self, node: Any) -> bool:
        """Does ``node`` hold a sentinel or a mention of a tainted variable?"""
        at = bisect_left(self.value_starts, node.start_byte)
        return at < len(self.value_starts) and self.value_starts[at] < node.end_byte

    def misparsed(self, node: Any) -> bool:
        """A node bash would not read the way the parser did: an error, a
        missing token, a word holding unescaped blanks (tree-sitter lexes
        ``a<newline>\\eval`` as one word), or ``$'...'``, which sh (dash)
        does not read as a quote at all; ``$((`` that the parser read as a
        command substitution of a subshell (bash: arithmetic)."""
        if node.type == "ERROR" or node.is_missing or node.type == "ansi_c_string":
            return True
        if node.type == "command_substitution" and self.tree.text_bytes(node).startswith(b"$(("):
            return True  # bash reads $(( as arithmetic (tree-sitter, in a heredoc, as $( ( ) ))
        if node.type == "comment":
            return not self.starts_a_word(node.start_byte)
        if node.type == "subshell" and self.source[node.start_byte : node.start_byte + 2] == b"((":
            return True  # ! (( n > 1 )): tree-sitter reads two subshells, bash arithmetic
        if node.type in ("file_redirect", "herestring_redirect"):
            # tree-sitter files the words after `>/dev/null` as more destinations;
            # bash gives them to the command as arguments
            targets = [c for c in node.children if self.tree.field(c) == "destination"]
            return len(targets) > 1
        if node.type in ("word", "number"):
            unescaped = _ESCAPED.sub(b"", self.tree.text_bytes(node))
            return any(blank in unescaped for blank in (b" ", b"\t", b"\n"))
        return False

    def unparsed_expansion(self) -> Any:
        """Text tree-sitter keeps as a leaf where bash expands: a ``${x%PAT}``
        or ``=~`` pattern (``regex``) or a ``${x:-WORD}`` operand holding
        ``$( )``, backticks, ``$[`` or ``${``; single quotes inside a
        ``${ }`` (in ``"${x:-'$(cmd)'}"`` bash does not read them as quotes);
        and ``$[`` (old arithmetic) wherever bash reads it.  The first such
        node, or None."""
        tree = self.tree
        for node in tree.nodes:
            kind = node.type
            if kind not in ("regex", "raw_string", "word"):
                continue
            if kind != "regex" and tree.inside(node, ("expansion",)) is None:
                continue
            text = self.text(node)
            markers = ("$", "`") if kind == "raw_string" else ("$(", "`", "$[", "${")
            if any(marker in text for marker in markers):
                return node
        for match in re.finditer(rb"\$\[", self.source):
            node = tree.root.descendant_for_byte_range(match.start(), match.end())
            parsed = tree.inside(node, ("arithmetic_expansion",)) is not None or (
                node.type == "arithmetic_expansion"
            )
            if not parsed and not self.literal_here(node):  # parsed: the arithmetic pass judges it
                return node
        return None

    def literal_here(self, node: Any) -> bool:
        """Does bash keep the text of ``node`` as it is: a single-quoted word
        (not inside a ``${ }``), a comment, or a quoted heredoc's body?"""
        tree = self.tree
        if tree.inside(node, ("expansion",)) is not None:
            return False
        while node is not None:
            if node.type in ("raw_string", "comment"):
                return True
            if node.type == "heredoc_body":
                start = next(
                    (c for c in tree.parent(node).children if c.type == "heredoc_start"), None
                )
                return start is not None and any(q in self.text(start) for q in "'\"\\")
            node = tree.parent(node)
        return False

    def control_blank(self) -> Any:
        """A vertical tab, form feed or carriage return outside quotes: tree-sitter
        skips it as a blank, bash keeps it in a word (``<<<\\v {{ x }}`` makes
        the value another argument).  The node around the first one, or None."""
        for match in re.finditer(rb"[\r\v\f]", self.source):
            node = self.tree.root.descendant_for_byte_range(match.start(), match.end())
            while node is not None and node.type not in _QUOTING_NODES:
                node = self.tree.parent(node)
            if node is None:
                return self.tree.root.descendant_for_byte_range(match.start(), match.end())
        return None

    def starts_a_word(self, at: int) -> bool:
        r"""Does bash start a word at byte ``at`` (so that a ``#`` there opens a
        comment)?  Only after a metacharacter that is not escaped: tree-sitter
        also takes a form feed, a vertical tab, ``]#``, ``)#`` and ``\<newline>#``
        for a comment start; bash reads them as part of the word before."""
        if at == 0:
            return True
        before = self.source[at - 1 : at]
        if before not in (b" ", b"\t", b"\n", b";", b"&", b"|", b"(", b"<", b">"):  # not ")#"
            return False
        backslashes = len(self.source[: at - 1]) - len(self.source[: at - 1].rstrip(b"\\"))
        return backslashes % 2 == 0

    def fixed(self, node: Any) -> str | None:
        """``static`` for a word that carries no value (a value is never fixed)."""
        return None if self.carries(node) else self.tree.static(node)

    def resolve(self, command: Any) -> _Command:
        """The command ``command`` runs, through the followed wrappers (once per command)."""
        known = self.resolved.get(command.id)
        if known is None:
            try:
                known = self._resolve(command)
            except _Refused as refused:
                known = refused
            self.resolved[command.id] = known
        if isinstance(known, _Refused):
            raise known
        return known

    def _resolve(self, command: Any) -> _Command:
        name_node = command.child_by_field_name("name")
        if name_node is None:
            return _Command(None, None, [])
        words = [name_node, *(c for c in command.children if self.tree.field(c) == "argument")]
        position = 0
        while True:
            word = words[position]
            name = self.fixed(word)
            if name is None:
                return _Command(None, word, words[position + 1 :])
            base = name.rsplit("/", 1)[-1]
            if base == "jobs" and position + 1 < len(words):
                option = self.fixed(words[position + 1])
                if option == "-x":  # jobs -x CMD ARGS runs CMD: judge CMD
                    position = self.wrapped(words, position + 1, base)
                    continue
                if option is None or (option.startswith("-") and "x" in option):
                    raise _Refused("wrapper", words[position + 1], f"jobs {option or ''}"[:40])
            if base not in FOLLOWED_WRAPPERS:
                return _Command(base, word, words[position + 1 :])
            position = self.wrapped(words, position, base)

    def wrapped(self, words: list[Any], position: int, wrapper: str) -> int:
        """The position of the command a followed wrapper runs."""
        position += 1
        if wrapper == "time" and position < len(words) and self.fixed(words[position]) == "-p":
            position += 1
        if wrapper == "timeout":
            duration = self.fixed(words[position]) if position < len(words) else None
            if duration is None or not _DURATION.fullmatch(duration):
                raise _Refused("wrapper", words[position - 1], "timeout needs a literal duration")
            position += 1
        while wrapper == "env" and position < len(words):
            text = self.fixed(words[position])
            if text is None or not _ENV_ASSIGNMENT.fullmatch(text):
                break
            if is_code_bearing_env(text.split("=", 1)[0]):
                raise _Refused("env-name", words[position], text.split("=", 1)[0])
            position += 1
        if position >= len(words):
            raise _Refused("wrapper", words[position - 1], wrapper)
        text = self.fixed(words[position])
        if text is None:
            carries = self.carries(words[position])
            raise _Refused(
                "command-name" if carries else "unknown-command",
                words[position],
                "" if carries else self.text(words[position])[:40],
            )
        if text.startswith("-"):
            raise _Refused("wrapper", words[position], f"{wrapper} {text}")
        return position

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

    # -- pass 1: the subset ----------------------------------------------------

    def constructs(self) -> None:
        """Refuse, anywhere in the script, what changes the meaning of other lines."""
        self.index = None
        tree = self.tree
        self.made = self.files_made()
        for node in tree.nodes:
            kind = node.type
            if kind == "function_definition":
                name = node.child_by_field_name("name")
                self.refuse("function", node, self.text(name) if name is not None else "")
            elif kind == "command":
                self.command_construct(node)
            elif kind == "declaration_command":
                self.declaration_construct(node)
            elif kind == "unset_command":
                for word in node.named_children:
                    text = self.fixed(word)
                    if text is None or not (_IDENTIFIER.fullmatch(text) or text in ("-v", "-f")):
                        self.refuse("name-word", word, self.text(word)[:40])
            elif kind == "variable_assignment":
                self.assignment_construct(node)
            elif kind == "array":  # a=([k]=v): k is arithmetic
                for element in node.named_children:
                    key = re.match(r"\[([^\]]*)\]=", self.text(element))
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
                except _Refused as refused:
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
        except _Refused as refused:
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
        path = self.tree.static(resolved.name_node) or ""
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if "/" in path and ("proc" in parts or "dev" in parts):  # /proc/self/exe is the shell
            self.refuse("file-flow", resolved.name_node, f"{path[:40]}: a program under /proc")
        elif "/" in path and _base(path) in self.made:  # ./mysh may be a copy of bash
            self.refuse("file-flow", resolved.name_node, f"{path[:40]}: a program this script made")
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
        except _Refused as refused:
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
                except _Refused as refused:
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
        elif name == "wait" and any(s is None or (s.startswith("-") and "p" in s) for s in statics):
            self.refuse("name-word", resolved.name_node, "wait -p")
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

    #: Programs whose file arguments are files they write.
    _MAKERS = frozenset({"cp", "mv", "ln", "install", "rsync", "dd", "tee", "sponge", "touch"})

    def files_made(self) -> set[str]:
        """The base names of the files this script may create: redirect
        targets and the words of the programs that copy or link files."""
        made: set[str] = set()
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
                    made.add(_base(text.split("=", 1)[-1]))
        return made

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
                        if operator in _READING_REDIRECTS and text != "/dev/null":
                            return "a file"
            node = parent
        return None

    def set_construct(self, resolved: _Command, statics: list[str | None]) -> None:
        expect_option = False
        for word, text in zip(resolved.arguments, statics, strict=True):
            if text is None:
                self.refuse("rebinding", word, "set with a word read at run time")
                return
            if expect_option:
                expect_option = False
                if text not in SAFE_SET_OPTIONS:
                    self.refuse("rebinding", word, f"set -o {text}")
                continue
            if text == "--" or not text.startswith(("-", "+")):
                self.refuse("rebinding", word, "set with positional parameters")
                return
            letters = set(text[1:])
            if not letters <= SAFE_SET_LETTERS:
                self.refuse("rebinding", word, f"set {text}")
            expect_option = "o" in letters

    def declaration_construct(self, declaration: Any) -> None:
        if self.carries(declaration):
            return  # the value's own check refuses the whole declaration
        for child in declaration.named_children:
            if child.type == "variable_assignment":
                continue
            text = self.fixed(child)
            bad = text is None or text.startswith(("-", "+")) or not _IDENTIFIER.fullmatch(text)
            if bad and not self.carries(child):  # else the value's own check reports it
                self.refuse("declaration", child, self.text(child)[:40])

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
            self.refuse("shell-control", assignment, name)

    def resolve_quietly(self, command: Any) -> _Command | None:
        try:
            return self.resolve(command)
        except _Refused:
            return None

    def assigned_name(self, assignment: Any) -> str | None:
        name = assignment.child_by_field_name("name")
        if name is None:
            return None
        if name.type == "subscript":
            name = name.child_by_field_name("name")
        return self.text(name) if name is not None else None

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
                    if target.type in ("variable_name", "word") and _IDENTIFIER.fullmatch(
                        self.text(target)
                    ):
                        defs.append((self.text(target), node, "arith"))
        self.value_starts = sorted(self.value_nodes)
        self.mark_mentions()
        changed = True
        while changed:  # until no definition taints a new name
            changed = False
            for name, node, kind in defs:
                if name in self.tainted:
                    continue
                if kind in ("read", "select") or self.def_carries(node, kind):
                    self.tainted[name] = self.origin(node)
                    changed = True
            if changed:
                self.mark_mentions()
        self.guard_names(defs)
        numeric_candidates: dict[str, bool] = {}
        for name, node, kind in defs:
            numeric_candidates[name] = numeric_candidates.get(name, True) and self.is_numeric_def(
                node, kind
            )
        self.numeric = {
            name for name, ok in numeric_candidates.items() if ok and name not in self.tainted
        }

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
            if kind == "read" and node.type == "command" and name in ("PWD", "OLDPWD", "DIRSTACK"):
                continue  # cd {{ x }}: bash sets them; nothing runs them
            if kind == "assign" and self.tree.field(node) is None:
                owner = self.tree.parent(node)
                if name == "IFS" and owner is not None and owner.type == "command":
                    continue  # IFS= read: checked as a construct
            if is_shell_control_name(name):
                self.refuse("shell-control", node, name, index=self.tainted.get(name))
            elif is_code_bearing_env(name):
                self.refuse("env-name", node, name, index=self.tainted.get(name))

    def origin(self, node: Any) -> int | None:
        at = bisect_left(self.value_starts, node.start_byte)
        if at < len(self.value_starts) and self.value_starts[at] < node.end_byte:
            start = self.value_starts[at]
            sentinel = self.value_nodes.get(start)
            if sentinel is not None:
                return self.sentinel_index(sentinel)
        return None

    def sentinel_index(self, node: Any) -> int | None:
        return self.by_text.get(self.tree.text_bytes(node))

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
        return True

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

    #: The options of each name-assigning builtin that take an argument.
    _OPTION_ARGUMENTS = {
        "read": "adinNptu",
        "mapfile": "dnOsuCc",
        "readarray": "dnOsuCc",
        "printf": "v",
        "getopts": "",
    }

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
            if target is None or not _IDENTIFIER.fullmatch(target):
                if not self.carries(word):  # else the value's own check reports it
                    self.refuse("name-word", word, self.text(word)[:40], index=None)
                continue
            yield target, word

    def mark_mentions(self) -> None:
        """Add the expansions of tainted names to the value-carrying leaves."""
        starts = set(self.value_nodes) | self.extra_starts
        for node in self.tree.nodes:
            if node.type in ("simple_expansion", "expansion"):
                name = self.expanded_name(node)
                if name is not None and self.is_tainted_name(name):
                    starts.add(node.start_byte)
        self.value_starts = sorted(starts)

    def expanded_name(self, expansion: Any) -> str | None:
        for child in expansion.children:
            if child.type in ("variable_name", "special_variable_name"):
                return self.text(child)
            if child.type == "subscript":
                inner = child.child_by_field_name("name")
                return self.text(inner) if inner is not None else None
        return None

    def is_tainted_name(self, name: str) -> bool:
        return name in self.tainted or name.isdigit() or name in ("@", "*", "_")

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
        return name in BASH_INTEGERS or name in self.numeric

    # -- pass 4: values and their readers ------------------------------------------

    def flows(self) -> None:
        for node in self.value_nodes.values():
            self.index = self.sentinel_index(node)
            self.judge(node)
        for node in self.tree.nodes:
            if node.type in ("simple_expansion", "expansion"):
                name = self.expanded_name(node)
                if name is not None and self.is_tainted_name(name):
                    self.index = self.tainted.get(name)
                    try:
                        self.mention(node, name)
                    except _Refused as refused:
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
        except _Refused as refused:
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
            raise _Refused("expansion", node)
        if parent is None or parent.type != "string":
            heredoc = tree.inside(node, ("heredoc_body", "heredoc_redirect"))
            raise _Refused("heredoc" if heredoc is not None else "expansion", node)
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
            raise _Refused("unclassified", node)
        if self.brace_expands(word):  # test {-v,{{ x }}}: two words, the value after -v
            raise _Refused("split", word, "brace expansion")
        kind = parent.type
        if kind == "command" and field == "argument":
            self.argument(parent, word)
            self.statement(parent, parent)
        elif kind == "file_redirect" and field == "destination":
            operator = next((self.text(c) for c in parent.children if not c.is_named), "")
            if operator not in _SAFE_REDIRECTS:
                raise _Refused("redirect", parent, operator)
            statement = tree.parent(parent)
            if operator in _READING_REDIRECTS:
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
        elif kind in ("for_statement", "select_statement") and field == "value":
            self.statement(parent, None)  # the loop variable is tainted
        elif kind in ("binary_expression", "unary_expression", "test_command"):
            self.single_bracket_test(word)
        else:
            rule = _RULE_BY_PARENT.get(kind, "unclassified")
            if kind == "case_item" and field != "value":
                rule = "unclassified"
            raise _Refused(rule, node, "" if rule != "unclassified" else kind)

    def assignment(self, assignment: Any) -> None:
        tree = self.tree
        name_node = assignment.child_by_field_name("name")
        operator = next((self.text(c) for c in assignment.children if not c.is_named), "")
        if name_node is None or name_node.type != "variable_name" or operator != "=":
            raise _Refused("assignment", assignment)
        name = self.text(name_node)
        if is_shell_control_name(name):
            raise _Refused("shell-control", assignment, name)
        owner = tree.parent(assignment)
        if owner is not None and owner.type == "declaration_command":
            # declare/local NAME='(...)' on an array evaluates the subscripts in it
            raise _Refused("declaration", owner)
        elif owner is not None and owner.type == "command":  # NAME={{ x }} program ...
            if is_code_bearing_env(name):
                raise _Refused("env-name", assignment, name)
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
            raise _Refused("command-name", word)
        if resolved.name is None:
            raise _Refused(
                "unknown-command", resolved.name_node, self.text(resolved.name_node)[:40]
            )
        if command.id in self.arguments_judged:
            return  # another value of this command: the same verdict
        self.receiver(command, resolved, "argv")
        if resolved.name == "printf":
            self.printf(resolved)
        if resolved.name in ("test", "["):
            self.test_arguments(resolved)
        self.arguments_judged.add(command.id)

    def printf(self, resolved: _Command) -> None:
        """printf reads options, then a format: both must be literal words."""
        position = 0
        words = resolved.arguments
        while position < len(words):
            text = self.fixed(words[position])
            if text is None:
                raise _Refused("printf-option", words[position])
            if text == "--":
                position += 1
                if self.consumers is None:
                    return  # after --, a format from a value only prints: no option, no code
                break
            if text.startswith("-v"):  # -v NAME: a name, fixed before the script runs
                if len(text) == 2:
                    position += 1
                    if position >= len(words) or self.fixed(words[position]) is None:
                        raise _Refused("printf-option", words[min(position, len(words) - 1)])
                position += 1
                continue
            break
        if position < len(words) and self.fixed(words[position]) is None:
            raise _Refused("printf-option", words[position])

    def test_arguments(self, resolved: _Command) -> None:
        words = [w for w in resolved.arguments if self.text(w) != "]"]
        statics = [self.fixed(w) for w in words]
        if any(s in ("-v", "-R") for s in statics) and any(s is None for s in statics):
            raise _Refused("test-operator", resolved.name_node, "-v/-R")
        if sum(1 for w in words if self.carries(w)) > 1:
            raise _Refused("test-operator", resolved.name_node, "two values")
        non_static = [
            w for w, s in zip(words, statics, strict=True) if s is None and not self.carries(w)
        ]
        if non_static and any(self.carries(w) for w in words):
            raise _Refused("option-word", non_static[0], self.text(non_static[0])[:40])

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
        return _BRACE.search(_ESCAPED_TEXT.sub("", text)) is not None

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
                raise _Refused("split", word, self.text(word)[:40])
        loose = [at for at, s in enumerate(statics) if s is None and own[at]]
        if loose and any(s in ("-v", "-R") for s in statics):
            raise _Refused("test-operator", words[loose[0]], "-v/-R")
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
            raise _Refused("test-operator", words[at], "a word in an operator's place")

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

    def single_bracket_test(self, word: Any) -> None:
        """``[ {{ x }} = y ]``: one value; operators from ``_TEST_OPERATORS`` only (no ``-v``)."""
        tree = self.tree
        expression = tree.parent(word)
        test = expression if expression.type == "test_command" else tree.parent(expression)
        if test is None or test.type != "test_command":
            if tree.inside(expression, ("test_command",)) is not None:
                outer = tree.inside(expression, ("test_command",))
                if outer.children[0].type == "[[":
                    raise _Refused("double-bracket", word)
                raise _Refused("test-operator", word, "a compound test")
            raise _Refused("arithmetic", word)
        if test.children[0].type != "[":
            raise _Refused("double-bracket", word)
        if expression is not test:
            operator = expression.child_by_field_name("operator")
            if operator is None or self.text(operator) not in _TEST_OPERATORS:
                raise _Refused(
                    "test-operator", word, self.text(operator) if operator is not None else ""
                )
        operands = [n for n in expression.children if n.is_named and tree.field(n) != "operator"]
        if sum(1 for n in operands if self.carries(n)) > 1:
            raise _Refused("test-operator", word, "two values")
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
                    raise _Refused("case-pattern", node)
            elif kind == "function_definition":
                pass  # refused as a whole by the first pass
            else:
                raise _Refused(_RULE_BY_PARENT.get(kind, "unclassified"), node, kind)
            node = parent

    def substitution(self, substitution: Any) -> None:
        """``$( )`` holding a value: its output is the value now."""
        tree = self.tree
        if substitution.children[0].type == "`":
            raise _Refused("quoted", substitution, "backticks")
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
            raise _Refused("split", substitution)
        self.data_position(substitution)

    def process_substitution(self, substitution: Any) -> None:
        """``<( )`` holding a value: whoever reads the pipe it names receives it."""
        tree = self.tree
        parent, field = tree.parent(substitution), tree.field(substitution)
        if parent is None:
            raise _Refused("unclassified", substitution)
        if parent.type == "command" and field == "argument":
            resolved = self.resolve(parent)
            if resolved.name is None:
                raise _Refused("unknown-command", parent)
            self.receiver(parent, resolved, "<( )")
            self.statement(parent, parent)
        elif parent.type == "file_redirect":
            operator = next((self.text(c) for c in parent.children if not c.is_named), "")
            if operator not in _READING_REDIRECTS:
                raise _Refused("redirect", parent, operator)
            statement = tree.parent(parent)
            self.stdin_of(statement, parent)
            self.statement(statement, statement)
        else:
            raise _Refused(
                _RULE_BY_PARENT.get(parent.type, "unclassified"), substitution, parent.type
            )

    def stdin_of(self, statement: Any, redirect: Any) -> None:
        """Every command in ``statement`` may read what ``redirect`` feeds it."""
        if statement is None:
            raise _Refused("unclassified", redirect)
        if statement.type == "command":
            resolved = self.resolve(statement)
            if resolved.name_node is None:
                return
            if resolved.name is None:
                raise _Refused("unknown-command", resolved.name_node)
            if resolved.name == "exec":
                raise _Refused("stdin", statement, "exec with input")
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
                    raise _Refused("unknown-command", resolved.name_node)
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

    def receiver(self, command: Any, resolved: _Command, via: str) -> None:
        """``command`` (running ``resolved``) receives a value ``via`` its argv,
        stdin or environment: it must be allowed to."""
        key = command.id
        name = resolved.name
        if name is None:
            raise _Refused("unknown-command", resolved.name_node)
        detail = f"{name}, {_VIA[via]}" if via != "argv" else name
        if key not in self.received:
            self.received.add(key)
            self.record_written_paths(command, resolved)
        for word in resolved.arguments:
            option = self.tree.static(word)
            if option is not None and _is_running_option(option.split("=", 1)[0]):
                raise _Refused("executor", word, f"{name} {option.split('=', 1)[0]}")
        if via in ("stdin", "<( )") and name not in BUILTINS | STREAM_FILTERS:
            self.content_written = True  # it may write what it read to any file
        if via == "argv" and name in self._MAKERS | {"mkdir", "mkfifo", "mknod", "truncate"}:
            self.content_written = True  # touch {{ x }}: the value is a file name now
        elif via == "argv" and self.consumers is None and name not in BUILTINS | STREAM_FILTERS:
            # fallocate, sort -o, mktemp {{ x }}: any program may make a file
            # the value names (a later `tar *` reads the name as an option).
            # (Strict mode runs no executor but a consumer anyway.)
            self.content_written = True
            self.makers.add(key)  # judged as a receiver, not again as a reader
        if self.consumers is not None:
            allowed = name in self.consumers or name in STRICT_RECEIVERS
            if name in STDIN_BUILTINS and via != "stdin":
                allowed = False
            if not allowed or is_interpreter(name):
                raise _Refused("consumer", resolved.name_node, detail)
            launched = self.launched(resolved)  # xargs sh -c {{ x }}: sh was not named
            if launched is not None and name not in BUILTINS:
                raise _Refused("wrapper", launched, f"{name} {self.text(launched)[:40]}")
            return
        if name in BUILTINS:
            if name in SAFE_BUILTINS or (via == "stdin" and name in STDIN_BUILTINS):
                return
            if name in STDIN_BUILTINS and via == "env":
                return
            raise _Refused("evaluating-builtin", resolved.name_node, detail)
        if is_executor(name):
            raise _Refused("executor", resolved.name_node, detail)
        if name in STRICT_RECEIVERS:
            return
        launched = self.launched(resolved)
        if launched is not None:
            raise _Refused("wrapper", launched, f"{name} {self.text(launched)[:40]}")

    def launched(self, resolved: _Command) -> Any:
        """The word of ``resolved``'s arguments that names a program it may
        launch (``tini-static -s /usr/bin/xargs``, ``ld.so /bin/sh``): a
        shell or an interpreter anywhere, an executor as a path or as the
        first word that is not an option; None if there is none."""
        first = True
        for word in resolved.arguments:
            text = self.tree.static(word)
            if text is None:
                continue
            base = text.rsplit("/", 1)[-1]
            if is_interpreter(base) or (is_executor(base) and ("/" in text or first)):
                return word
            if not text.startswith("-"):
                first = False
        return None

    #: Programs that write what they receive to the files their arguments name.
    _COPIERS = frozenset(
        {"tee", "cp", "mv", "install", "ln", "dd", "sponge", "rsync", "sort", "uniq", "shuf", "xxd"}
    )

    def record_written_paths(self, command: Any, resolved: _Command) -> None:
        """A command that receives a value may write it to any file it names
        (``sort -o f``, ``tee f``, ``cp x f``) or redirects to: a command that
        later runs such a file runs the value.  A copier's file that is not
        a literal word cannot be followed: refused.  (Builtins write only
        through redirects: ``read a b`` names variables.)"""
        for word in resolved.arguments if resolved.name not in BUILTINS else ():
            if self.carries(word):
                continue
            path = self.tree.static(word)
            if path is None:
                if resolved.name in self._COPIERS:
                    raise _Refused("file-flow", word, "a file named at run time")
                continue
            path = path.split("=", 1)[-1]  # dd of=f, --output=f
            if path and not path.startswith("-"):
                self.tainted_paths.add(_device(path) or _base(path))
        node = self.tree.parent(command)
        while node is not None and node.type not in (  # { cat; } > f: f holds it too
            "command_substitution",
            "process_substitution",
        ):
            if node.type == "redirected_statement":
                self.record_redirects(node)
            node = self.tree.parent(node)

    def record_redirects(self, statement: Any) -> None:
        """The files ``statement`` (whose output carries a value) writes to; a
        name not fixed before the script runs cannot be followed: refused."""
        for redirect in statement.children:
            if redirect.type != "file_redirect":
                continue
            operator = next((self.text(c) for c in redirect.children if not c.is_named), "")
            destination = redirect.child_by_field_name("destination")
            if operator == ">&" and destination is not None:  # >&2 duplicates; >&f writes f
                target = self.tree.static(destination)
                if target is not None and (target.isdigit() or target == "-"):
                    continue
            if operator in (*_WRITING_REDIRECTS, ">&") and destination is not None:
                path = self.tree.static(destination)
                if path is None or _GLOB.search(path):
                    raise _Refused("file-flow", destination, "a file named at run time")
                self.tainted_paths.add(_device(path) or _base(path))
                if not _device(path):
                    self.value_in_file = True

    def file_readers(self) -> list[Any]:
        """The commands that read a file a value was written to (their output
        carries the value from now on); refuses one run from such a file."""
        self.tainted_paths.discard("")
        for device in _DEVICES:
            self.tainted_paths.discard(device)  # /dev/null and the like hold nothing
        readers = []
        if self.tainted.keys() & {"PWD", "OLDPWD", "DIRSTACK"}:
            for command in self.commands:  # cd {{ x }}; d=$(pwd): d holds the value
                resolved = self.resolve_quietly(command)
                if resolved is not None and resolved.name in ("pwd", "dirs"):
                    readers.append(command)
        if not self.tainted_paths:
            return readers
        for node in self.tree.nodes:  # $(< f): bash itself prints the file
            if node.type == "command_substitution":
                for redirect in node.named_children:
                    if redirect.type == "file_redirect" and self.reads_tainted_path(redirect):
                        readers.append(redirect)
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name_node is None:
                continue
            name_text = self.tree.static(resolved.name_node)
            if name_text is not None and _base(name_text) in self.tainted_paths:
                self.refuse("file-flow", resolved.name_node, name_text[:40], index=None)
                continue
            reads = any(self.names_tainted_path(w) for w in resolved.arguments)
            node = command  # { m=$(cat); } < f: stdin from any enclosing statement
            while not reads and self.tree.parent(node) is not None:
                parent = self.tree.parent(node)
                if parent.type == "pipeline" and parent.named_children[0].id != node.id:
                    break  # a later stage reads the pipe
                node = parent
                if node.type == "redirected_statement":
                    reads = any(
                        r.type == "file_redirect" and self.reads_tainted_path(r)
                        for r in node.children
                    )
            if reads and resolved.name is not None:
                readers.append(command)
        return readers

    def reads_tainted_path(self, redirect: Any) -> bool:
        """Is ``redirect`` a ``<`` (or ``<>``) from a file a value was written to?"""
        operator = next((self.text(c) for c in redirect.children if not c.is_named), "")
        destination = redirect.child_by_field_name("destination")
        return (
            operator in _READING_REDIRECTS
            and destination is not None
            and self.names_tainted_path(destination)
        )

    def programs_beside_files(self) -> None:
        """Once a value may sit in a file (a redirect wrote one, or a program
        that writes files read one), a program that runs code may read it
        without naming it: ``make`` its Makefile, ``git`` .git/config,
        ``python3 -c 'import f'`` f.py, ``sh -c '. ./f'``, ``sh xx01`` after
        ``csplit``.  None may run anywhere in the script; in strict mode, no
        program but the consumers (not executors) and ``STRICT_RECEIVERS``."""
        if not (self.value_in_file or self.content_written):
            return
        self.index = None
        refused = {(f.line, f.column) for f in self.findings}
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None or resolved.name in BUILTINS:
                continue  # builtins that run code are refused as constructs
            if command.id in self.makers:
                continue
            row, column = resolved.name_node.start_point
            if (row + 1, column + 1) in refused:
                continue  # refused already, as a reader or a receiver
            name = resolved.name
            if self.consumers is not None:
                allowed = name in STRICT_RECEIVERS or (
                    name in self.consumers and not is_executor(name)
                )
            else:
                allowed = not is_executor(name) and self.launched(resolved) is None
            if not allowed:
                self.refuse(
                    "file-flow",
                    resolved.name_node,
                    f"{name}: this script writes a value to a file {name} may read",
                )

    def interpreters_beside_values(self) -> None:
        """No shell or interpreter runs anywhere in a script that holds a
        value, whatever its own words: its code can reach the value by ways
        no parse follows (a file named by a value and listed by ``ls``, ``$PWD``
        after ``cd``, a variable the process already exported such as
        ``TERM``, the process list, ``/proc``).  Run it in a step of its own.
        In strict mode, no executor that is not a consumer runs either."""
        self.index = None
        refused = {(f.line, f.column) for f in self.findings}
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None:
                continue
            name = resolved.name
            row, column = resolved.name_node.start_point
            if (row + 1, column + 1) in refused:
                continue
            if is_interpreter(name):
                self.refuse("interpreter", resolved.name_node, name)
            elif self.consumers is not None and is_executor(name) and name not in self.consumers:
                # strict mode is a closed world: xargs -a <(ls) env reads a value
                # a file name holds without receiving it
                self.refuse("executor", resolved.name_node, f"{name}, not named in consumers:")

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
        except _Refused as refused:
            self.refuse(refused.rule, refused.node, refused.detail)

    def names_tainted_path(self, word: Any) -> bool:
        """Does ``word`` name a file a value was written to?  Compared by base
        name (``./f.sh``, ``f.sh`` and ``/tmp/f.sh`` alike): the working
        directory is not known before the script runs."""
        text = self.tree.static(word)
        if text is None or _GLOB.search(text):
            return True  # "$f", s.s[h]: it may name one
        return _base(text.split("=", 1)[-1]) in self.tainted_paths

    def environment_readers(self) -> None:
        """Every program the script runs gets its environment: where a variable
        of it may hold a value (a templated step ``env:``, an ``export`` of a
        tainted variable, a ``NAME=value cmd`` prefix), no program that runs
        code may run anywhere in the script (in strict mode: unless it is a
        consumer), however its code would name the variable."""
        # cd {{ x }}: bash exports the PWD it inherited, and OLDPWD, like a cwd:
        exported = set(self.env_tainted) | (self.tainted.keys() & {"PWD", "OLDPWD"})
        for node in self.tree.nodes:
            if node.type == "declaration_command" and self.text(node).startswith("export"):
                for child in node.named_children:
                    name = (
                        self.assigned_name(child)
                        if child.type == "variable_assignment"
                        else self.tree.static(child)
                    )
                    if name in self.tainted:
                        exported.add(name)
        if not exported:
            return
        shown = ", ".join(f"${name}" for name in sorted(exported))
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None:
                continue
            if not is_executor(resolved.name) and (
                resolved.name in BUILTINS or self.launched(resolved) is None
            ):
                continue
            consumer = bool(self.consumers) and resolved.name in (self.consumers or ())
            if consumer and not is_interpreter(resolved.name):
                continue
            self.refuse(
                "executor",
                resolved.name_node,
                f"{resolved.name} runs with a value in its environment ({shown})",
                index=None,
            )

    # -- the whole check -----------------------------------------------------------

    def run(self) -> list[Finding]:
        has_values = bool(self.sentinels) or bool(self.env_tainted)
        error = next((n for n in self.tree.nodes if self.misparsed(n)), None)
        if error is None and has_values:
            error = self.control_blank() or self.unparsed_expansion()
        if error is not None and has_values:
            self.refuse("syntax", error, index=None)
            return self.findings
        unclear = self.unclear_heredoc()
        if unclear is not None:
            self.refuse(
                "heredoc", unclear, "its end is not a line bash would surely end it on", index=None
            )
            return self.findings
        self.locate_values()
        if not self.value_nodes and not self.env_tainted and not self.findings:
            return self.findings  # no value was printed (a loop or branch not taken)
        self.value_starts = sorted(self.value_nodes)
        self.constructs()
        readers: dict[int, Any] = {}
        while True:  # until no command reads a file a (newly found) value was written to
            self.taint()
            self.arithmetic()
            self.flows()
            for reader in readers.values():
                self.judge_reader(reader)
            found = {r.id: r for r in self.file_readers() if r.id not in readers}
            if not found:
                self.programs_beside_files()
                self.interpreters_beside_values()
                return self.findings
            readers.update(found)
            self.extra_starts.update(r.start_byte for r in found.values())

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
        for node in self.tree.nodes:
            if node.type != "heredoc_redirect":
                continue
            kinds = {c.type: c for c in node.children}
            start, end = kinds.get("heredoc_start"), kinds.get("heredoc_end")
            if start is None or end is None:
                return node
            word = self.tree.text_bytes(start)
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


def _device(path: str) -> str | None:
    """``path`` if it is one of ``_DEVICES`` once normalized (``/dev/../x`` is not)."""
    normal = posixpath.normpath(path) if path.startswith("/") else path
    return normal if normal in _DEVICES else None


def _is_running_option(option: str) -> bool:
    """One of ``RUNNING_OPTIONS``, or a GNU abbreviation of a long one
    (``--strip-prog`` is ``--strip-program`` to getopt_long)."""
    if option in RUNNING_OPTIONS:
        return True
    return (
        option.startswith("--")
        and len(option) > 2
        and any(o.startswith(option) for o in RUNNING_OPTIONS if o.startswith("--"))
    )


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    """Each finding once; a whole-script finding where a value's own finding
    stands already (``eval {{ x }}``: rebinding and evaluating-builtin) is dropped."""
    found = set(findings)
    at_values = {(f.line, f.column) for f in found if f.index is not None}
    kept = [f for f in found if f.index is not None or (f.line, f.column) not in at_values]
    return sorted(kept, key=lambda f: (f.line, f.column, f.rule, str(f.index)))


def check_script(
    script: str,
    sentinels: Sequence[str],
    tainted: Collection[str] = (),
    *,
    shell: str | None = None,
    consumers: Collection[str] | None = None,
) -> list[Finding]:
    """Every way a value of ``script`` could run as code; empty when none can.

    ``sentinels[i]`` is the exact word (``'RV…'``) that stands for value *i*;
    ``tainted`` names environment variables that hold a value (a step's
    templated ``env``).  ``shell`` is the step's shell (None: bash);
    ``consumers`` (None: the default mode) names the only programs that may
    receive a value besides ``STRICT_RECEIVERS``.
    """
    if not sentinels and not tainted:
        return []
    dialect = dialect_of(shell)
    if dialect is None:
        if not sentinels:
            return []  # env values: the program reads its environment as data
        return [Finding(None, "shell-dialect", 1, 1, f"shell {shell!r}")]
    check = _Check(
        script.encode("utf-8"), [s.encode("utf-8") for s in sentinels], tainted, dialect, consumers
    )
    return _unique(check.run())
