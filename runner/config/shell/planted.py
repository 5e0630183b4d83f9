"""After a value chose where a file lands, no program runs by a bare name.

``printf '%s' {{ body }} > {{ path }}; chmod 755 {{ path }}; wc -c f``:
when ``path`` names a directory on the step's ``PATH`` (the step's own
``env: PATH``, a relative entry such as ``node_modules/.bin``, a link the
script made to ``~/.cargo/bin``), ``wc`` runs the value (review 19's F1,
then the twentieth review's G3 past the render's check of the runner's own
PATH).  Only the sandbox knows its ``PATH`` and where a relative name
lands, so from the first write a value places (or the first write after a
``cd`` a value chose) to the end of the script, and through the loop that
holds it, a program must be a builtin or named by its path under the
system's directories (``/usr/bin/wc``), where no value may write.
"""

from __future__ import annotations

from typing import Any

from .rules import BUILTINS
from .state import CheckState
from .system_paths import names_system_path

#: Statements whose body runs again: a write in one comes before every command in it.
_LOOPS = frozenset({"for_statement", "c_style_for_statement", "while_statement"})
#: The builtins of dash and busybox sh (POSIX's special and regular ones they
#: have): under ``shell: sh``, ``time``, ``pushd`` or ``dirs`` are looked up
#: on PATH (the twenty-first review's H3).
_POSIX_BUILTINS = frozenset(
    {".", ":", "[", "alias", "bg", "break", "cd", "chdir", "command", "continue", "echo"}
    | {"eval", "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash", "jobs"}
    | {"kill", "local", "printf", "pwd", "read", "readonly", "return", "set", "shift"}
    | {"test", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "wait"}
)


#: Writers whose destination word is the written file's own name (a copier's
#: may be a directory the source's name goes into).
_NAMED_BY_DESTINATION = frozenset({"tee", "dd", "uniq", "chmod", "truncate"})


#: The parts of a word that may hold a value.
_VALUE_PARTS = frozenset(
    {"raw_string", "simple_expansion", "expansion", "command_substitution", "string"}
)


def _at_risk(name: str, risk: tuple[str, str]) -> bool:
    kind, text = risk
    base = name.rsplit("/", 1)[-1]
    if kind == "exact":
        return base == text
    if kind == "suffix":
        return base.endswith(text)
    return True


class PlantedNamesCheck(CheckState):
    """Bare program names after a write whose place a value chose."""

    def names_after_planting(self, plantings: list[Any]) -> None:
        """``plantings``: the words (or ``cd`` commands) in which a value
        chose where a file is written."""
        if not plantings:
            return
        start = min(self._scope_start(node) for node in plantings)
        if any(node.type in ("&", "process_substitution") for node in self.tree.nodes):
            # cmd & and <(cmd) run beside the write, whatever the order
            # (review 21's H2, review 22's I1)
            start = 0
        builtins = BUILTINS if self.dialect == "bash" else BUILTINS & _POSIX_BUILTINS
        writers = {self._command_of(node) for node in plantings}
        risks = [self._risk(node) for node in plantings]
        for command in self.commands:
            if command.start_byte < start or command.id in writers:
                continue
            named = command.child_by_field_name("name")
            names = [named] if named is not None else []
            resolved = self.resolve_quietly(command)
            if resolved is not None and resolved.name_node is not None:
                names.append(resolved.name_node)
            for node in dict.fromkeys(names):
                name = self.tree.static(node)
                if name is None or name in builtins:
                    continue  # a name known only at run time is refused elsewhere
                if name.startswith("/") and names_system_path(name):
                    continue
                if not any(_at_risk(name, risk) for risk in risks):
                    continue  # > {{ n }}.count plants no "touch"
                self.refuse("planted-name", node, name[:40], index=None)
                break

    def _risk(self, node: Any) -> tuple[str, str]:
        """Which names the file written at ``node`` may have: ("exact", B)
        when its last name is fixed (``{{ d }}/wc``, ``wc`` after ``cd``),
        ("suffix", T) when it ends in fixed text after the value
        (``{{ n }}.count``), ("any", "") otherwise, and always for a
        copier, whose file may take its source's name (``cp f {{ dir }}``)."""
        command = self.tree.parent(node)
        if command is not None and command.type == "command":
            resolved = self.resolve_quietly(command)
            if resolved is None or resolved.name not in _NAMED_BY_DESTINATION:
                return ("any", "")
        parts = [
            part
            for part in self.tree.subtree(node)
            if part.type in _VALUE_PARTS and self.carries(part)
        ]
        end = max((part.end_byte for part in parts), default=node.start_byte)
        tail = self.source[end : node.end_byte].decode("utf-8", "replace")
        tail = tail.replace('"', "").replace("'", "")
        if not parts:
            tail = self.tree.static(node) or ""
            if not tail or any(c in tail for c in "$*?[{`\\"):
                return ("any", "")
            return ("exact", tail.rstrip("/").rsplit("/", 1)[-1])
        if any(c in tail for c in "$*?[{`\\"):
            return ("any", "")
        if "/" in tail:
            return ("exact", tail.rstrip("/").rsplit("/", 1)[-1])
        return ("suffix", tail) if tail else ("any", "")

    def _scope_start(self, node: Any) -> int:
        """Where commands start to be at risk: the top-level statement that
        holds ``node``, or the outermost loop around it."""
        start = node.start_byte
        current = node
        while (parent := self.tree.parent(current)) is not None:
            if parent.type in _LOOPS or parent.type == "program":
                start = min(start, (current if parent.type == "program" else parent).start_byte)
            current = parent
        return start

    def _command_of(self, node: Any) -> int | None:
        """The command that writes at ``node`` (a redirect's belongs to the
        statement it redirects, whose commands all ran their lookup first)."""
        current = node
        while current is not None and current.type != "command":
            current = self.tree.parent(current)
        return current.id if current is not None else None
