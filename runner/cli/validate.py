"""``runner validate``: check files against the schema and compile them."""

from __future__ import annotations

import json
from typing import Any

import click

from .common import (
    cache_notices,
    fail,
)

#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner validate agent.yaml
  runner validate .github/runner/*.yaml --format github
"""


@click.command(epilog=EXAMPLES)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "github", "json"]),
    default="text",
    show_default=True,
    help="text: FILE:LINE:COL lines; github: ::error annotations; json: one JSON document.",
)
def validate(files: tuple[str, ...], output_format: str) -> None:
    """Check FILES against the schema and compile them; print every problem."""
    from ..config import validate_file

    results = {}
    for file in files:
        with cache_notices() as notices:
            results[file] = validate_file(file)
        for notice in notices:
            click.echo(f"runner: {file}: {notice}", err=True)
    total = sum(len(problems) for problems in results.values())
    if output_format == "json":
        click.echo(json.dumps({"ok": total == 0, "files": _problems_as_json(results)}, indent=2))
    for file, problems in results.items():
        for problem in problems:
            if output_format == "github":
                click.echo(_github_annotation(problem))
            elif output_format == "text":
                click.echo(str(problem), err=True)
        if not problems and output_format == "text":
            click.echo(f"{file}: ok")
    if total:
        fail(f"{total} problem(s) in {len(files)} file(s)")


def _problems_as_json(results: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [
        {
            "file": file,
            "problems": [
                {
                    "line": p.line,
                    "column": p.column,
                    "message": p.message,
                    "path": ".".join(map(str, p.path)) if p.path else None,
                }
                for p in problems
            ],
        }
        for file, problems in results.items()
    ]


def _github_annotation(problem: Any) -> str:
    """A GitHub Actions workflow command: the problem shows on the file's line in a PR."""

    def escape(text: str, *, property_value: bool = False) -> str:
        text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return text.replace(":", "%3A").replace(",", "%2C") if property_value else text

    where = f" (at {'.'.join(map(str, problem.path))})" if problem.path else ""
    return (
        f"::error file={escape(problem.file, property_value=True)},line={problem.line},"
        f"col={problem.column}::{escape(problem.message + where)}"
    )
