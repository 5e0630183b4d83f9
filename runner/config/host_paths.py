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
