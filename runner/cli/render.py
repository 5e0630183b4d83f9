"""``runner render``: print the plan a file compiles to, with inputs filled in."""

from __future__ import annotations

import click

from .common import (
    backend_options,
    compile_for_cli,
    fail,
    input_options,
    input_values,
)

#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner render agent.yaml --inputs values.yaml | less
"""


@click.command(epilog=EXAMPLES)
@click.argument("file", type=click.Path(dir_okay=False))
@input_options
@backend_options
def render(
    file: str,
    assignments: tuple[str, ...],
    input_files: tuple[str, ...],
    sandbox: str | None,
    image: str | None,
) -> None:
    """Print every command each hook would run, in lifecycle order; create nothing."""
    from ..config.render import plan_text, render_plan
    from ..core.errors import AgentsError

    compiled = compile_for_cli(file, sandbox=sandbox, image=image)
    values = input_values(compiled, assignments, input_files)
    try:
        steps = render_plan(compiled, values)
    except AgentsError as exc:
        fail(str(exc))
    click.echo(plan_text(steps), nl=False)  # only run commands are not comments
