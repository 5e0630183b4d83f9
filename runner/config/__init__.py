"""The YAML format: load, validate against the schema, compile into an ``Agent``.

``runner.load(path)`` is the whole pipeline; ``validate_file`` reports every
problem without raising.  Nothing in this package runs a hook.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .compiler import CompiledConfig, DeclaredInput, compile_document
from .errors import ConfigError, ConfigProblem
from .yaml_loader import load_file

if TYPE_CHECKING:
    from ..engine.agent import Agent


def compile_file(
    path: str | Path,
    *,
    output_dir: str | Path | None = None,
    sandbox: str | None = None,
    image: str | None = None,
) -> CompiledConfig:
    """Load and compile a YAML file; raise ``ConfigError`` listing every problem.

    ``sandbox`` and ``image`` replace the file's choices (see ``overrides``);
    what they leave out is in the result's ``notes``.
    """
    document = load_file(path)
    notes: list[str] = []
    if sandbox is not None or image is not None:
        from .overrides import apply_overrides

        document.data, notes = apply_overrides(document.data, sandbox=sandbox, image=image)
    compiled = compile_document(document, output_dir=Path(output_dir) if output_dir else None)
    compiled.notes = notes
    return compiled


def load(path: str | Path, *, output_dir: str | Path | None = None) -> Agent:
    """Compile the YAML file at ``path`` into an ``Agent``.

    ``output_dir`` is where ``save`` steps write (default: the current
    directory at load time).
    """
    return compile_file(path, output_dir=output_dir).agent


def validate_file(path: str | Path) -> list[ConfigProblem]:
    """Every problem of the file at ``path`` (empty if it is valid)."""
    try:
        compile_file(path)
    except ConfigError as exc:
        return exc.problems
    return []


__all__ = [
    "CompiledConfig",
    "ConfigError",
    "ConfigProblem",
    "DeclaredInput",
    "compile_file",
    "load",
    "validate_file",
]
