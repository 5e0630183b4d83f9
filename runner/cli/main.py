"""The ``runner`` command line: a thin shell over the library.

Commands parse arguments, call library functions, and turn results and typed
errors into output and an exit code:

    0  ok
    1  the run failed (a hook, the setup script or a turn failed)
    2  usage or configuration error (bad file, bad input, backend unavailable
       or its extra missing)
    130 interrupted (Ctrl-C or SIGTERM): the session is closed first, so the
        hooks whose on_create had completed get on_destroy (none, if none
        had; a second signal stops them) and the sandbox is deleted; the
        closing message says which on_destroy hooks ran and whether the
        sandbox was deleted, from what actually happened

With ``run --json``, stdout is one JSON event per line (the schema is
``runner schema --events``) and always ends with one ``result`` event that
carries the exit code and why, even for a usage error or an interrupt.

Heavy packages (docker, jinja2, jsonschema) are imported inside the commands
that need them, so ``runner --help`` stays fast and ``runner validate`` never
imports docker.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from .. import __version__
from ..sandboxes.registry import BACKENDS

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

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


class _Stopped(SystemExit):
    """A command stopped with an error already printed; ``messages`` say why
    (the summary, then each problem), for ``run --json``'s ``result`` event."""

    def __init__(self, messages: list[str], code: int) -> None:
        super().__init__(code)
        self.messages = messages


