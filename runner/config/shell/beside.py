"""What may run beside a value: the whole-script refusals, after the flows.

Following each value to its readers (``flows``, ``receivers``) cannot see
what a program does with what it was never given: ``make`` reads its
Makefile, a shell reads ``$PWD`` and the process list, a program may run
shell code from its own option text.  So once a script holds a value,
these refusals look at every command in it, whatever it receives:

- once a value may sit in a file, no program that runs code
  (``programs_beside_files``);
- no shell or interpreter, nor one another program starts
  (``interpreters_beside_values``);
- a closed world, in either mode: no program but the consumers,
  ``STRICT_RECEIVERS`` and ``STRICT_PROGRAMS`` (data programs with no
  option that runs anything, by name or from /bin, /usr/bin;
  ``strict_programs_only``).  The fourteenth review ran the script's own
  text, read back with ``ps``, from ``dpkg-buildpackage --hook-init='...'``
  in strict mode, the seventeenth in the default mode: no checker can know
  every program's options and environment, so neither mode tries.
"""

from __future__ import annotations

from typing import Any

from .code_operands import jq_environment_read, jq_may_load_modules, jq_program_words
from .proc_paths import UNQUOTED, component_may_be, may_read_an_environment, through_dev_links
from .programs import (
    FILE_WRITERS,
    STRICT_PROGRAMS,
    STRICT_RECEIVERS,
    is_executor,
    is_interpreter,
)
from .receivers import _WRITING_REDIRECTS, ReceiverCheck, is_running_option
from .rules import BUILTINS
from .state import IDENTIFIER, READING_REDIRECTS, base_name, system_spelling

#: Names bash itself changes while a script runs: no fixed text.  (``$PWD``
#: is fixed until a ``cd``, which ``taint`` records as its definition.)
_CHANGING = frozenset(
    {"RANDOM", "SRANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID", "LINENO"}
    | {"PIPESTATUS", "HISTCMD", "BASH_COMMAND", "BASH_LINENO"}
    | {"BASH_REMATCH", "REPLY", "MAPFILE", "OPTARG", "OPTIND", "COPROC", "FUNCNAME", "_"}
)


