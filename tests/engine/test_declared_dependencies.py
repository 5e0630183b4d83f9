"""Every third-party module the package imports is one of its declared
dependencies (or of the extra that needs it), not something another
dependency happens to bring along.

A module reached only through another package's dependencies works in the
development venv and fails in a user's: ``sniffio`` (anyio no longer
depends on it) broke every Docker command of the installed wheel once.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Imported only inside ``TYPE_CHECKING`` blocks or by the extras' own code
#: paths, with the distribution that provides them (checked below too).
PROVIDED_BY = {"yaml": "pyyaml", "tree_sitter_bash": "tree-sitter-bash", "koyeb": "koyeb-sdk"}


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for name, extra in project["optional-dependencies"].items():
        if name != "test":
            requirements += extra
    return {normal(re.split(r"[<>=!~\[;\s]", r, maxsplit=1)[0]) for r in requirements}


def normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``prometheus_client``
    in an installed package's metadata is ``prometheus-client`` in pyproject)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_level_modules() -> dict[str, str]:
    """Top-level module -> a file importing it, over every module of runner/."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "runner").rglob("*.py")):
        if path.name == "exec_helper.py":  # runs inside the container, stdlib only
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    distributions = importlib.metadata.packages_distributions()
    allowed = declared()
    undeclared = {}
    for module, where in imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in ("runner", "__future__"):
            continue
        providers = {normal(d) for d in distributions.get(module, [])}
        providers.add(normal(PROVIDED_BY.get(module, module)))
        if not providers & allowed:
            undeclared[module] = where
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    # The check itself bites: sniffio is installed here (httpx brings it), not declared.
    distributions = importlib.metadata.packages_distributions()
    providers = {normal(d) for d in distributions.get("sniffio", ["sniffio"])}
    assert not providers & declared()
