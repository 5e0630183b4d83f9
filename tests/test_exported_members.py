"""The package's face: one export table, and everything that repeats it agrees.

``runner/__init__.py`` names each public name once, in ``_LAZY`` (name ->
defining module); ``__all__`` is built from it; the ``TYPE_CHECKING`` block
repeats the imports for type checkers, which cannot read the table.  As in
httpx's ``test_exported_members``: every exported name resolves, is defined
where the table says, and the typing block imports exactly the table.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import runner


def _typing_imports() -> dict[str, str]:
    """Name -> module of each import in ``if TYPE_CHECKING:``."""
    tree = ast.parse(Path(runner.__file__).read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            found[alias.asname or alias.name] = "." * node.level + (node.module or "")
    return found


def test_all_is_the_table_plus_load_and_pattern() -> None:
    assert runner.__all__ == sorted([*runner._LAZY, "load", "pattern"])
    assert len(set(runner.__all__)) == len(runner.__all__)
    assert sorted(dir(runner)) == runner.__all__


def test_every_exported_name_resolves_where_the_table_says() -> None:
    for name in runner.__all__:
        value = getattr(runner, name)
        if name in runner._LAZY:
            module = importlib.import_module(runner._LAZY[name], "runner")
            assert getattr(module, name) is value, name
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__ == module.__name__, (name, value.__module__)


def test_the_typing_block_imports_exactly_the_table() -> None:
    typing_imports = _typing_imports()
    expected = {**runner._LAZY, "pattern": "."}
    assert typing_imports == expected
