"""What every pass of the shell checker shares: its state and the commands as they run.

``CheckState`` holds one script's check (the tree, the values found, the
tainted and numeric names, the files a value was written to, the findings)
and the helpers every pass uses: ``refuse``, ``carries``, ``fixed`` and
``resolve`` (the command a command runs, through the followed wrappers).
The passes are classes over it, one module each (``subset``, ``taint``,
``flows``, ``receivers``), composed into ``checker._Check``: they call each
other through ``self`` as the one big class did, and each base class names
what a pass may use (a type checker sees every call).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from .programs import FOLLOWED_WRAPPERS
from .rules import RULES
from .tree import Tree
from .variables import ALWAYS_TAINTED, is_code_bearing_env


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
        if self.rule == "planted-name" and IDENTIFIER.fullmatch(self.detail.replace("-", "_")):
            # the refused program's own path, not the table's example (review 22's U1)
            hint = hint.replace("/usr/bin/wc", f"/usr/bin/{self.detail}")
        detail = f" ({self.detail})" if self.detail else ""
        whole = self.index is None and self.rule not in ("syntax", "heredoc", "quoted")
        subject = "a script with values:" if whole else "{{ }}"
        return f"{subject} {what}{detail} [{self.rule}]: {hint}"


#: A variable name.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
_DURATION = re.compile(r"[0-9]+(\.[0-9]+)?[smhd]?")
_NICENESS = re.compile(r"[+-]?[0-9]+")
_SIGNAL = re.compile(r"[A-Za-z0-9+]+")

#: The options of followed wrappers that are skipped to the command they run,
#: as literal words only: each with the pattern of its argument (None: a
#: flag).  Any other option word, or one whose argument does not match, is
#: refused (review 25: ``nice -n 10`` and ``timeout -k 5 10`` were).
_WRAPPER_OPTIONS: dict[str, dict[str, re.Pattern[str] | None]] = {
    "nice": {"-n": _NICENESS, "--adjustment": _NICENESS},
    "timeout": {
        "-k": _DURATION,
        "--kill-after": _DURATION,
        "-s": _SIGNAL,
        "--signal": _SIGNAL,
        "--preserve-status": None,
        "--foreground": None,
        "-v": None,
        "--verbose": None,
    },
}
#: The redirects through which a command reads a file.
READING_REDIRECTS = frozenset({"<", "<>"})


class Refused(Exception):
    """A value (or a construct) that may not stand where it does: raised deep in
    a climb, turned into a ``Finding`` by whoever judges the whole value."""

    def __init__(self, rule: str, node: Any, detail: str = "") -> None:
        self.rule, self.node, self.detail = rule, node, detail


class Command(NamedTuple):
    """A command as it runs: ``name`` after followed wrappers (None when not a
    literal word), the node of that name, and the words after it."""

    name: str | None
    name_node: Any
    arguments: list[Any]


class CheckState:
    """One script's check: the state the passes share, and their common helpers."""

    def __init__(
        self,
        source: bytes,
        sentinels: Sequence[bytes],
        tainted: Collection[str],
        dialect: str,
        consumers: Collection[str] | None,
    ) -> None:
        self.tree = Tree(source)
        self.source = source
        self.sentinels = sentinels
        self.by_text = {s: i for i, s in enumerate(sentinels)}
        self.env_tainted = frozenset(tainted)
        #: names exported before the script runs (the step's env:)
        self.env_names: frozenset[str] = frozenset()
        self.dialect = dialect
        self.consumers = frozenset(consumers) if consumers is not None else None
        self.findings: list[Finding] = []
        self.index: int | None = None  # the placeholder being judged
        #: tainted variable -> the placeholder it holds (None: unknown or env)
        self.tainted: dict[str, int | None] = dict.fromkeys(tainted)
        self.tainted.update(dict.fromkeys(ALWAYS_TAINTED))
        self.numeric: set[str] = set()
        #: a Jinja loop over a value repeated the script's text (``chosen_text``):
        #: every variable it assigns may hold what the value decided
        self.shaped = False
        #: tainted names only a test on a value decided (``controlled``): one
        #: assigned only numbers may still be named in arithmetic
        self.implicit: set[str] = set()
        #: every name the script assigns (bash's integers among them are not trusted)
        self.defined: set[str] = set()
        #: commands that read a value on their stdin (their output carries it)
        self.stdin_readers: dict[int, Any] = {}
        self.tainted_paths: set[str] = set()
        #: whether a redirect wrote a value to a file, or a program that may
        #: write files read one as content (``programs_beside_files``)
        self.value_in_file = False
        self.content_written = False
        #: strict mode: a consumer may have made a file a value names
        self.value_named_file = False
        #: a value names (part of) a file a copier writes: ``tee "$HOME"/{{ x }}``
        self.value_chose_a_copy = False
        #: Commands that got a value as an argument and may have made a file of it.
        self.makers: set[int] = set()
        self.made: set[str] = set()
        #: whether a file is made under a name known only at run time
        self.unnamed_file_made = False
        #: starts of the commands whose output carries a value read from a file
        self.extra_starts: set[int] = set()
        self.value_nodes: dict[int, Any] = {}  # start byte -> sentinel node
        self.value_starts: list[int] = []  # sorted starts of every value-carrying leaf
        self.climbed: set[tuple[int, int]] = set()
        self.resolved: dict[int, Command | Refused] = {}
        self.arguments_judged: set[int] = set()
        self.received: set[int] = set()
        self.pipelines_done: set[tuple[int, int]] = set()
        self.commands = [n for n in self.tree.nodes if n.type == "command"]
        self._names_set_here: set[str] | None = None
        #: the words, sentinels and all, in which a value names where a
        #: write lands or where ``cd`` goes (the render checks them)
        self.value_destinations: set[str] = set()
        #: the words in which a value names what a program or the shell may
        #: open (a non-builtin's argument, a redirect's target): the render
        #: refuses /proc, /sys and /dev/fd there (the nineteenth review)
        self.value_reads: set[str] = set()
        #: the texts (sentinels and all) a variable that a program may open
        #: is cut from by ``read``: the render refuses one that could spell
        #: /proc or /dev/fd in a piece (``held_text``)
        self.value_read_sources: set[str] = set()
        #: the words (sentinels and all) in which a value starts an argument
        #: of a program before ``--``: the render refuses one that starts
        #: with ``-`` (an option: the twentieth review's ``grep -rn -ohe. .``)
        self.value_option_words: set[str] = set()
        #: the texts ``read`` cut such an argument from (review 22's I3)
        self.value_option_sources: set[str] = set()
        #: name -> every (node, kind) that assigns it (``taint``)
        self.definitions: dict[str, list[tuple[Any, str]]] = {}

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

    def fixed(self, node: Any) -> str | None:
        """``static`` for a word that carries no value (a value is never fixed)."""
        return None if self.carries(node) else self.tree.static(node)

    def resolve(self, command: Any) -> Command:
        """The command ``command`` runs, through the followed wrappers (once per command)."""
        known = self.resolved.get(command.id)
        if known is None:
            try:
                known = self._resolve(command)
            except Refused as refused:
                known = refused
            self.resolved[command.id] = known
        if isinstance(known, Refused):
            raise known
        return known

    def _resolve(self, command: Any) -> Command:
        name_node = command.child_by_field_name("name")
        if name_node is None:
            return Command(None, None, [])
        words = [name_node, *(c for c in command.children if self.tree.field(c) == "argument")]
        position = 0
        while True:
            word = words[position]
            name = self.fixed(word)
            if name is None:
                return Command(None, word, words[position + 1 :])
            base = name.rsplit("/", 1)[-1]
            if base == "jobs" and position + 1 < len(words):
                option = self.fixed(words[position + 1])
                if option == "-x":  # jobs -x CMD ARGS runs CMD: judge CMD
                    position = self.wrapped(words, position + 1, base)
                    continue
                if option is None or (option.startswith("-") and "x" in option):
                    raise Refused("wrapper", words[position + 1], f"jobs {option or ''}"[:40])
            if base not in FOLLOWED_WRAPPERS or not system_spelling(name):
                # ./timeout is whatever put it there: judged as itself (review 15)
                return Command(base, word, words[position + 1 :])
            position = self.wrapped(words, position, base)

    def wrapped(self, words: list[Any], position: int, wrapper: str) -> int:
        """The position of the command a followed wrapper runs."""
        position += 1
        if wrapper == "time" and position < len(words) and self.fixed(words[position]) == "-p":
            position += 1
        position = self._skip_options(words, position, wrapper)
        if wrapper == "timeout":
            duration = self.fixed(words[position]) if position < len(words) else None
            if duration is None or not _DURATION.fullmatch(duration):
                raise Refused("wrapper", words[position - 1], "timeout needs a literal duration")
            position += 1
        while wrapper == "env" and position < len(words):
            text = self.fixed(words[position])
            if text is None or not _ENV_ASSIGNMENT.fullmatch(text):
                break
            if is_code_bearing_env(text.split("=", 1)[0]):
                raise Refused("env-name", words[position], text.split("=", 1)[0])
            position += 1
        if position >= len(words):
            raise Refused("wrapper", words[position - 1], wrapper)
        text = self.fixed(words[position])
        if text is None:
            carries = self.carries(words[position])
            raise Refused(
                "command-name" if carries else "unknown-command",
                words[position],
                "" if carries else self.text(words[position])[:40],
            )
        if text.startswith("-"):
            raise Refused("wrapper", words[position], f"{wrapper} {text}")
        return position

    def _skip_options(self, words: list[Any], position: int, wrapper: str) -> int:
        """The position after a wrapper's literal options (``-n 10``, ``-n10``,
        ``--adjustment=10``; nice's ``-10``) and a ``--``.  An option whose
        argument is not one the checker reads as the wrapper does is refused
        (``nice -n ' 10' PROG``: GNU nice skips the space and runs PROG:
        review 27's W3)."""
        options = _WRAPPER_OPTIONS.get(wrapper, {})
        while options and position < len(words):
            text = self.fixed(words[position]) or ""
            if text == "--":
                return position + 1
            name, glued, argument = text.partition("=") if text.startswith("--") else ("", "", "")
            if not name and text[:2] in options and len(text) > 2:
                name, glued, argument = text[:2], "=", text[2:]  # -n10
            name = name or text
            if "-n" in options and _NICENESS.fullmatch(text) and text.startswith("-"):
                position += 1  # nice -10: the old spelling of -n 10
                continue
            if name not in options:
                return position
            pattern = options[name]
            if pattern is None:
                if glued:
                    raise Refused("wrapper", words[position], f"{wrapper} {text}"[:40])
                position += 1
                continue
            option = words[position]
            if not glued:
                position += 1
                argument = (self.fixed(words[position]) if position < len(words) else None) or ""
            if not pattern.fullmatch(argument):
                raise Refused("wrapper", option, f"{wrapper} {name} needs a literal argument")
            position += 1
        return position

    #: Variables bash itself sets as the script runs.
    _SET_BY_BASH = frozenset(
        {"PWD", "OLDPWD", "DIRSTACK", "OPTIND", "RANDOM", "SRANDOM", "SECONDS", "LINENO"}
        | {"PIPESTATUS", "EPOCHSECONDS", "EPOCHREALTIME", "FUNCNAME", "HISTCMD", "GROUPS"}
        | {"PPID", "SHLVL", "UID", "EUID", "HOSTNAME", "COLUMNS", "LINES"}
    )

    def named_by_environment(self, word: Any) -> bool:
        """Is ``word`` one variable, whole, that the environment sets and the
        script never does (``"$GITHUB_OUTPUT"``)?  Its text is fixed before
        the script runs (unset, it names no file).  Not a value's, not the
        step's ``env:`` (the author's, maybe a program's name), nothing bash
        or the script sets; not beside other text (``w${e}c`` is ``wc``)."""
        kinds = {"simple_expansion", "expansion"}
        expansions = [
            n for n in self.tree.subtree(word) if n.type in kinds or "substitution" in n.type
        ]
        raw = self.text(word)
        for node in expansions:
            raw = raw.replace(self.text(node), "")
        if len(expansions) != 1 or raw.strip('"'):
            return False  # w${e}c with e unset is wc: only a whole word counts
        set_here = self.names_set_here()
        for node in expansions:
            name = self.expanded_name(node)
            if (
                node.type not in kinds
                or name is None
                or not IDENTIFIER.fullmatch(name)
                or self.text(node) not in ("$" + name, "${" + name + "}")
                or name in set_here
                or name in self.env_tainted
                or name in self.env_names
                or name in ALWAYS_TAINTED
                or name in self._SET_BY_BASH
                or name.startswith("BASH")
            ):
                return False
        return True

    def names_set_here(self) -> set[str]:
        """Every name the script may set, over-counted: assignments, loop
        variables, each identifier among the words of the builtins that
        assign (``read``, ``printf -v``, ``declare``...), ``${N:=x}``, and
        every name in arithmetic."""
        if self._names_set_here is not None:
            return self._names_set_here
        names: set[str] = set()
        assigning = {"read", "mapfile", "readarray", "getopts", "printf", "declare"}
        assigning |= {"typeset", "local", "export", "readonly", "let", "unset", "wait"}
        arithmetic = ("arithmetic_expansion", "c_style_for_statement", "binary_expression")
        for node in self.tree.nodes:
            kind = node.type
            if kind == "variable_assignment":
                names.add(self.assigned_name(node) or "")
            elif kind in ("for_statement", "select_statement"):
                variable = node.child_by_field_name("variable")
                names.add(self.text(variable) if variable is not None else "")
            elif kind == "expansion" and "=" in self.text(node):
                names.add(self.expanded_name(node) or "")
            elif kind in ("command", "declaration_command", "unset_command"):
                words = self.text(node).split()
                if words and words[0].strip("'\"\\") in assigning | {"builtin", "command"}:
                    names |= {w.split("=", 1)[0].split("[", 1)[0] for w in words}
            elif kind == "variable_name" and self.tree.inside(node, arithmetic) is not None:
                names.add(self.text(node))
        self._names_set_here = names
        return names

    def resolve_quietly(self, command: Any) -> Command | None:
        try:
            return self.resolve(command)
        except Refused:
            return None

    def assigned_name(self, assignment: Any) -> str | None:
        name = assignment.child_by_field_name("name")
        if name is None:
            return None
        if name.type == "subscript":
            name = name.child_by_field_name("name")
        return self.text(name) if name is not None else None

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

    #: The options of each name-assigning builtin that take an argument.
    _OPTION_ARGUMENTS = {
        "read": "adinNptu",
        "mapfile": "dnOsuCc",
        "readarray": "dnOsuCc",
        "printf": "v",
        "getopts": "",
    }

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

    def picking_name(self, expansion: Any) -> str | None:
        """A tainted name ``expansion`` reads as a number to pick its text
        (an offset, a length, a subscript: ``${al:m:1}``, ``${a[m]}``)."""
        for node in self.tree.subtree(expansion):
            if node is expansion or node.type not in ("variable_name", "word"):
                continue
            name = self.text(node)
            if self._read_as_number(node) and IDENTIFIER.fullmatch(name) and name in self.tainted:
                return name
        return None

    def _read_as_number(self, node: Any) -> bool:
        """Is ``node`` a name bash reads as arithmetic: inside ``(( ))``,
        ``$(( ))``, a C-style loop's header, a subscript, or an expansion's
        offset or length (not the name it expands)?"""
        tree = self.tree
        parent = tree.parent(node)
        if parent is None:
            return False
        if parent.type == "subscript":  # its index; its name too, inside arithmetic
            if tree.field(node) == "index":
                return True
            inside = tree.inside(parent, ("arithmetic_expansion", "c_style_for_statement"))
            return inside is not None or self._in_double_parens(parent)
        if parent.type == "expansion":
            return node is not next(
                (c for c in parent.children if c.type == "variable_name"), None
            ) and any(tree.field(c) == "operator" for c in parent.children)
        if tree.inside(node, ("arithmetic_expansion", "c_style_for_statement")) is not None:
            return True
        return self._in_double_parens(node)

    def _in_double_parens(self, node: Any) -> bool:
        statement = self.tree.inside(node, ("compound_statement",))
        return (
            statement is not None
            and bool(statement.children)
            and (statement.children[0].type == "((")
        )


def base_name(path: str) -> str:
    """The last part of ``path``: files are compared by it (the working
    directory is not known before the script runs)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def system_spelling(name: str) -> bool:
    """Is ``name`` a bare name or a path in /bin or /usr/bin (the system's
    own program, not a file a script or an earlier step put somewhere)?"""
    return "/" not in name or name.rpartition("/")[0] in ("/bin", "/usr/bin")
