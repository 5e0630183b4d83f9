"""``runner schema``: the YAML format's JSON schema, or the events' schema."""

from __future__ import annotations

from pathlib import Path

import click

#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner schema > runner.schema.json
  runner schema --events      # of the --json events
"""


@click.command(epilog=EXAMPLES)
@click.option(
    "--events", is_flag=True, help="The schema of the `run --json` events instead of the YAML's."
)
@click.option(
    "--path",
    "as_path",
    is_flag=True,
    help="Print the installed schema file's absolute path instead of its text.",
)
def schema(events: bool, as_path: bool) -> None:
    """Print the JSON Schema of the YAML format (or, with --events, of the --json events)."""
    if as_path:
        name = "events.schema.json" if events else "runner.schema.json"
        click.echo(_shipped_schema_path(name))
    elif events:
        from ..core.events import events_schema_text

        click.echo(events_schema_text(), nl=False)
    else:
        from ..config.schema import schema_text

        click.echo(schema_text(), nl=False)


def _shipped_schema_path(name: str) -> Path:
    """Where the installed package keeps a schema: for editors and validators
    that want a file (``$schema``, ``check-jsonschema --schemafile``)."""
    from importlib import resources

    return Path(str(resources.files("runner").joinpath(f"schemas/{name}"))).resolve()
