"""Host paths in hooks (``save: ... to:``, ``upload:``) may not leave their folder."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from .._errors import AgentsError


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
