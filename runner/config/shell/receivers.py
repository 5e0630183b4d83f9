"""Who receives a value, and the files a value reaches.

The end of pass 3 of ``checker``: a command that receives a value (through
its arguments, stdin, environment or a ``<( )``) must be allowed to (never
a shell, an interpreter or an executor; in strict mode only the consumers
and ``STRICT_RECEIVERS``), and may not launch a program named in its
words.  What it may write (its file arguments, its redirects) is recorded:
a later command that reads such a file receives the value too, and a
script that writes a value to a file runs no program that might read it
unnamed.  The whole-script refusals live here as well: no interpreter
beside a value, no executor with a value in its environment.  A class over
``CheckState`` (the module docstring of ``state`` says why).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from typing import Any

from .proc_paths import PROCESS_LISTERS, UNQUOTED, names_process_path
from .programs import RUNNING_OPTIONS, STREAM_FILTERS, STRICT_RECEIVERS, is_executor, is_interpreter
from .rules import BUILTINS, SAFE_BUILTINS, STDIN_BUILTINS
from .state import READING_REDIRECTS, CheckState, Command, Refused, base_name
from .tree import GLOB
from .variables import ALWAYS_TAINTED

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


class ReceiverCheck(CheckState):
    """The receivers of values, and the files values are written to."""

    #: Programs whose file arguments are files they write.
    _MAKERS = frozenset(
        {
            "cp",
            "mv",
            "ln",
            "install",
            "rsync",
            "dd",
            "tee",
            "sponge",
            "touch",
            # the twelfth review: `link /usr/bin/dash grep; ./grep -c VALUE`
            "link",
            "objcopy",
            "strip",
            "zstd",
            "unzstd",
            "gzip",
            "gunzip",
            "xz",
            "unxz",
            "bzip2",
            "bunzip2",
        }
    )

    def receiver(self, command: Any, resolved: Command, via: str) -> None:
        """``command`` (running ``resolved``) receives a value ``via`` its argv,
        stdin or environment: it must be allowed to."""
        key = command.id
        name = resolved.name
        if name is None:
            raise Refused("unknown-command", resolved.name_node)
        detail = f"{name}, {_VIA[via]}" if via != "argv" else name
        if key not in self.received:
            self.received.add(key)
            self.record_written_paths(command, resolved)
        for word in resolved.arguments:
            option = self.tree.static(word)
            if option is not None and is_running_option(option.split("=", 1)[0]):
                raise Refused("executor", word, f"{name} {option.split('=', 1)[0]}")
        if via in ("stdin", "<( )"):
            self.stdin_readers.setdefault(key, command)  # { m=$(cat); } <<< v: m holds it
        if via in ("stdin", "<( )") and name not in BUILTINS | STREAM_FILTERS:
            self.content_written = True  # it may write what it read to any file
        if via == "argv" and name in self._MAKERS | {"mkdir", "mkfifo", "mknod", "truncate"}:
            self.content_written = True  # touch {{ x }}: the value is a file name now
        elif via == "argv" and self.consumers is None and name not in BUILTINS | STREAM_FILTERS:
            # fallocate, sort -o, mktemp {{ x }}: any program may make a file
            # the value names (a later `tar *` reads the name as an option).
            self.content_written = True
            self.makers.add(key)  # judged as a receiver, not again as a reader
        elif via == "argv" and name not in BUILTINS | STREAM_FILTERS | STRICT_RECEIVERS:
            # In strict mode a consumer may make such a file too; it is no
            # executor, so only the globs are judged (the fuzzer's case:
            # strict mode accepted `argv {{ x }}; for i in a={{ x }}*`).
            self.value_named_file = True
        if self.consumers is not None:
            allowed = name in self.consumers or name in STRICT_RECEIVERS
            if name in STDIN_BUILTINS and via != "stdin":
                allowed = False
            if not allowed or is_interpreter(name):
                raise Refused("consumer", resolved.name_node, detail)
            launched = self.launched(resolved)  # xargs sh -c {{ x }}: sh was not named
            if launched is not None and name not in BUILTINS:
                raise Refused("wrapper", launched, f"{name} {self.text(launched)[:40]}")
            return
        if name in BUILTINS:
            if name in SAFE_BUILTINS or (via == "stdin" and name in STDIN_BUILTINS):
                return
            if name in STDIN_BUILTINS and via == "env":
                return
            raise Refused("evaluating-builtin", resolved.name_node, detail)
        if is_executor(name):
            raise Refused("executor", resolved.name_node, detail)
        if name in STRICT_RECEIVERS:
            return
        launched = self.launched(resolved)
        if launched is not None:
            raise Refused("wrapper", launched, f"{name} {self.text(launched)[:40]}")

    def launched(self, resolved: Command) -> Any:
        """The first word of ``resolved``'s arguments that names a program
        it may launch (``launchable``), or None."""
        return next((word for word, _ in self.launchable(resolved)), None)

    def launchable(self, resolved: Command) -> Iterator[tuple[Any, str]]:
        """Each word of ``resolved``'s arguments that names a program it may
        launch (``tini-static -s /usr/bin/xargs``, ``ld.so /bin/sh``), with
        that program's name: a shell or an interpreter anywhere, an executor
        as any word that is not an option (``debconf -f noninteractive
        flock``: an option's argument comes first, the thirteenth review),
        either also as an option's ``=`` value (``--compress-program=sh``)."""
        launch_next = resolved.name == "xargs"
        option_argument = False
        for word in resolved.arguments:
            text = self.tree.static(word)
            if text is None:
                if launch_next:
                    # find -exec /bin/b?sh, xargs "$BASH": a program named at
                    # run time may be a shell (the fifteenth review)
                    yield word, "sh"
                launch_next = False
                continue
            if resolved.name == "find":
                launch_next = text in _FIND_LAUNCHERS
            elif launch_next and not text.startswith("-"):
                launch_next = option_argument  # xargs -n 1 CMD: 1 is the option's
            option_argument = resolved.name == "xargs" and text in _XARGS_OPTIONS_WITH_ARGUMENT
            candidates = [text]
            if text.startswith("-") and "=" in text:
                candidates.append(text.split("=", 1)[1])
            for candidate in candidates:
                base = candidate.rsplit("/", 1)[-1]
                if is_interpreter(base) or (is_executor(base) and not candidate.startswith("-")):
                    yield word, base
                    break

    #: Programs that write what they receive to the files their arguments name.
    _COPIERS = frozenset(
        {"tee", "cp", "mv", "install", "ln", "dd", "sponge", "rsync", "sort", "uniq", "shuf", "xxd"}
    )

    def record_written_paths(self, command: Any, resolved: Command) -> None:
        """A command that receives a value may write it to any file it names
        (``sort -o f``, ``tee f``, ``cp x f``) or redirects to: a command that
        later runs such a file runs the value.  A copier's file that is not
        a literal word cannot be followed: refused.  (Builtins write only
        through redirects: ``read a b`` names variables.)"""
        # jq writes no file whatever its words (its -f file is read: code_operands)
        for word in resolved.arguments if resolved.name not in BUILTINS | {"jq"} else ():
            if self.carries(word):
                # tee "$HOME"/{{ x }}: a value names the file a copier writes,
                # which may be ~/.jq, loaded into every jq program (review 38's
                # F1); the render checks the path, no jq runs beside it
                self.value_chose_a_copy |= resolved.name in self._COPIERS
                continue
            path = self.tree.static(word)
            if path is None:
                if resolved.name in self._COPIERS:
                    raise Refused("file-flow", word, "a file named at run time")
                continue
            path = path.split("=", 1)[-1]  # dd of=f, --output=f
            if path and not path.startswith("-"):
                self.tainted_paths.add(_device(path) or base_name(path))
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
                if path is None or GLOB.search(path):
                    raise Refused("file-flow", destination, "a file named at run time")
                self.tainted_paths.add(_device(path) or base_name(path))
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
        # $(< /dev/stdin), $(< /proc/$$/cmdline): review 11
        readers += self.substitutions_reading(self.reads_process_text)
        process_names = self.process_path_names()
        for command in self.commands:  # the script's own text, values and all
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None:
                continue
            if resolved.name in ("cd", "pushd") and any(
                self.names_process_text(w, process_names) for w in resolved.arguments
            ):  # cd /proc/$$; tr ... < cmdline: every relative path may be one
                self.refuse("file-flow", command, "cd into /proc or /dev/fd", index=None)
            if resolved.name.split(".", 1)[0] in PROCESS_LISTERS or any(
                self.names_process_text(w, process_names) for w in resolved.arguments
            ):
                readers.append(command)
                continue
            if self.stdin_from(command, self.reads_process_text):
                readers.append(command)
        if not self.tainted_paths:
            return readers
        readers += self.substitutions_reading(self.reads_tainted_path)  # $(< f): bash prints f
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name_node is None:
                continue
            name_text = self.tree.static(resolved.name_node)
            if name_text is not None and base_name(name_text) in self.tainted_paths:
                self.refuse("file-flow", resolved.name_node, name_text[:40], index=None)
                continue
            reads = any(self.names_tainted_path(w) for w in resolved.arguments)
            if (reads or self.stdin_from(command, self.reads_tainted_path)) and resolved.name:
                readers.append(command)
        return readers

    def substitutions_reading(self, reads: Callable[[Any], bool]) -> list[Any]:
        """The ``$(< f)`` redirects whose file ``reads`` says may hold a value."""
        return [
            redirect
            for node in self.tree.nodes
            if node.type == "command_substitution"
            for redirect in node.named_children
            if redirect.type == "file_redirect" and reads(redirect)
        ]

    def stdin_from(self, command: Any, reads: Callable[[Any], bool]) -> bool:
        """Does ``command`` read its stdin from a redirect ``reads`` accepts, on
        any enclosing statement (``{ m=$(cat); } < f``), unless a pipe feeds it?"""
        node = command
        while self.tree.parent(node) is not None:
            parent = self.tree.parent(node)
            if parent.type == "pipeline" and parent.named_children[0].id != node.id:
                return False  # a later stage reads the pipe
            node = parent
            if node.type == "redirected_statement" and any(
                r.type == "file_redirect" and reads(r) for r in node.children
            ):
                return True
        return False

    def process_path_names(self, naming: Callable[[str], bool] = names_process_path) -> set[str]:
        """Variables the script sets (or loops ``for`` over) to a text naming
        /proc or /dev/fd, as ``naming`` judges a text (``p=/proc; cat
        "$p/$$/cmdline"``, the twelfth review)."""
        names = set()
        for node in self.tree.nodes:
            if node.type == "variable_assignment":
                pairs = [(self.assigned_name(node), node.child_by_field_name("value"))]
            elif node.type == "for_statement":
                variable = node.child_by_field_name("variable")
                name = self.text(variable) if variable is not None else None
                pairs = [(name, value) for value in node.children_by_field_name("value")]
            else:
                continue
            for name, value in pairs:
                if (
                    name
                    and value is not None
                    and naming(self.tree.static(value) or UNQUOTED.sub("", self.text(value)))
                ):
                    names.add(name)
        return names

    def names_process_text(self, word: Any, process_names: set[str]) -> bool:
        """Does ``word`` name a path under /proc or /dev/fd (after quote
        removal, or through a variable set to one)?"""
        text = self.tree.static(word) or UNQUOTED.sub("", self.text(word))
        if names_process_path(text, strict=self.consumers is not None):
            return True
        return any(
            node.type in ("simple_expansion", "expansion")
            and self.expanded_name(node) in process_names
            for node in self.tree.subtree(word)
        )

    def reads_process_text(self, redirect: Any) -> bool:
        """Is ``redirect`` a ``<`` from a stream or file that may hold a value
        without the checker knowing: ``/dev/stdin``, ``/dev/fd/N``, anything
        in ``/proc`` (``/proc/$$/cmdline`` holds the script, values and all),
        or a path not fixed before the script runs?"""
        operator = next((self.text(c) for c in redirect.children if not c.is_named), "")
        destination = redirect.child_by_field_name("destination")
        if operator not in READING_REDIRECTS or destination is None:
            return False
        text = self.tree.static(destination)
        return text is None or names_process_path(text, strict=self.consumers is not None)

    def reads_tainted_path(self, redirect: Any) -> bool:
        """Is ``redirect`` a ``<`` (or ``<>``) from a file a value was written to?"""
        operator = next((self.text(c) for c in redirect.children if not c.is_named), "")
        destination = redirect.child_by_field_name("destination")
        return (
            operator in READING_REDIRECTS
            and destination is not None
            and self.names_tainted_path(destination)
        )

    def glob_before_operands(self, resolved: Command) -> Any:
        """The first argument of ``resolved`` bash may glob into file names
        before a ``--`` ends its options, or None."""
        for word in resolved.arguments:
            text = self.tree.static(word)
            if text == "--":
                return None
            if self.globs(word) and not self.text(word).startswith(("./", "/")):
                return word  # ./* names start with ./: never an option
        return None

    def globs(self, word: Any) -> bool:
        """Does bash expand ``word`` into file names (an unquoted ``*``, ``?``, ``[``)?"""
        if word.type == "word":
            return GLOB.search(self.text(word)) is not None
        if word.type == "concatenation":
            return any(self.globs(part) for part in word.named_children)
        return False

    def names_tainted_path(self, word: Any) -> bool:
        """Does ``word`` name a file a value was written to?  Compared by base
        name (``./f.sh``, ``f.sh`` and ``/tmp/f.sh`` alike): the working
        directory is not known before the script runs."""
        text = self.tree.static(word)
        if text is None or GLOB.search(text):
            return True  # "$f", s.s[h]: it may name one
        return base_name(text.split("=", 1)[-1]) in self.tainted_paths

    def environment_readers(self) -> None:
        """Every program the script runs gets its environment: where a variable
        of it may hold a value (a templated step ``env:``, an ``export`` of a
        tainted variable, a ``NAME=value cmd`` prefix), no program that runs
        code may run anywhere in the script (in strict mode: unless it is a
        consumer), however its code would name the variable."""
        # cd {{ x }}: bash exports the PWD it inherited, and OLDPWD, like a cwd;
        # TMPDIR={{ x }}: a name the sandbox may export already (the tenth
        # review: TMPDIR, TERM, a step's env: name) is exported once assigned.
        exported = set(self.env_tainted) | (self.tainted.keys() & {"PWD", "OLDPWD"})
        exported |= {
            name
            for name in self.tainted
            if name not in ALWAYS_TAINTED and (may_be_exported(name) or name in self.env_names)
        }
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
        if self.tainted.keys() - ALWAYS_TAINTED or exported:
            for command in self.commands:  # v=$(printenv X), $(declare -p): they print values
                resolved = self.resolve_quietly(command)
                if resolved is not None and self.prints_variables(resolved, bool(exported)):
                    self.stdin_readers.setdefault(command.id, command)
            for node in self.tree.nodes:  # a bare declare, export, readonly, local (review 11)
                if node.type == "declaration_command" and self.declaration_prints(node):
                    self.stdin_readers.setdefault(node.id, node)
        if not exported:
            return
        shown = ", ".join(f"${name}" for name in sorted(exported))
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None:
                continue
            if self.consumers is not None and resolved.name not in BUILTINS:
                # strict mode: no program but a consumer gets a value, its
                # environment included (dbus-send with DBUS_SESSION_BUS_ADDRESS)
                if resolved.name in STRICT_RECEIVERS:
                    continue
                if resolved.name not in self.consumers or is_interpreter(resolved.name):
                    self.refuse(
                        "consumer",
                        resolved.name_node,
                        f"{resolved.name} runs with a value in its environment ({shown})",
                        index=None,
                    )
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

    #: Builtins that print variables (with ``-p`` or no words at all).
    _VARIABLE_PRINTERS = frozenset({"set", "declare", "typeset", "export", "readonly", "local"})

    def prints_variables(self, resolved: Command, exported: bool) -> bool:
        """Does ``resolved`` print variables a value may be in: ``printenv``
        and ``env`` with no command (the environment, when a value is
        exported), ``declare -p``, ``set`` and their kin (any variable)?"""
        words = [self.tree.static(w) for w in resolved.arguments]
        if resolved.name in ("printenv", "env"):
            if not exported:
                return False
            if resolved.name == "printenv":
                return True
            return all(w is not None and (w.startswith("-") or "=" in w) for w in words)
        return resolved.name in self._VARIABLE_PRINTERS and _prints(words)

    def declaration_prints(self, node: Any) -> bool:
        """Does ``declare``/``export``/... (a declaration, to tree-sitter) print
        variables: no words after it, or a ``-p``?"""
        return _prints([self.tree.static(c) for c in node.children[1:]])


#: xargs's options whose argument is the next word.
_XARGS_OPTIONS_WITH_ARGUMENT = frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"})
#: find's actions whose next word is the program they run.
_FIND_LAUNCHERS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _prints(words: list[str | None]) -> bool:
    """A declaration builtin's words that make it print variables: none, or ``-p``."""
    return not words or any(w is not None and w[:1] == "-" and "p" in w[1:] for w in words)


def may_be_exported(name: str) -> bool:
    """Might the sandbox export ``name`` before the script runs?  Environment
    variables are upper case by convention (``TMPDIR``, ``TERM``, a step's
    ``env:``), besides the proxy settings; an image that exports another
    lower-case name is outside what the checker sees (SECURITY.md says so)."""
    return name != name.lower() or name in _LOWER_CASE_ENVIRONMENT


_LOWER_CASE_ENVIRONMENT = frozenset(
    {"http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy"}
)


def _device(path: str) -> str | None:
    """``path`` if it is one of ``_DEVICES`` once normalized (``/dev/../x`` is not)."""
    normal = posixpath.normpath(path) if path.startswith("/") else path
    return normal if normal in _DEVICES else None


def is_running_option(option: str) -> bool:
    """One of ``RUNNING_OPTIONS``, or a GNU abbreviation of a long one
    (``--strip-prog`` is ``--strip-program`` to getopt_long)."""
    if option in RUNNING_OPTIONS:
        return True
    return (
        option.startswith("--")
        and len(option) > 2
        and any(o.startswith(option) for o in RUNNING_OPTIONS if o.startswith("--"))
    )
