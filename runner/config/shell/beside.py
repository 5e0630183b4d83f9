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
- in strict mode (``consumers:``), a closed world: no program but the
  consumers, ``STRICT_RECEIVERS`` and ``STRICT_PROGRAMS`` (data programs
  with no option that runs anything, by name or from /bin, /usr/bin;
  ``strict_programs_only``).  The fourteenth review ran the script's own
  text, read back with ``ps``, from ``dpkg-buildpackage --hook-init='...'``:
  no checker can know every program's options, so strict mode does not try.
  The default mode stays an open world; SECURITY.md says so.
"""

from __future__ import annotations

from .programs import STRICT_PROGRAMS, STRICT_RECEIVERS, is_executor, is_interpreter
from .receivers import ReceiverCheck
from .rules import BUILTINS

#: Where a data program may be run from by path: the system's own directories
#: (``./bin/wc`` is whatever an earlier step put there, not wc).
_SYSTEM_DIRECTORIES = ("/bin", "/usr/bin")


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
            elif self.content_written and name not in STRICT_RECEIVERS:
                # touch -- {{ x }}; sort *: the glob may expand to a file name a
                # value chose, read as an option (--compress-program=sh, the
                # thirteenth review); after --, names are only operands
                option_glob = self.glob_before_operands(resolved)
                if option_glob is not None:
                    self.refuse(
                        "file-flow",
                        option_glob,
                        f"{name} {self.text(option_glob)[:30]}: a file name a value chose "
                        "may expand here as an option (put -- before it)",
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
            elif self.consumers is not None and is_executor(name) and name not in self.consumers:
                # strict mode is a closed world: xargs -a <(ls) env reads a value
                # a file name holds without receiving it
                self.refuse("executor", resolved.name_node, f"{name}, not named in consumers:")

    def strict_programs_only(self) -> None:
        if self.consumers is None:
            return
        self.index = None
        refused = {(f.line, f.column) for f in self.findings}
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name is None or resolved.name in BUILTINS:
                continue  # refused elsewhere (an unknown name), or a builtin: judged as a construct
            detail = self.unnamed(resolved.name, self.tree.static(resolved.name_node) or "")
            row, column = resolved.name_node.start_point
            if detail and (row + 1, column + 1) not in refused:
                self.refuse("strict-program", resolved.name_node, detail)

    def unnamed(self, name: str, spelled: str) -> str:
        """Why the program ``name`` (``spelled`` as the script calls it) may not
        run in a strict-mode script with values, or "" when it may."""
        if name in (self.consumers or ()):
            return ""  # the author named it: by any path, as they call it
        if name not in STRICT_RECEIVERS | STRICT_PROGRAMS:
            return f"{name}, not in consumers:"
        directory = spelled.rpartition("/")[0] if "/" in spelled else None
        if directory is not None and directory not in _SYSTEM_DIRECTORIES:
            return f"{spelled[:40]}: {name} by a path outside /bin and /usr/bin"
        return ""
