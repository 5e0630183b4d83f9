"""Where a script with values may write: not where the system finds code.

A file the system reads before every program (``/etc/ld.so.preload``,
``/etc/nsswitch.conf`` and an NSS module, ``/proc/sys/kernel/core_pattern``)
runs code in every later command, values or not; the sixteenth review ran
a value that way through each.  So in a script that holds a value, no
write (a redirect, a file utility's destination, a link's target) may name
a path under the system's directories (``system_paths``), spelled any way
bash would expand it, through a variable the script sets, or relative
after a ``cd`` that may have moved there: a ``cd`` into a system directory
or ``/``, or a ``..`` that climbs above ``/``'s first level (the workspace
may be ``/workspace``), is refused.  A value that names a file may still
name any file the step's user can write: that is the author's choice and
the sandbox's containment (SECURITY.md says so).
"""

from __future__ import annotations

import itertools
import posixpath
from typing import Any

from .held_text import HeldTextCheck
from .planted import PlantedNamesCheck
from .proc_paths import EXPANSION, UNQUOTED, through_dev_links
from .programs import FILE_WRITERS
from .receivers import ReceiverCheck
from .rules import BUILTINS
from .system_paths import (
    DESTINATION_ENV,
    destination_path,
    names_program_place,
    names_system_path,
)

#: Redirect operators that write their target.
_WRITING = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
#: Writers every operand of which names a file they change (a move, a link
#: into a system file, a removal, a mode).
_EVERY_OPERAND = frozenset(
    {"tee", "touch", "mktemp", "ln", "link", "mv", "rm", "rmdir", "mkdir", "truncate"}
    | {"chmod", "chown", "chgrp"}
)
#: Writers that leave no content and no mode a program could run.
_EMPTY_OR_REMOVED = frozenset(
    {"touch", "mkdir", "rm", "rmdir", "chown", "chgrp", "truncate", "mktemp"}
)
#: Statements whose body runs again and again: a ``cd ..`` in one climbs each time.
_LOOPS = frozenset({"for_statement", "c_style_for_statement", "while_statement"})
#: Directory depth below ``/`` assumed where the script starts, or after a
#: ``cd`` to a place known only at run time: the workspace may be ``/workspace``.
_START_DEPTH = 1