class BesideValuesCheck(ReceiverCheck):
    """The refusals that look at every command of a script that holds a value."""

    def programs_beside_files(self) -> None:
        """Once a value may sit in a file (a redirect wrote one, or a program
        that writes files read one), a program that runs code may read it
        without naming it: ``make`` its Makefile, ``git`` .git/config,
        ``python3 -c 'import f'`` f.py, ``sh -c '. ./f'``, ``sh xx01`` after
        ``csplit``.  None may run anywhere in the script; in strict mode, no
        program but the consumers (not executors) and ``STRICT_RECEIVERS``."""
        if not (self.value_in_file or self.content_written):
            if self.value_named_file:
                self.option_globs()
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
                if name == "jq":  # printf {{ x }} > m.jq; jq 'include "m"; f'
                    words = [self.tree.static(w) for w in resolved.arguments]
                    # > {{ path }}: the value may name ~/.jq, which jq loads into
                    # every program (the twentieth review's G2)
                    value_named = self.value_chose_a_copy or any(
                        ("'" + path + "'").encode() in self.by_text for path in self.tainted_paths
                    )
                    allowed = not value_named and not jq_may_load_modules(words, self.tainted_paths)
            if not allowed:
                self.refuse(
                    "file-flow",
                    resolved.name_node,
                    f"{name}: this script writes a value to a file {name} may read",
                )
            elif self.content_written and name not in STRICT_RECEIVERS:
                # touch -- {{ x }}; sort *: the glob may expand to a file name a
                # value chose, read as an option (--compress-program=sh, the
                # thirteenth review); after --, names are only operands
                self.refuse_option_glob(resolved)

    def option_globs(self) -> None:
        """Strict mode, after a consumer may have made a file a value names:
        no program but ``STRICT_RECEIVERS`` gets a glob before its operands
        (``sort *`` reads ``--compress-program=sh`` as an option)."""
        self.index = None
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is not None and resolved.name not in BUILTINS | STRICT_RECEIVERS:
                self.refuse_option_glob(resolved)

    def refuse_option_glob(self, resolved: Any) -> None:
        """A glob before ``resolved``'s operands may expand to a file name a
        value chose, read as an option; after ``--``, names are only operands."""
        option_glob = self.glob_before_operands(resolved)
        if option_glob is not None:
            self.refuse(
                "file-flow",
                option_glob,
                f"{resolved.name} {self.text(option_glob)[:30]}: a file name a value chose "
                "may expand here as an option (put -- before it)",
            )

    def globs_into_variables(self) -> None:
        """Once a value may have named a file, a glob that fills a variable
        (``for f in *``, ``select f in *``, ``a=(*)``) may hand a later
        command a name the value chose, read as an option (``@opts`` to
        ``nm``: the seventeenth review); ``./*`` names start with ``./``."""
        if not (self.content_written or self.value_named_file):
            return
        self.index = None
        for node in self.tree.nodes:
            if node.type in ("for_statement", "select_statement", "array"):
                words = (
                    node.named_children
                    if node.type == "array"
                    else node.children_by_field_name("value")
                )
                for word in words:
                    if self.globs(word) and not self.text(word).startswith(("./", "/")):
                        self.refuse(
                            "file-flow",
                            word,
                            f"{self.text(word)[:30]}: a file name a value chose may come out "
                            "as an option (write ./* )",
                        )

    def jq_programs_fixed(self) -> None:
        """In a script with values, each jq's program is
        the author's text: its filter, ``-f`` file and ``-L`` path fixed
        words, the file and path relative ones below the working folder (not
        ``/dev/stdin``, ``/dev/fd/3`` or ``-``, whatever feeds them), and no
        file this script writes.  Reviews 33 and 34 copied a
        value into a variable by ways the taint then missed (``case``
        branches, counts, ``$?``) and made it jq's filter or ``-f`` file;
        whatever the next such way, jq runs no text the script computed.
        In strict mode too, unless jq is a consumer (trusted with its code)."""
        if self.consumers is not None and "jq" in self.consumers:
            return
        self.index = None
        refused = {(f.line, f.column) for f in self.findings}
        written: set[str | None] | None = None
        leaves: bool | None = None
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name != "jq":
                continue
            for word, role in jq_program_words(resolved.arguments, self.fixed):
                row, column = word.start_point
                if (row + 1, column + 1) in refused:
                    continue  # already refused (a value in it, a file it was written to)
                text = self.fixed(word)
                if text is None:
                    if not self.carries(word):  # a value: refused where it flows
                        self.refuse("code-operand", word, f"jq's {role}, not fixed text")
                    continue
                if role == "filter":
                    continue
                if text.startswith("--"):  # --from-file=FILE
                    text = text.split("=", 1)[1]
                parts = text.split("/")
                if leaves is None:
                    leaves = self.leaves_the_workspace()
                if text == "-" or text.startswith("/") or ".." in parts or leaves:
                    # after cd /dev, stdin is /dev/stdin (review 40's F1)
                    # /dev/stdin, /dev/fd/3, /proc/self/fd/0 read what a
                    # redirect or a pipe feeds jq (review 36's F1, F2)
                    self.refuse("code-operand", word, f"jq's {role} {text}: name a file here")
                    continue
                if written is None:
                    written = self.written_names()
                # a module directory: any file written may be one of its modules
                if None in written or base_name(text) in written or (role == "-L path" and written):
                    self.refuse("code-operand", word, f"jq's {role}, a file this script writes")

    def computed_words(self) -> None:
        """Beside a value, a program's words, a redirect's
        file and ``cd``'s folder expand no text the script computed while it
        ran: review 35 spelled a value out through file contents, ``umask``,
        ``ulimit``, ``$-`` and timing, none of them a flow the taint follows,
        then read ``/proc/self/environ`` with ``od -c "$P"`` and wrote a
        ``.pth`` with ``cat body > "$D"``.  A value's own mention is the value
        rules' to judge; a word of literal text, values and variables assigned
        only such words (or from the environment) is the author's, and a
        ``$( )`` is computed whatever it holds (``<( )`` is a descriptor's
        name bash picks; what flows through it, the value rules follow).  In
        strict mode too (it refuses all the default mode does), consumers
        included."""
        self.index = None
        refused = {(f.line, f.column) for f in self.findings}
        words: list[Any] = []
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None:
                continue
            if resolved.name not in BUILTINS or resolved.name in ("cd", "pushd"):
                words.extend(resolved.arguments)
        for node in self.tree.nodes:
            if node.type == "file_redirect":
                destination = node.child_by_field_name("destination")
                if destination is not None:
                    words.append(destination)
        for word in words:
            row, column = word.start_point
            if (row + 1, column + 1) in refused:
                continue
            if not self.fixed_text(word):
                self.refuse("computed-word", word, self.text(word)[:40])

    def environment_dumps(self) -> None:
        """Beside a value, nothing prints every variable or reads a process's
        environment or memory, where a step's secrets are: the value could
        choose which one is printed, and how, past the scrubber (review 37's
        F6: ``set | grep -o -- {{ x }}`` with ``^TOKEN=.\\{4\\}\\|[^=]\\{4\\}``
        printed a secret four characters a line).  So no ``set``,
        ``export``, ``declare``, ``typeset``, ``readonly`` or ``local``
        without names, and no program's word or redirect naming a path under
        /proc but a system-wide file (``/proc/cpuinfo``); a relative word
        counts too where the script may leave the working folder (``cd /``,
        ``cd ..``) or makes links.  In either mode."""
        self.index = None
        moves = self.leaves_the_workspace()
        words: list[Any] = []
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None:
                continue
            if resolved.name == "set" and not resolved.arguments:
                self.refuse("environment-dump", resolved.name_node, "set")
            if resolved.name in ("cd", "pushd", "ln"):
                self.into_dev(resolved, moves)
            if resolved.name == "jq":
                # jq -n env | grep -o -- {{ x }}: jq gets no value, the dump
                # does (review 40's F4)
                found = jq_environment_read(resolved.arguments, self.fixed)
                if found is not None:
                    self.refuse("environment-dump", found[0], f"jq {found[1]}")
            if resolved.name not in BUILTINS:
                words.extend(resolved.arguments)
        for node in self.tree.nodes:
            if node.type == "declaration_command" and not node.named_children:
                self.refuse("environment-dump", node, self.text(node)[:20])
            elif node.type == "file_redirect" and (
                destination := node.child_by_field_name("destination")
            ):
                operator = next((self.text(c) for c in node.children if not c.is_named), "")
                if operator in READING_REDIRECTS:
                    words.append(destination)
        # p=/proc/self; cat "$p/environ": through a variable set to such a path
        environ_names = self.process_path_names(may_read_an_environment)
        for word in words:
            if self.carries(word):
                continue  # a value's path: checked with the value in, at the render
            text = self.tree.static(word) or UNQUOTED.sub("", self.text(word))
            through = any(
                node.type in ("simple_expansion", "expansion")
                and self.expanded_name(node) in environ_names
                for node in self.tree.subtree(word)
            )
            if through or ((moves or _may_leave(text)) and may_read_an_environment(text)):
                self.refuse("environment-dump", word, text[:40])

    def leaves_the_workspace(self) -> bool:
        """May a relative name of this script lead out of the working folder:
        a ``cd``, ``pushd`` or ``popd`` that may (``_may_leave``), or any
        ``ln`` (a link may point anywhere)?"""
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None:
                continue
            if resolved.name in ("cd", "pushd", "popd"):
                targets = [t for t in map(self.fixed, resolved.arguments) if t != "--"]
                if not targets or any(_may_leave(t) for t in targets):
                    return True
            elif resolved.name == "ln":
                return True
        return False

    def into_dev(self, resolved: Any, moves: bool) -> None:
        """No ``cd`` into /dev, nor a link to /dev or /proc, beside a value:
        there ``stdin``, ``fd/0`` and ``fd/../environ`` are /proc's, under
        names no check reads as such (``cd /dev; jq -f stdin``, ``ln -s
        /dev/fd d; jq -f d/0``: review 40's F1).  A relative folder counts
        where the script may have left the working folder."""
        # d=/dev; cd "$d": through a variable set (or looped) to such a path
        dev_names = self.process_path_names(_names_dev_or_proc)
        for word in resolved.arguments:
            if self.carries(word):
                continue  # a value's folder: judged at the render
            if any(
                node.type in ("simple_expansion", "expansion")
                and self.expanded_name(node) in dev_names
                for node in self.tree.subtree(word)
            ):
                what = "a link to" if resolved.name == "ln" else f"{resolved.name} into"
                self.refuse("file-flow", word, f"{what} /dev or /proc")
                continue
            text = through_dev_links(self.tree.static(word) or UNQUOTED.sub("", self.text(word)))
            parts = [p for p in text.split("/") if p not in ("", ".")]
            if text.startswith("/"):
                parts = parts[:1]
            elif resolved.name == "ln" or not moves:
                continue
            if any(component_may_be("dev", p) or component_may_be("proc", p) for p in parts):
                what = "a link to" if resolved.name == "ln" else f"{resolved.name} into"
                self.refuse("file-flow", word, f"{what} /dev or /proc")

    def fixed_text(self, word: Any, seen: frozenset[str] = frozenset()) -> bool:
        """Is ``word`` made of literal text and the expansions of names whose
        text is fixed before the script runs (``fixed_name``)?"""
        for node in self.tree.subtree(word):
            if node.type in ("command_substitution", "arithmetic_expansion"):
                return False
            if node.type in ("simple_expansion", "expansion"):
                names = [
                    self.text(c)
                    for c in self.tree.subtree(node)
                    if c.type in ("variable_name", "special_variable_name")
                    or (c.type == "word" and self.tree.field(c) == "index")
                ]
                if not all(self.fixed_name(name, seen) for name in names):
                    return False
        return True

    def fixed_name(self, name: str, seen: frozenset[str]) -> bool:
        """A name the script never assigns (the process's environment, but
        bash's own changing ones), or assigns only fixed words."""
        if name == "$":
            return True  # this shell's pid
        if name in seen or not IDENTIFIER.fullmatch(name) or name in _CHANGING:
            return False
        if name in self.tainted:
            return True  # a value: judged where it flows
        definitions = self.definitions.get(name)
        if not definitions:
            return True  # the process's environment
        for node, kind in definitions:
            if kind == "for":  # for f in a b{1,2}: over fixed words, no glob
                values = [c for c in node.children if self.tree.field(c) == "value"]
                has_in = any(c.type == "in" for c in node.children)
                if not has_in or any(
                    self.tree.static(v) is None
                    and (
                        not self.fixed_text(v, seen | {name})
                        or any(g in self.text(v) for g in "*?[")
                    )
                    for v in values
                ):
                    return False
                continue
            if kind != "assign" or any(c.type == "+=" for c in node.children):
                return False
            target = node.child_by_field_name("name")
            if target is not None and target.type == "subscript":
                return False
            value = node.child_by_field_name("value")
            if value is not None and not self.fixed_text(value, seen | {name}):
                return False
        return True

    def written_names(self) -> set[str | None]:
        """The last names of the files this script's redirects and file
        utilities write (None: one not fixed before it runs)."""
        found: set[str | None] = set()
        for node in self.tree.nodes:
            if node.type == "file_redirect":
                operator = next((self.text(c) for c in node.children if not c.is_named), "")
                destination = node.child_by_field_name("destination")
                if operator in _WRITING_REDIRECTS | {"<>"} and destination is not None:
                    text = self.fixed(destination)
                    found.add(None if text is None else base_name(text))
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is not None and resolved.name in FILE_WRITERS:
                for word in resolved.arguments:
                    text = self.fixed(word)
                    if text is None or not text.startswith("-"):
                        found.add(None if text is None else base_name(text.split("=", 1)[-1]))
        return found

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
            elif name not in BUILTINS and (launches := list(self.launchable(resolved))):
                # find -exec sh, sort --compress-program=sh, debconf sh: a shell
                # another program starts, whatever starts it first (find -exec
                # env sh), is a shell beside the values too (the thirteenth
                # review); in strict mode, an executor not named too
                shells = [(word, base) for word, base in launches if is_interpreter(base)]
                named = self.consumers or frozenset()
                others = [(word, base) for word, base in launches if base not in named]
                if shells:
                    word = shells[0][0]
                    self.refuse("interpreter", word, f"{name} starts {self.text(word)[:40]}")
                elif self.consumers is not None and others:
                    word = others[0][0]
                    self.refuse(
                        "executor", word, f"{name} starts {self.text(word)[:40]}, not in consumers:"
                    )
            elif name not in BUILTINS and (option := self.running_option(resolved)) is not None:
                # tar --checkpoint-action=exec=CODE runs sh -c CODE with no
                # shell word (review 16): a program's code-running option
                # runs nowhere in a script with values, named or not
                self.refuse("executor", option, f"{name} {self.text(option)[:40]}")
            elif is_executor(name) and name not in (self.consumers or ()):
                # xargs -a <(ls) env reads a value a file name holds without
                # receiving it; gcc -wrapper, git -c core.pager=..., make -f,
                # zip -TT run code from short options and configuration no
                # list of options keeps up with (review 16): an executor runs
                # beside values only when named in consumers:, in either mode
                self.refuse("executor", resolved.name_node, f"{name}, not named in consumers:")

    #: Node types through which a word's text is only known at run time.
    _EXPANSIONS = frozenset(
        {"simple_expansion", "expansion", "command_substitution", "process_substitution"}
    )

    def makers_with_unread_names(self) -> None:
        """A program that makes files (``cp``, ``mv``, ``ln``...) may not, in a
        script with values, make them under names the checker cannot read:
        a backup (``cp -b -S c x w`` renames the old ``w`` to ``wc``), or a
        word bash expands (``{wc,}``, ``~+/wc``, ``w{c..c}``, a glob such
        as ``/bin/b?sh`` that copies a shell); the fifteenth review ran a
        copy of bash under a consumer's name each way."""
        self.index = None
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name not in self._MAKERS:
                continue
            for word in resolved.arguments:
                text = self.tree.static(word)
                if text is not None and _backs_up(text, resolved.name):
                    self.refuse(
                        "file-flow", word, f"{resolved.name} {text[:20]}: a backup names a file"
                    )
                elif (
                    text is None
                    and not self.carries(word)
                    and not any(node.type in self._EXPANSIONS for node in self.tree.subtree(word))
                ):
                    self.refuse(
                        "file-flow",
                        word,
                        f"{resolved.name} {self.text(word)[:30]}: names bash expands "
                        "(copy them in a step without values, or name each file)",
                    )

    def running_option(self, resolved: Any) -> Any:
        """The first word of ``resolved`` that is a long option making it run
        another program (``RUNNING_OPTIONS``; find's ``-exec`` family is
        judged by what it launches), or None."""
        for word in resolved.arguments:
            text = self.tree.static(word)
            if text and text.startswith("--") and is_running_option(text.split("=", 1)[0]):
                return word
        return None

    def strict_programs_only(self) -> None:
        self.index = None
        refused = [(f.line - 1, f.column - 1) for f in self.findings]
        functions = {
            self.text(n.child_by_field_name("name"))
            for n in self.tree.nodes
            if n.type == "function_definition" and n.child_by_field_name("name") is not None
        }
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None or resolved.name in BUILTINS:
                continue  # refused elsewhere (an unknown name), or a builtin: judged as a construct
            if resolved.name in functions:
                continue  # its definition is refused
            detail = self.unnamed(resolved.name, self.tree.static(resolved.name_node) or "")
            if detail and not self._refused_around(command, refused):
                self.refuse("strict-program", resolved.name_node, detail)

    def _refused_around(self, command: Any, refused: list[tuple[int, int]]) -> bool:
        """Was ``command``, or a command around it (``$(which ls) {{ x }}``),
        refused already?  One finding for it is enough."""
        node = command
        while node is not None:
            if node.type == "command":
                start, end = node.start_point, node.end_point
                if any(start <= at < end for at in refused):
                    return True
            node = self.tree.parent(node)
        return False

    def unnamed(self, name: str, spelled: str) -> str:
        """Why the program ``name`` (``spelled`` as the script calls it) may not
        run in a script with values, or "" when it may: a closed world in
        either mode (the seventeenth review ran ``dpkg-buildpackage
        --hook-init`` beside a value in the default mode, as the fourteenth
        had in strict mode)."""
        if name in (self.consumers or ()):
            return ""  # the author named it: by any path, as they call it
        if name not in STRICT_RECEIVERS | STRICT_PROGRAMS:
            return f"{name}, not in consumers:"
        if not system_spelling(spelled):  # ./bin/wc: whatever an earlier step put there
            return f"{spelled[:40]}: {name} by a path outside /bin and /usr/bin"
        return ""


