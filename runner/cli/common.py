"""What the commands share: exit codes, the one way to fail, the input and
backend options, and compiling a file with its notices."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import click

from ..sandboxes.registry import BACKENDS

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Stopped(SystemExit):
    """A command stopped with an error already printed; ``messages`` say why
    (the summary, then each problem), for ``run --json``'s ``result`` event."""

    def __init__(self, messages: list[str], code: int) -> None:
        super().__init__(code)
        self.messages = messages


def fail(message: str, code: int = EXIT_USAGE, *, details: Sequence[str] = ()) -> NoReturn:
    for line in details:
        click.echo(line, err=True)
    click.echo(f"runner: {message}", err=True)
    raise Stopped([message, *details], code)


def input_options(function: Any) -> Any:
    function = click.option(
        "--inputs",
        "input_files",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="YAML or JSON file mapping input_id to its value.",
    )(function)
    function = click.option(
        "--input",
        "assignments",
        multiple=True,
        metavar="ID.FIELD=VALUE",
        help="One input field (or ID=@FILE, ID=<json>); repeatable.",
    )(function)
    return function


def backend_options(function: Any) -> Any:
    function = click.option(
        "--image", help="Docker image to use instead of the file's (sandbox docker or mistral)."
    )(function)
    function = click.option(
        "--sandbox",
        type=click.Choice(list(BACKENDS)),
        help="Run on this sandbox instead of the file's; options it has no use for are ignored.",
    )(function)
    return function


def compile_for_cli(
    file: str,
    output_dir: str | None = None,
    *,
    sandbox: str | None = None,
    image: str | None = None,
    notes: bool = True,
) -> Any:
    """The compiled file; with ``notes``, what the overrides changed is printed
    (``run`` prints it itself, once the inputs are valid too)."""
    from ..config import ConfigError, compile_file

    try:
        with cache_notices() as notices:
            compiled = compile_file(file, output_dir=output_dir, sandbox=sandbox, image=image)
    except ValueError as exc:  # an override that cannot apply (OverrideError)
        fail(str(exc))
    except ConfigError as exc:
        problems = [str(problem) for problem in exc.problems]
        fail(f"{len(problems)} problem(s) in {file}", details=problems)
    compiled.notes += notices
    for note in compiled.notes if notes else ():
        click.echo(f"runner: {note}", err=True)
    return compiled


@contextlib.contextmanager
def cache_notices() -> Iterator[list[str]]:
    """Collect the ``SnapshotWarning`` of a cached hook on a backend that cannot
    snapshot (a Python hook with ``cache = True`` on the local sandbox) as one
    notice line, instead of Python's two-line warning with a source line."""
    import warnings

    from ..core.snapshot_keys import SnapshotWarning

    notices: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SnapshotWarning)
        try:
            yield notices
        finally:
            for warning in caught:
                if issubclass(warning.category, SnapshotWarning):
                    notices.append(f"warning: {warning.message}")
                else:  # anything else, as it would have been shown
                    warnings.showwarning(
                        warning.message, warning.category, warning.filename, warning.lineno
                    )


def input_values(compiled: Any, assignments: tuple[str, ...], files: tuple[str, ...]) -> Any:
    from ..config.input_values import collect_input_values
    from ..core.errors import SessionInputError

    try:
        return collect_input_values(compiled.inputs, assignments=assignments, files=files)
    except SessionInputError as exc:
        fail(str(exc))


def print_notices(
    compiled: Any, file: str, sandbox: str | None, values: dict[str, Any] | None
) -> None:
    """What the overrides changed, and the no-isolation warning when ``--sandbox
    local`` runs a file that chose another sandbox: once, after the file and
    the inputs ``values`` are found valid (an input error is the only message
    then; with ``--input-sets``, None: each set reports its own).  A file that
    says ``sandbox: local`` itself chose it: no warning."""
    notices = list(compiled.notes)
    if sandbox == "local":
        chosen = file_sandbox(file)
        if chosen != "local":
            notices.append(
                f"warning: --sandbox local runs this file's commands (written for sandbox "
                f"{chosen}) on this machine with your rights, with no isolation; "
                "-q silences this"
            )
    if not notices:
        return
    from ..core.errors import SessionInputError
    from ..core.progress import terminal_safe
    from ..engine.dependencies import resolve_inputs

    agent = compiled.agent
    try:
        if values is not None:
            resolve_inputs(values, [*agent.declared_inputs, *agent.plan.dependencies])
    except SessionInputError as exc:
        fail(terminal_safe(str(exc)))
    for notice in notices:
        click.echo(f"runner: {notice}", err=True)


def file_sandbox(file: str) -> str:
    """The sandbox FILE itself names (``none`` if it names none)."""
    from ..config.yaml_loader import load_file

    data = load_file(file).data
    environment = (data.get("agent") or {}).get("environment") or {}
    return str(environment.get("sandbox", "none"))
