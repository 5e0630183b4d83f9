"""Which programs run their arguments or their input as commands, from GTFOBins.

Why this exists: the shell checker must know that a value templated into
``env VALUE``, ``find . -exec VALUE``, ``awk VALUE`` or ``xargs`` ends up run as
a command or as code.  A list kept by hand goes stale and has gaps; GTFOBins
(https://github.com/GTFOBins/GTFOBins.github.io) is a maintained public
catalogue of Unix programs and of the "functions" each can be abused for
(``shell``, ``command``, ``reverse-shell``, ``file-read``, ...).
``data/executors.json`` holds only those names (GTFOBins is GPL-3.0; none of
its text or code is copied: see ``data/README.md``), with the upstream commit
it was taken from; ``scripts/refresh-executors`` regenerates it from a clone.

GTFOBins' ``shell`` also covers interactive escapes (``less`` then ``!sh``,
a pager reached through ``git help``), so ``EXECUTORS`` is wider than "runs
its argv as a command"; rules that need that narrower sense add their own
knowledge on top.  Names are GTFOBins' spelling: the program's base name, as
typed (``"bash"``, ``"R"``), not a path.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def _load() -> dict[str, Any]:
    data = resources.files(__package__).joinpath("data").joinpath("executors.json")
    return json.loads(data.read_text(encoding="utf-8"))


_DATA = _load()

#: The GTFOBins function names that mean the binary runs a command or code.
FUNCTIONS_THAT_EXECUTE: frozenset[str] = frozenset(_DATA["functions_that_execute"])

_FUNCTIONS: dict[str, frozenset[str]] = {
    name: frozenset(functions) for name, functions in _DATA["binaries"].items()
}

#: Every binary GTFOBins lists with at least one function that runs a command or code
#: (its own, an alias target's, or one it reaches through ``inherit``).
EXECUTORS: frozenset[str] = frozenset(
    name for name, functions in _FUNCTIONS.items() if functions & FUNCTIONS_THAT_EXECUTE
)

#: Where the data comes from, for messages: ``GTFOBins @ 7382261 (2026-04-20)``.
SOURCE: str = f"GTFOBins @ {_DATA['commit'][:7]} ({_DATA['commit_date'][:10]})"


def functions_of(name: str) -> frozenset[str]:
    """The GTFOBins functions of the binary ``name`` (empty if GTFOBins does not list it)."""
    return _FUNCTIONS.get(name, frozenset())
