"""Host paths in hooks (``save: ... to:``, ``upload:``) may not leave their folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from ..core.errors import AgentsError


class HostPathError(AgentsError):
    """A host path is absolute, climbs out with ``..``, or escapes through a symlink."""


def check_relative(path: str) -> str | None:
    """Why ``path`` is not an acceptable relative host path, or None if it is."""
    if not path:
        return "the path is empty"
    if "\0" in path:
        return "the path contains NUL"
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~") or (len(path) > 1 and path[1] == ":"):
        return f"{path!r} is absolute; host paths are relative to their folder"
    if ".." in pure.parts:
        return f"{path!r} contains '..'; host paths may not leave their folder"
    return None


#: The names templates see that no input chose (``{{ session.id }}``).
RUNNER_NAMES = frozenset({"session"})


def split_template_path(source: str) -> list[str]:
    """``source`` (a path template) cut at each ``/`` of its literal text: a
    ``/`` inside ``{{ }}``, ``{% %}`` or ``{# #}`` does not cut."""
    import re

    components = [""]
    for piece in re.split(r"({{.*?}}|{%.*?%}|{#.*?#})", source, flags=re.S):
        if piece.startswith(("{{", "{%", "{#")):
            components[-1] += piece
            continue
        first, *rest = piece.split("/")
        components[-1] += first
        components.extend(rest)
    return components


def check_value_destination(source: str) -> str | None:
    """Why a ``save: ... to:`` template that reads an input is refused, or None.

    A value may choose the folders (the template fixes the file's name:
    ``to: "{{ x.dir }}/report.md"``) or a name inside a folder the template
    names (``to: "saved/{{ x.name }}"``), never a file's name at the output
    folder's top: there a hostile name replaces what the user's next command
    runs (a ``Makefile``, a ``.pth`` in a venv, the agent's YAML: review 25's A1).
    """
    components = split_template_path(source)
    templated = [_templated(c) for c in components]
    if templated[-1] and (len(components) == 1 or templated[0]):
        return (
            "a value may choose the saved file's name only inside a folder the template "
            'names (to: "saved/{{ x.name }}"), or the folders with the name fixed '
            '(to: "{{ x.dir }}/report.md"): a name chosen at the output folder\'s top '
            "could replace a file there that runs (a Makefile, the agent's YAML)"
        )
    return None


def check_value_path(source: str, path: str, *, what: str) -> None:
    """``path``, rendered from the template ``source`` with an input's value,
    may not hold a folder or a name that starts with ``.`` unless the template
    itself writes it (``.git/config``, ``.venv``, ``.envrc``, ``.env``: what
    runs or holds credentials on the host; review 25's A1)."""
    fixed = {part for part in split_template_path(source) if not _templated(part)}
    hidden = [p for p in PurePosixPath(path).parts if p.startswith(".") and p not in fixed]
    if hidden:
        raise HostPathError(
            f"{what}: {path!r} holds a folder or file name that starts with '.' "
            f"({hidden[0]!r}), which a value may not choose on the host; "
            "write it in the template if it is meant"
        )


def _templated(text: str) -> bool:
    return "{{" in text or "{%" in text


def resolve_inside(base: Path, path: str, *, what: str) -> Path:
    """``base / path``, refusing anything that ends up outside ``base``."""
    reason = check_relative(path)
    if reason:
        raise HostPathError(f"{what}: {reason}")
    root = base.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise HostPathError(f"{what}: {path!r} leads outside {root} (through a symlink)")
    return target


def read_regular_file(path: str | Path, *, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file, or ``OSError`` saying why not.

    ``/dev/zero`` or a FIFO given where a file is expected would otherwise be
    read until memory runs out, or wait forever for a writer: ``O_NONBLOCK``
    lets the open return at once, and the type check comes before any read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{path}: larger than {limit} bytes")
    return data