def _fail(message: str, code: int = EXIT_USAGE, *, details: Sequence[str] = ()) -> NoReturn:
    for line in details:
        click.echo(line, err=True)
    click.echo(f"runner: {message}", err=True)
    raise _Stopped([message, *details], code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runner")
def main() -> None:
    """Run AI-agent sessions in sandboxes, with lifecycle hooks declared in YAML or Python."""


@main.command()
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
        with _cache_notices() as notices:
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
        _fail(f"{total} problem(s) in {len(files)} file(s)")


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


def _input_options(function: Any) -> Any:
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


def _backend_options(function: Any) -> Any:
    function = click.option(
        "--image", help="Docker image to use instead of the file's (sandbox docker or mistral)."
    )(function)
    function = click.option(
        "--sandbox",
        type=click.Choice(list(BACKENDS)),
        help="Run on this sandbox instead of the file's; options it has no use for are ignored.",
    )(function)
    return function


def _compile(
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
        with _cache_notices() as notices:
            compiled = compile_file(file, output_dir=output_dir, sandbox=sandbox, image=image)
    except ValueError as exc:  # an override that cannot apply (OverrideError)
        _fail(str(exc))
    except ConfigError as exc:
        problems = [str(problem) for problem in exc.problems]
        _fail(f"{len(problems)} problem(s) in {file}", details=problems)
    compiled.notes += notices
    for note in compiled.notes if notes else ():
        click.echo(f"runner: {note}", err=True)
    return compiled


@contextlib.contextmanager
def _cache_notices() -> Iterator[list[str]]:
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


def _input_values(compiled: Any, assignments: tuple[str, ...], files: tuple[str, ...]) -> Any:
    from ..config.input_values import collect_input_values
    from ..core.errors import SessionInputError

    try:
        return collect_input_values(compiled.inputs, assignments=assignments, files=files)
    except SessionInputError as exc:
        _fail(str(exc))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_input_options
@_backend_options
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

    compiled = _compile(file, sandbox=sandbox, image=image)
    values = _input_values(compiled, assignments, input_files)
    try:
        steps = render_plan(compiled, values)
    except AgentsError as exc:
        _fail(str(exc))
    click.echo(plan_text(steps), nl=False)  # only run commands are not comments


class _RunCommand(click.Command):
    """``run``, whose own usage errors (a bad ``--sandbox`` choice, an unknown
    option) still end ``--json`` output with a ``result`` event, as every
    other error before a session does."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list it is given
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if "--json" in given:
                from .running import RunOutcome

                outcome = RunOutcome(exit_code=EXIT_USAGE, messages=[exc.format_message()])
                _json_writer(True)(outcome.as_event(duration_seconds=0.0))
            raise


@main.command(cls=_RunCommand)
@click.argument("file", type=click.Path(dir_okay=False))
@_input_options
@click.option("--prompt", help="A message for the agent; without one, only the lifecycle runs.")
@click.option(
    "--prompt-file",
    type=click.File("r", encoding="utf-8"),
    help="Read the message from a file ('-' for stdin).",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where save: steps write.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Also write one JSON event per line to stdout."
)
@click.option(
    "--input-sets",
    type=click.Path(dir_okay=False),
    help="YAML/JSON list of input mappings: one session per item (over --input/--inputs).",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="With --input-sets: how many sessions run at once.",
)
@_backend_options
@click.option(
    "--no-cache",
    is_flag=True,
    help="Neither use nor save snapshots of cached hooks (cache: true): every on_create runs.",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress lines and no warnings; errors still show."
)
def run(
    file: str,
    assignments: tuple[str, ...],
    input_files: tuple[str, ...],
    prompt: str | None,
    prompt_file: Any,
    output_dir: str,
    as_json: bool,
    input_sets: str | None,
    parallel: int,
    sandbox: str | None,
    image: str | None,
    no_cache: bool,
    quiet: bool,
) -> None:
    """Start a session of FILE's agent: run on_create, the prompt (if any), on_destroy.

    With a prompt, the agent's final answer goes to stdout (with --json, in
    the `turn` event) and a failed turn exits 1.  With --json, stdout ends
    with one `result` event (exit code and why), after a usage error or an
    interrupt too; `runner schema --events` is the schema of every event.
    """
    import anyio

    started = time.perf_counter()
    with _result_if_stopped(as_json, started):
        if prompt is not None and prompt_file is not None:
            _fail("give --prompt or --prompt-file, not both")
        if prompt_file is not None:
            prompt = prompt_file.read()
        compiled = _compile(
            file,
            output_dir=str(Path(output_dir).resolve()),
            sandbox=sandbox,
            image=image,
            notes=False,
        )
        values = _input_values(compiled, assignments, input_files)
        sets = None if input_sets is None else _load_input_sets(input_sets, base=values)
        if not quiet:
            _print_notices(compiled, file, sandbox, values if sets is None else None)
    from ..core.snapshot_keys import snapshots_disabled

    with snapshots_disabled() if no_cache else contextlib.nullcontext():
        if sets is None:
            sys.exit(anyio.run(_run_session, compiled, values, prompt, as_json, quiet, started))
        overrides = {"sandbox": sandbox, "image": image}
        code = anyio.run(
            _run_parallel,
            file,
            Path(output_dir).resolve(),
            sets,
            prompt,
            parallel,
            as_json,
            overrides,
            started,
        )
    sys.exit(code)


def _print_notices(
    compiled: Any, file: str, sandbox: str | None, values: dict[str, Any] | None
) -> None:
    """What the overrides changed, and the no-isolation warning when ``--sandbox
    local`` runs a file that chose another sandbox: once, after the file and
    the inputs ``values`` are found valid (an input error is the only message
    then; with ``--input-sets``, None: each set reports its own).  A file that
    says ``sandbox: local`` itself chose it: no warning."""
    notices = list(compiled.notes)
    if sandbox == "local":
        chosen = _file_sandbox(file)
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
        _fail(terminal_safe(str(exc)))
    for notice in notices:
        click.echo(f"runner: {notice}", err=True)


def _file_sandbox(file: str) -> str:
    """The sandbox FILE itself names (``none`` if it names none)."""
    from ..config.yaml_loader import load_file

    data = load_file(file).data
    environment = (data.get("agent") or {}).get("environment") or {}
    return str(environment.get("sandbox", "none"))


@contextlib.contextmanager
def _result_if_stopped(as_json: bool, started: float) -> Iterator[None]:
    """A usage or input error before any session still ends ``--json`` output
    with a ``result`` event saying why, so a CI job reading only stdout knows."""
    from .running import RunOutcome

    try:
        yield
    except _Stopped as stopped:
        outcome = RunOutcome(exit_code=int(stopped.code or EXIT_USAGE), messages=stopped.messages)
        _json_writer(as_json)(outcome.as_event(duration_seconds=time.perf_counter() - started))
        raise


def _load_input_sets(path: str, *, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The sets of a --input-sets file, each laid over the --input/--inputs values."""
    from ..config import ConfigError
    from ..config.yaml_loader import load_file

    try:
        data = load_file(path).data
    except ConfigError as exc:
        _fail(str(exc))
    if not isinstance(data, list) or not data or not all(isinstance(i, dict) for i in data):
        _fail(f"--input-sets {path}: expected a non-empty list of mappings (input_id: value)")
    return [{**base, **item} for item in data]


async def _run_parallel(
    file: str,
    output_dir: Path,
    sets: list[dict[str, Any]],
    prompt: str | None,
    parallel: int,
    as_json: bool,
    overrides: dict[str, str | None],
    started: float,
) -> int:
    """One session per set, at most ``parallel`` at once; set N saves under OUTPUT_DIR/N/."""
    from ..core.progress import ProgressPrinter, terminal_safe
    from .running import CloseTrace, run_many

    emit_json = _json_writer(as_json)
    # Compiled once per set: each set's save: steps write into its own folder.
    agents = [
        _compile(file, output_dir=str(output_dir / str(index + 1)), notes=False, **overrides).agent
        for index in range(len(sets))
    ]
    traces = [CloseTrace() for _ in sets]

    def listener_for(index: int) -> Any:
        printer = ProgressPrinter(sys.stderr, prefix=f"[{index + 1}] ")

        def on_event(event: dict[str, Any]) -> None:
            traces[index](event)
            printer(event)
            emit_json({**event, "set": index + 1})

        return on_event

    outcomes, interrupted = await _until_signal(
        run_many(
            agents.__getitem__, sets, prompt=prompt, concurrency=parallel, listener_for=listener_for
        )
    )
    outcomes = outcomes or []
    failed = sum(1 for o in outcomes if not o.ok)
    click.echo(
        f"runner: {len(sets)} session(s), {len(outcomes) - failed} ok, {failed} failed "
        f"(parallel {parallel}, {time.perf_counter() - started:.2f}s)",
        err=True,
    )
    click.echo(f"  {'set':>4}  {'status':<8}{'exit':>4}  {'time':>8}  detail", err=True)
    for index, outcome in enumerate(outcomes):
        status = "ok" if outcome.ok else "failed"
        detail = outcome.messages[0] if outcome.messages else ""
        click.echo(
            f"  {index + 1:>4}  {status:<8}{outcome.exit_code:>4}  "
            f"{outcome.duration_seconds:>7.2f}s  {terminal_safe(detail[:100])}",
            err=True,
        )
        if outcome.text is not None and not as_json:
            _print_answer(f"[{index + 1}] {outcome.text}")
        emit_json(outcome.as_event("set_result", set=index + 1))
    total = _sets_outcome(outcomes, traces if interrupted else None)
    if interrupted:
        for message in total.messages:
            click.echo(f"runner: {terminal_safe(message)}", err=True)
    counts = {"sessions": len(sets)} if interrupted else {"sessions": len(sets), "failed": failed}
    emit_json(total.as_event(duration_seconds=time.perf_counter() - started, **counts))
    return total.exit_code


def _sets_outcome(outcomes: list[Any], traces: list[Any] | None) -> Any:
    """The whole --input-sets run as one outcome: the worst exit code and each
    failed set's error; after an interrupt (``traces`` given), how each set's
    session was closed."""
    from .running import RunOutcome

    if traces is not None:
        lines = [f"set {index + 1}: {trace.describe()}" for index, trace in enumerate(traces)]
        return RunOutcome(
            exit_code=EXIT_INTERRUPTED,
            messages=["interrupted; every session that had started was closed", *lines],
        )
    return RunOutcome(
        exit_code=max((o.exit_code for o in outcomes), default=EXIT_OK),
        messages=[f"set {i + 1}: {o.error}" for i, o in enumerate(outcomes) if not o.ok],
    )


async def _run_session(
    compiled: Any,
    values: dict[str, Any],
    prompt: str | None,
    as_json: bool,
    quiet: bool,
    started: float,
) -> int:
    from ..core.events import listen
    from ..core.progress import ProgressPrinter, terminal_safe
    from .running import CloseTrace, RunOutcome, run_once

    emit_json = _json_writer(as_json)
    # On a terminal the running step's line is live (its elapsed time);
    # in a CI log, plain lines.
    printer = ProgressPrinter(sys.stderr, live=sys.stderr.isatty() and not as_json)
    trace = CloseTrace()

    def on_event(event: dict[str, Any]) -> None:
        trace(event)
        if not quiet:
            printer(event)
        emit_json(event)

    try:
        with listen(on_event):
            outcome, interrupted = await _until_signal(
                run_once(compiled.agent, values, prompt=prompt)
            )
    finally:
        printer.close()
    if interrupted or outcome is None:
        outcome = outcome or RunOutcome(session_id=trace.session_id)
        outcome.exit_code = EXIT_INTERRUPTED
        outcome.messages.append(_interrupt_message(trace))
    for message in outcome.messages:
        click.echo(f"runner: {terminal_safe(message)}", err=True)
    if outcome.text is not None and not as_json:
        _print_answer(outcome.text)
    emit_json(outcome.as_event(duration_seconds=time.perf_counter() - started))
    return int(outcome.exit_code)


def _print_answer(text: str) -> None:
    """The agent's answer on stdout.  On a terminal, its controls are shown as
    escapes (``terminal_safe``, newlines and tabs kept): a model quoting the
    sandbox must not retitle the terminal or write its clipboard (OSC 0, OSC
    52).  To a file or a pipe, it goes exactly as it is (``click.echo`` would
    strip CSI sequences there); a lone surrogate, which no encoding can
    write, becomes ``?``."""
    from ..core.progress import terminal_safe

    stream = sys.stdout
    if stream.isatty():
        text = terminal_safe(text, keep_lines=True)
    stream.flush()
    stream.buffer.write(text.encode("utf-8", "replace") + b"\n")
    stream.buffer.flush()


def _interrupt_message(trace: Any) -> str:
    """What an interrupt left behind, from the session's own events."""
    if trace.session_id is None:
        return "interrupted before a session started; nothing was created"
    return f"interrupted; the session was closed: {trace.describe()}"


def _json_writer(enabled: bool) -> Any:
    def emit_json(event: dict[str, Any]) -> None:
        if enabled:
            sys.stdout.write(json.dumps(event, default=str) + "\n")
            sys.stdout.flush()

    return emit_json


async def _until_signal(work: Any) -> tuple[Any, bool]:
    """Await ``work``; SIGINT/SIGTERM cancel it (its cleanup is shielded and
    finishes).  Returns (its result or None, whether a signal arrived)."""
    import signal

    import anyio

    interrupted: list[int] = []
    result: list[Any] = []

    async def watch_signals(
        scope: anyio.CancelScope, *, task_status: Any = anyio.TASK_STATUS_IGNORED
    ) -> None:
        # The receiver stays open until the end: the first signal cancels the
        # work (on_destroy still runs, shielded); the second stops on_destroy
        # and goes straight to deleting the sandboxes.
        from ..engine.lifecycle import force_cleanup

        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()  # the handlers are in place before any work starts
            async for received in signals:
                if len(interrupted) == 1:
                    if force_cleanup():
                        click.echo(
                            "runner: interrupted again: on_destroy stopped, deleting the sandbox",
                            err=True,
                        )
                elif not interrupted:
                    click.echo(
                        "runner: interrupted: closing (on_destroy of the hooks that "
                        "completed on_create runs; interrupt again to skip it and delete "
                        "the sandbox at once)",
                        err=True,
                    )
                interrupted.append(received)
                scope.cancel()

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            await tg.start(watch_signals, scope)
            result.append(await work)
        tg.cancel_scope.cancel()
    return (result[0] if result else None), bool(interrupted)


@main.command()
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


@main.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
def info(file: str | None) -> None:
    """What can run here: Docker, images, extras, keys; with FILE, what FILE needs.

    With FILE it lists every input, secret, the sandbox and its image, the
    extras and the model's key, then a verdict, so a CI job can check before
    it runs: exit 0 when ready, 2 when something required is missing.  Secret
    and key values are never printed, only whether they are set.
    """
    import platform

    from .info import NotReady, docker_engine, echo_default_image, echo_file_needs, echo_host_keys

    compiled = _compile(file) if file else None  # a broken file fails before Docker is asked
    click.echo(f"runner {__version__} on Python {platform.python_version()}")
    engine, docker_problem = docker_engine()
    if compiled is None:
        echo_default_image(engine)
    echo_host_keys()
    if compiled is not None:
        try:
            echo_file_needs(str(file), compiled, engine, docker_problem)
        except NotReady as exc:
            _fail(str(exc))


@main.command()
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
        _fail(f"{path}: {STARTER_SCHEMA} is the name of the schema written beside it")
    if target.exists() and not force:
        _fail(f"{path} exists; pass --force to overwrite it")
    schema = schema_text()
    schema_is_current = _has_text(schema_file, schema)
    if schema_file.exists() and not schema_is_current and not force:
        _fail(f"{schema_file} exists with other content; pass --force to overwrite it")
    try:  # a new project's folder may not exist yet: create it
        target.parent.mkdir(parents=True, exist_ok=True)
        if not schema_is_current:
            schema_file.write_text(schema, encoding="utf-8")
        target.write_text(STARTER.format(name=path), encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {exc.filename or path}: {exc.strerror or exc}")
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


@main.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--agent",
    "python_agents",
    multiple=True,
    metavar="[NAME=]MODULE:ATTR",
    help="Also serve the runner.Agent object ATTR of MODULE (imported from the current "
    "directory or the installed packages), under NAME [default: ATTR]; MODULE:ATTR() "
    "calls the function ATTR once at start for it. Repeatable.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="0: any free port.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="save: steps write under DIR/<session id>/.",
)
@click.option(
    "--db",
    envvar="RUNNER_SERVE_DB",
    metavar="FILE|URL",
    help="A SQLite file (one server) [default: DIR/runner-serve.db], or a "
    "postgresql://USER@HOST/DB URL that several servers share (each session run by "
    "one; a dead server's taken over by another). Also read from RUNNER_SERVE_DB; "
    "keep a password out of the command line (PGPASSWORD or ~/.pgpass).",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=100,  # serve._sessions.DEFAULT_MAX_SESSIONS (not imported here: --help stays quick)
    show_default=True,
    help="Open sessions (not closed or failed) this server holds; one more is answered "
    "503 with Retry-After, and nothing is created.",
)
@click.option(
    "--claim-interval",
    type=click.FloatRange(min=0.05),
    default=1.0,  # serve.CLAIM_INTERVAL_SECONDS
    show_default=True,
    metavar="SECONDS",
    help="PostgreSQL: how often this server looks for sessions whose server died "
    "(and takes them over), and checks it still holds its own.",
)
@click.option(
    "--reattach-timeout",
    type=click.FloatRange(min=0),
    default=60.0,  # serve._sessions.DEFAULT_REATTACH_TIMEOUT
    show_default=True,
    metavar="SECONDS",
    help="At start, how long to keep trying a session's sandbox whose backend does not "
    "answer (the Docker engine, the cloud API) before the session fails.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=20.0,  # serve.service.DRAIN_SECONDS
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM or SIGINT, how long running steps may finish (new sessions and "
    "messages get 503 meanwhile); what still runs then resumes at the next start or "
    "on another server. No session fails because the server stopped.",
)
def serve(
    files: tuple[str, ...],
    python_agents: tuple[str, ...],
    host: str,
    port: int,
    output_dir: str,
    db: str | None,
    max_sessions: int,
    claim_interval: float,
    reattach_timeout: float,
    drain_timeout: float,
) -> None:
    """Serve the sessions of FILES' agents (and of --agent Python agents) over HTTP
    (see the README).

    Every request needs Authorization: Bearer $RUNNER_SERVE_TOKEN; without the
    variable the server listens only on loopback, with a token it prints.
    Sessions, events and finished steps are kept in a SQLite file, so a server
    killed and started again finds every session that was not closed; or in
    PostgreSQL (--db postgresql://...), where several servers share them and
    take over the sessions of one that died.
    """
    import anyio

    from ..serve.service import ServeError
    from ..serve.service import serve as run_server

    if not files and not python_agents:
        _fail("give YAML FILES to serve, --agent MODULE:ATTR, or both")
    try:
        anyio.run(
            lambda: run_server(
                files,
                host=host,
                port=port,
                output_dir=output_dir,
                db=db,
                python_agents=python_agents,
                max_sessions=max_sessions,
                claim_interval=claim_interval,
                reattach_timeout=reattach_timeout,
                drain_timeout=drain_timeout,
            )
        )
    except ServeError as exc:
        _fail(str(exc), details=exc.details)


@main.command()
def gc() -> None:
    """Remove sandbox containers that expired or whose runner process is gone,
    and snapshots older than 7 days, beyond the 20 newest, or beyond 20 GiB.  Containers of
    `runner serve` sessions (durable) outlive their server, to be re-attached
    when it restarts: they are removed once they expire."""
    from ..core.errors import SandboxUnavailableError
    from ..sandboxes.docker.environment import DockerClient, collect_garbage
    from ..sandboxes.docker.snapshots import collect_snapshots

    try:
        client = DockerClient()._connect()
        removed = collect_garbage(client)
        snapshots = collect_snapshots(client)
    except SandboxUnavailableError as exc:
        _fail(str(exc))
    for container_id in removed:
        click.echo(container_id[:12])
    for image_id in snapshots:
        click.echo(image_id.removeprefix("sha256:")[:12])
    click.echo(f"removed {len(removed)} container(s), {len(snapshots)} snapshot(s)", err=True)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (click's), for commands,
    options, file names and choices.

    \b
    Examples:
      runner completion bash > ~/.local/share/bash-completion/completions/runner
      runner completion zsh > "${fpath[1]}/_runner"
      runner completion fish > ~/.config/fish/completions/runner.fish
    """
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None  # the choice lists only shells click knows
    click.echo(completer(main, {}, "runner", "_RUNNER_COMPLETE").source())