def _names_dev_or_proc(text: str) -> bool:
    """Is ``text`` an absolute path whose first folder may be /dev or /proc?"""
    parts = [p for p in through_dev_links(text).split("/") if p not in ("", ".")]
    return (
        text.startswith("/")
        and bool(parts)
        and (component_may_be("dev", parts[0]) or component_may_be("proc", parts[0]))
    )


def _may_leave(path: str | None) -> bool:
    """May ``path`` (None: not fixed) lead out of the working folder: absolute,
    climbing with ``..``, or ``-`` (cd's last folder)?"""
    return path is None or path.startswith(("/", "~", "-")) or ".." in path.split("/")


#: The short options with which a maker names a file it derives from
#: another (a backup, a suffix): ``cp -b -S c x w`` renames ``w`` to
#: ``wc``, ``gzip -S c w`` writes ``wc``.  ``strip -S``, ``objcopy -S`` and
#: ``rsync -S`` (strip debug data, sparse files) name nothing.
_NAMING_SHORT_OPTIONS = {
    "cp": "bS",
    "mv": "bS",
    "ln": "bS",
    "install": "bS",
    "rsync": "b",
    "gzip": "S",
    "gunzip": "S",
    "xz": "S",
    "unxz": "S",
}


def _backs_up(option: str, program: str = "cp") -> bool:
    """Does ``option`` make ``program`` write a file under a derived name
    (``-b``, ``-fb``, ``--backup``, ``-S SUFFIX``, ``--suffix``)?"""
    if option.startswith("--"):
        return option.startswith(("--backup", "--suffix", "--su"))
    letters = _NAMING_SHORT_OPTIONS.get(program, "")
    return option.startswith("-") and any(letter in option[1:] for letter in letters)