class SystemWritesCheck(ReceiverCheck, HeldTextCheck, PlantedNamesCheck):
    """Writes and ``cd`` in a script that holds a value, judged against ``/``."""

    def system_files_written(self) -> None:
        self.index = None
        assigned = self._assigned_texts()
        depth = _START_DEPTH
        self._note_value_reads()
        for name in DESTINATION_ENV & set(self.tainted):
            for node, kind in self.definitions.get(name, []):
                if kind != "assign":  # read -r TMPDIR <<< {{ d }} (review 21's H4)
                    self.refuse("computed-path", node, f"{name}: where programs write")
        plantings: list[Any] = []
        moved_by_value = False
        places = sorted(self._places(), key=lambda n: n.start_byte)
        # a fixed cd into a program place matters only where something is written
        self.writes_content = any(n.type != "command" and self._may_plant(n) for n in places)
        for node in places:
            self._note_value_destinations(node)
            if node.type == "command":
                depth = self._moved(node, depth, assigned)
                moved_by_value = moved_by_value or self.carries(node)
                continue
            if (moved_by_value or self.carries(node)) and self._may_plant(node):
                plantings.append(node)
            for spelled in self._spellings(node, assigned):
                text = destination_path(spelled)
                if self._may_plant(node) and names_program_place(text):
                    # ln -s ~/.cargo/bin t; > t/{{ n }} or >> ~/.bashrc (review 23's J3)
                    self.refuse(
                        "file-flow",
                        node,
                        f"{_shown(text)[:40]}: where programs or their start-up files "
                        "are found (write there in a step without values)",
                    )
                    break
                if text.startswith("~") and ".." in text.split("/"):
                    self.refuse("file-flow", node, f"{text[:40]}: may climb from a home to /")
                    break
                if names_system_path(text):
                    self.refuse(
                        "file-flow",
                        node,
                        f"{_shown(text)[:40]}: the system runs what is written there",
                    )
                    break
                if not text.startswith("/") and _reaches_system(text, depth):
                    self.refuse(
                        "file-flow", node, f"{text[:40]}: may climb out of the workspace to /etc..."
                    )
                    break
        self.names_after_planting(plantings)

    def _note_option_words(self, arguments: list[Any]) -> None:
        """The arguments before ``--`` that may start with a value: the
        program reads one that starts with ``-`` as an option (``grep -rn
        {{ q }} .`` with ``-ohe.`` printed a secret file one character a
        line), so the render checks the word, value in.  Text before the
        value that may be empty (``""{{ q }}``, ``"$e"{{ q }}``) does not
        change that; an option the value is glued to without ``=``
        (``-rn{{ q }}``, ``--re{{ q }}``) lets the value add options of its
        own and is refused here (review 49's G1 and G3)."""
        for word in arguments:
            if self.tree.static(word) == "--":
                return
            before = self._text_before_value(word)
            if before is None:
                continue  # no value in this word
            known = list(itertools.takewhile(lambda part: part is not None, before))
            lead = "".join(p for p in known if p is not None)
            if lead and not lead.startswith("-"):
                continue  # fixed text that is no option starts the word: x{{ v }}
            if len(known) < len(before):  # text known only at run time, first or after -...
                if not (lead.startswith("-") and "=" in lead):
                    self.refuse("glued-option", word, self.text(word)[:40])
                continue
            if lead:
                if "=" not in lead:  # -rn{{ v }}, --re{{ v }}; --opt={{ v }} stays
                    self.refuse("glued-option", word, self.text(word)[:40])
                continue
            name = self.sole_variable(word)
            held = self.held(name) if name is not None else None
            if held is not None and held.kind == "part":
                self.value_option_sources.update(held.texts)  # read -r q <<< {{ x }}; grep "$q"
            self.value_option_words.update(self.word_texts(word) or [])

    def _text_before_value(self, word: Any) -> list[str | None] | None:
        """The parts of ``word`` before its first value, each as bash reads
        it (quotes removed) or None for text known only at run time; None
        when the word holds no value."""
        parts: list[str | None] = []

        def reaches_value(node: Any) -> bool:
            if self.sentinel_index(node) is not None or (
                node.type in ("simple_expansion", "expansion") and self.carries(node)
            ):
                return True
            if node.type in ("concatenation", "string"):
                return any(reaches_value(c) for c in node.children if c.type != '"')
            if node.type == "string_content":
                parts.append(self.text(node))
            elif node.type in ("simple_expansion", "expansion"):
                # d=/; "$d"{{ p }}: a variable of one fixed text is that text
                name = self.sole_variable(node)
                held = self.held(name) if name is not None else None
                exact = held is not None and held.kind == "exact" and len(held.texts) == 1
                spelled = held.texts[0] if exact and held is not None else None
                parts.append(None if spelled is None else UNQUOTED.sub("", spelled))
            else:
                parts.append(self.tree.static(node))
            return False

        return parts if reaches_value(word) else None

    def _may_plant(self, node: Any) -> bool:
        """Does the write at ``node`` put content or a mode in a file (a
        redirect, ``cp``, ``ln``, ``tee``, ``chmod``...), not only make an
        empty one, a directory, or remove one (``touch``, ``mkdir``, ``rm``)?"""
        command = self.tree.parent(node)
        if command is None or command.type == "variable_assignment":
            return False  # TMPDIR={{ d }}: where mktemp makes empty files
        if command.type == "file_redirect":
            return True
        resolved = self.resolve_quietly(command) if command.type == "command" else None
        return resolved is None or resolved.name not in _EMPTY_OR_REMOVED

    def _note_value_destinations(self, node: Any) -> None:
        """The words that hold a value and choose where a write lands or where
        ``cd`` goes (``> /{{ path }}``, ``cd -- {{ d }}``): only the render
        knows their text, so it checks the whole word, value and all
        (``templates``), against the same system directories.  A variable
        that holds a value stands for each text it may hold (``held_text``);
        one whose text is computed at run time is refused here."""
        words = [node]
        if node.type == "command":
            resolved = self.resolve_quietly(node)
            words = list(resolved.arguments) if resolved is not None else []
        for word in words:
            if not self.carries(word):
                continue
            texts = self.word_texts(word)
            if texts is None:
                self.refuse("computed-path", word, self.text(word)[:40])
                return
            self.value_destinations.update(texts)

    def _note_value_reads(self) -> None:
        """The words holding a value that a program or the shell may open:
        a redirect's target, any argument of a program that is not a
        builtin.  ``od -c {{ path }}`` with ``/proc/self/environ`` printed a
        step's secret in a form the scrubber does not know (the nineteenth
        review); only the render knows the text.  Through a variable, each
        text it may hold is checked, or the text ``read`` cut it from; a
        variable whose text is computed at run time (``$( )``, a pipe into
        ``read``) may not be such a word at all."""
        words = []
        for node in self.tree.nodes:
            if node.type == "file_redirect":
                destination = node.child_by_field_name("destination")
                if destination is not None:
                    words.append(destination)
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is not None and resolved.name not in BUILTINS:
                words += list(resolved.arguments)
                self._note_option_words(resolved.arguments)
        for word in words:
            if not self.carries(word) or word.type == "process_substitution":
                continue  # <(cmd {{ x }}): bash names the pipe; what reads it is judged
            name = self.sole_variable(word)
            held = self.held(name) if name is not None else None
            if held is not None and held.kind == "part":
                self.value_read_sources.update(held.texts)
                continue
            texts = self.word_texts(word)
            if texts is None:
                self.refuse("computed-path", word, self.text(word)[:40])
                continue
            self.value_reads.update(texts)

    def _places(self) -> list[Any]:
        """The ``cd``/``pushd``/``popd`` commands, the words that name a
        file a command writes, and what is assigned to a variable that names
        where programs write (``TMPDIR``, ``XDG_*_HOME``: ``DESTINATION_ENV``)."""
        places: list[Any] = []
        for node in self.tree.nodes:
            if node.type == "variable_assignment" and self.assigned_name(node) in DESTINATION_ENV:
                # TMPDIR={{ d }} mktemp: where programs write (the twentieth review's G4)
                value = node.child_by_field_name("value")
                if value is not None:
                    places.append(value)
            elif node.type == "file_redirect":
                operator = next((self.text(c) for c in node.children if not c.is_named), "")
                destination = node.child_by_field_name("destination")
                if operator in _WRITING and destination is not None:
                    places.append(destination)
        for command in self.commands:
            resolved = self.resolve_quietly(command)
            if resolved is None:
                continue
            if resolved.name in ("cd", "pushd", "popd"):
                places.append(command)
            elif resolved.name in FILE_WRITERS:
                places += self._destinations(resolved)
        return places

    def _moved(self, command: Any, depth: int, assigned: dict[str, list[str]]) -> int:
        """The depth below ``/`` after ``command`` (a ``cd``), refusing one
        that may land in a system directory, in ``/``, or climb in a loop."""
        resolved = self.resolve_quietly(command)
        assert resolved is not None
        operands = [w for w in resolved.arguments if (self.tree.static(w) or "x")[0] not in "-+"]
        if resolved.name == "popd" or not operands:
            return _START_DEPTH  # $HOME or where it was: at least one level down
        word = operands[0]
        if self.carries(word):
            return _START_DEPTH  # a value names the directory: the author's choice
        for text in self._spellings(word, assigned):
            if self.writes_content and names_program_place(text):
                # cd ~/.cargo/bin && printf ... > {{ name }} or > wc (reviews 23's
                # J3, 24's K1): a relative write there lands among programs
                self.refuse("file-flow", command, f"cd {text[:40]}: where programs are found")
                return _START_DEPTH
            if text.startswith("~") and ".." in text.split("/"):
                self.refuse("file-flow", command, f"cd {text[:40]}: may climb from a home to /")
                return _START_DEPTH
            if text.startswith("/"):
                if names_system_path(text):
                    self.refuse(
                        "file-flow", command, f"cd {text[:40]}: into the system's directories"
                    )
                    return _START_DEPTH
                if "$" not in text:
                    depth = len([p for p in text.split("/") if p not in ("", ".")])
                    continue
                return _START_DEPTH
            climb = _climb(text)
            if climb and (climb >= depth or self._in_loop(command)):
                self.refuse("file-flow", command, f"cd {text[:40]}: may climb out to /")
                return _START_DEPTH
            if "$" in text or text.startswith("~"):
                return _START_DEPTH
            parts = text.split("/")
            # net, not the lowest point: cd a/../b goes one level down
            depth += len([p for p in parts if p not in ("", ".", "..")]) - parts.count("..")
        return max(depth, _START_DEPTH)

    def _in_loop(self, node: Any) -> bool:
        parent = self.tree.parent(node)
        while parent is not None:
            if parent.type in _LOOPS:
                return True
            parent = self.tree.parent(parent)
        return False

    def _assigned_texts(self) -> dict[str, list[str]]:
        """Each variable the script assigns, with the texts it assigns it
        (quotes removed): ``d=/etc; > "$d/ld.so.preload"`` writes /etc."""
        assigned: dict[str, list[str]] = {}
        for node in self.tree.nodes:
            if node.type == "variable_assignment":
                name, value = self.assigned_name(node), node.child_by_field_name("value")
                if name and value is not None:
                    text = self.tree.static(value) or UNQUOTED.sub("", self.text(value))
                    assigned.setdefault(name, []).append(text)
        return assigned

    def _spellings(self, word: Any, assigned: dict[str, list[str]]) -> list[str]:
        """The texts ``word`` may stand for: quotes removed, each variable the
        script assigns replaced by each text it is given (a few at most);
        any other expansion is left for ``system_paths`` to read as any text."""
        text = self.tree.static(word)
        if text is not None:
            return [text]
        text = UNQUOTED.sub("", self.text(word))
        names = [n for n in dict.fromkeys(_names(text)) if n in assigned][:3]
        if not names:
            return [text]
        spellings = []
        for choice in itertools.islice(itertools.product(*(assigned[n][:4] for n in names)), 64):
            spelled = text
            for name, value in zip(names, choice, strict=True):
                spelled = spelled.replace("${" + name + "}", value).replace("$" + name, value)
            spellings.append(spelled)
        return spellings

    def _destinations(self, resolved: Any) -> list[Any]:
        """The words of a writer that name what it writes: a copier's last
        operand and its ``-t`` directory, a link's target too, ``dd``'s
        ``of=``, every operand of ``tee`` and ``touch``, ``uniq``'s output,
        ``mktemp``'s template and ``-p`` directory."""
        words = list(resolved.arguments)
        # a word known only at run time ("$d/x") counts by its spelling: it
        # was an option only if it is spelled as one (cp a "$d/x" writes $d)
        statics = [
            text
            if (text := self.tree.static(word)) is not None
            else UNQUOTED.sub("", self.text(word))
            for word in words
        ]
        if resolved.name == "dd":
            return [w for w, t in zip(words, statics, strict=True) if t and t.startswith("of=")]
        operands = [
            w for w, t in zip(words, statics, strict=True) if not (t or "-").startswith("-")
        ]
        links = resolved.name == "cp" and any(t and _links(t) for t in statics)
        if resolved.name in _EVERY_OPERAND or links:
            # ln -s /etc e; cp -s /etc/nsswitch.conf c; echo x > e/ld.so.preload:
            # a link to a system file is a way into it, so every operand counts
            after = [words[i + 1] for i, t in enumerate(statics[:-1]) if t in ("-p", "--tmpdir")]
            return operands + after
        if resolved.name == "uniq":
            return operands[1:2]
        targets = [
            words[i + 1]
            for i, t in enumerate(statics[:-1])
            if t == "-t" or (t and len(t) > 3 and "--target-directory".startswith(t))
        ]
        targets += [
            w
            for w, t in zip(words, statics, strict=True)
            if t and (t[:2] == "-t" != t or (t.startswith("--") and "=" in t))
        ]
        return targets + operands[-1:]


