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


#: A component that names no folder of its own: ``./x`` is ``x`` at the top.
_NO_NAME = ("", ".", "..")


def check_value_destination(components: list[tuple[str, str | None]]) -> str | None:
    """Why a ``save: ... to:`` template that reads an input is refused, or None.

    ``components``: the template's path components, each with the name the
    template fixes it to, or None (``template_checks.path_components``).  A
    value may choose the folders (the template fixes the file's name:
    ``to: "{{ x.dir }}/report.md"``) or a name inside a folder the template
    names (``to: "saved/{{ x.name }}"``), never a file's name at the output
    folder's top: there a hostile name replaces what the user's next command
    runs (a ``Makefile``, a ``.pth`` in a venv, the agent's YAML: review 25's
    A1; ``./{{ x }}`` is the top too: review 26's A1b, and so is a comment or
    a constant where a folder's name would be: review 27's A1d).
    """
    named = [name for _, name in components if name not in (".", "")]
    if (named and named[0] is not None and named[0] not in _NO_NAME) or (
        components[-1][1] not in (None, *_NO_NAME)
    ):
        return None
    return (
        "a value may choose the saved file's name only inside a folder the template "
        'names (to: "saved/{{ x.name }}"), or the folders with the name fixed '
        '(to: "{{ x.dir }}/report.md"): a name chosen at the output folder\'s top '
        "could replace a file there that runs (a Makefile, the agent's YAML)"
    )


def check_value_path(components: list[tuple[str, str | None]], path: str, *, what: str) -> None:
    """``path``, rendered from a template (its ``components``) with an input's
    value, may not hold a folder or a name that starts with ``.`` unless the
    template itself writes it (``.git/config``, ``.venv``, ``.envrc``, ``.env``:
    what runs or holds credentials on the host, also inside a folder the
    template names, where git or direnv act once the user is there; review
    25's A1)."""
    fixed = {name for _, name in components if name is not None and "\0" not in name}
    hidden = [p for p in PurePosixPath(path).parts if p.startswith(".") and p not in fixed]
    if hidden:
        raise HostPathError(
            f"{what}: {path!r} holds a folder or file name that starts with '.' "
            f"({hidden[0]!r}), which a value may not choose on the host; "
            "write it in the template if it is meant"
        )


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
