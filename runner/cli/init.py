"""``runner init``: a starter file and its schema."""

from __future__ import annotations

from pathlib import Path

import click

from .common import (
    fail,
)

#: The schema file `runner init` writes beside the starter, which names it in its modeline.
STARTER_SCHEMA = "runner.schema.json"


STARTER = """\
# yaml-language-server: $schema=./runner.schema.json
# A starter file: `runner run {name} --input demo.task.title="Say hello"`
version: 1
inputs:
  demo.task:
    as: task
    description: What this session is about.
    schema:
      type: object
      properties:
        title: {{type: string, minLength: 1}}
      required: [title]
agent:
  name: starter-agent
  model: mistral-large-4
  instructions: Use bash to answer.
  environment:
    sandbox: local        # zero set-up; use docker for isolation
    hooks:
      - name: seed-workspace
        on_create:
          - run: echo {{{{ task.title }}}} > TASK.md
        on_destroy:
          - save: TASK.md
            to: task-notes.md
"""


#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner init agent.yaml
"""


@click.command(epilog=EXAMPLES)
@click.argument("path", default="runner.yaml", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing file (the YAML or the schema).")
def init(path: str, force: bool) -> None:
    """Write a starter YAML file (local sandbox) that validates, and the schema beside it.

    Editors complete and check the file offline: the schema is copied next to
    it as runner.schema.json, and its first line names the copy by a relative
    path (`# yaml-language-server: $schema=./runner.schema.json`).  A copy,
    not the installed schema's absolute path, because teams commit these files
    and venvs move: a relative pair works on every clone, and a URL works
    only online.  After an upgrade, `runner schema > runner.schema.json`
    refreshes the copy.  A schema file already there with other content is
    left alone unless --force; one with the same content is kept as is.
    """
    from ..config.schema import schema_text

    target = Path(path)
    schema_file = target.parent / STARTER_SCHEMA
    if target.name == STARTER_SCHEMA:
        fail(f"{path}: {STARTER_SCHEMA} is the name of the schema written beside it")
    if target.exists() and not force:
        fail(f"{path} exists; pass --force to overwrite it")
    schema = schema_text()
    schema_is_current = _has_text(schema_file, schema)
    if schema_file.exists() and not schema_is_current and not force:
        fail(f"{schema_file} exists with other content; pass --force to overwrite it")
    try:  # a new project's folder may not exist yet: create it
        target.parent.mkdir(parents=True, exist_ok=True)
        if not schema_is_current:
            schema_file.write_text(schema, encoding="utf-8")
        target.write_text(STARTER.format(name=path), encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {exc.filename or path}: {exc.strerror or exc}")
    click.echo(
        f"wrote {path} (editors check it against {schema_file}); "
        f"try: runner render {path} --input demo.task.title=hello"
    )


def _has_text(path: Path, text: str) -> bool:
    """Whether ``path`` is a readable file holding exactly ``text``."""
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False