def _shown(path: str) -> str:
    """``path`` as the message shows it: ``//etc/./x`` as ``/etc/x``,
    ``/dev/fd/../root/etc/x`` as ``/proc/self/root/etc/x``."""
    path = through_dev_links(path)
    if path.startswith("/") and not any(c in path for c in "$*?[{"):
        return "/" + posixpath.normpath(path).lstrip("/")
    return path


def _names(text: str) -> list[str]:
    return [m.group(0).strip("${}") for m in EXPANSION.finditer(text)]


def _climb(text: str) -> int:
    """How many directories the relative path ``text`` climbs above where it
    starts, at its highest point."""
    depth = lowest = 0
    for part in text.split("/"):
        if part == "..":
            depth -= 1
            lowest = min(lowest, depth)
        elif part not in ("", "."):
            depth += 1
    return -lowest


def _reaches_system(text: str, depth: int) -> bool:
    """Does the relative path ``text``, from ``depth`` levels below ``/``,
    climb to ``/`` and go on into a system directory (``../etc/x`` from
    ``/workspace``)?"""
    parts = text.split("/")
    for index, part in enumerate(parts):
        if part == "..":
            depth -= 1
            if depth <= 0:
                rest = "/".join(parts[index + 1 :])
                return bool(rest.strip("/.")) and names_system_path("/" + rest)
        elif part not in ("", "."):
            depth += 1
    return False


def _links(option: str) -> bool:
    """Does ``option`` make ``cp`` link instead of copy (``-s``, ``-l``,
    ``-rs``, ``--symbolic-link``, ``--link``)?"""
    if option.startswith("--"):
        return option in ("--symbolic-link", "--link")
    return option.startswith("-") and ("s" in option[1:] or "l" in option[1:])
