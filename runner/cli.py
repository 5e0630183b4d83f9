"""The ``runner`` command line: a thin shell over the library.

Commands parse arguments, call library functions, and turn results and typed
errors into output and an exit code:

    0  ok
    1  the run failed (a hook, the setup script or a turn failed)
    2  usage or configuration error (bad file, bad input, backend unavailable
       or its extra missing)
    130 interrupted (Ctrl-C or SIGTERM), after on_destroy ran (a second signal
        skips the rest of it) and the sandbox was deleted

Heavy packages (docker, jinja2, jsonschema) are imported inside the commands
that need them, so ``runner --help`` stays fast and ``runner validate`` never
imports docker.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from . import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

STARTER = """\
# yaml-language-server: $schema=https://sandbox-runner.dev/schemas/runner.schema.json
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


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    click.echo(f"runner: {message}", err=True)
    sys.exit(code)


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
    from .config import validate_file

    results = {file: validate_file(file) for file in files}
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
        type=click.Choice(["none", "local", "docker", "mistral"]),
        help="Run on this sandbox instead of the file's; options it has no use for are ignored.",
    )(function)
    return function


def _compile(
    file: str,
    output_dir: str | None = None,
    *,
    sandbox: str | None = None,
    image: str | None = None,
) -> Any:
    from .config import ConfigError, compile_file

    try:
        compiled = compile_file(file, output_dir=output_dir, sandbox=sandbox, image=image)
    except ValueError as exc:  # an override that cannot apply (OverrideError)
        _fail(str(exc))
    except ConfigError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        _fail(f"{len(exc.problems)} problem(s) in {file}")
    for note in compiled.notes:
        click.echo(f"runner: {note}", err=True)
    return compiled


def _input_values(compiled: Any, assignments: tuple[str, ...], files: tuple[str, ...]) -> Any:
    from ._errors import SessionInputError
    from .config.input_values import collect_input_values

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
    from ._errors import AgentsError
    from .config.render import plan_text, render_plan

    compiled = _compile(file, sandbox=sandbox, image=image)
    values = _input_values(compiled, assignments, input_files)
    try:
        steps = render_plan(compiled, values)
    except AgentsError as exc:
        _fail(str(exc))
    click.echo(plan_text(steps), nl=False)  # only run commands are not comments


@main.command()
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
    quiet: bool,
) -> None:
    """Start a session of FILE's agent: run on_create, the prompt (if any), on_destroy.

    With a prompt, the agent's final answer goes to stdout (with --json, in
    the `turn` event) and a failed turn exits 1.
    """
    import anyio

    if prompt is not None and prompt_file is not None:
        _fail("give --prompt or --prompt-file, not both")
    if prompt_file is not None:
        prompt = prompt_file.read()

    compiled = _compile(
        file, output_dir=str(Path(output_dir).resolve()), sandbox=sandbox, image=image
    )
    values = _input_values(compiled, assignments, input_files)
    if compiled.agent.environment.backend == "local" and not quiet and sandbox != "local":
        click.echo(
            "runner: warning: sandbox local runs every command on this machine with your "
            "rights (no isolation); --sandbox docker isolates them, --sandbox local or "
            "--quiet silences this",
            err=True,
        )
    if input_sets is None:
        sys.exit(anyio.run(_run_session, compiled, values, prompt, as_json, quiet))
    sets = _load_input_sets(input_sets, base=values)
    overrides = {"sandbox": sandbox, "image": image}
    code = anyio.run(
        _run_parallel, file, Path(output_dir).resolve(), sets, prompt, parallel, as_json, overrides
    )
    sys.exit(code)


def _load_input_sets(path: str, *, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The sets of a --input-sets file, each laid over the --input/--inputs values."""
    from .config import ConfigError
    from .config.yaml_loader import load_file

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
) -> int:
    """One session per set, at most ``parallel`` at once; set N saves under OUTPUT_DIR/N/."""
    from ._progress import ProgressPrinter, terminal_safe
    from ._run import run_many

    emit_json = _json_writer(as_json)
    # Compiled once per set: each set's save: steps write into its own folder.
    agents = [
        _compile(file, output_dir=str(output_dir / str(index + 1)), **overrides).agent
        for index in range(len(sets))
    ]

    def listener_for(index: int) -> Any:
        printer = ProgressPrinter(sys.stderr, prefix=f"[{index + 1}] ")

        def on_event(event: dict[str, Any]) -> None:
            printer(event)
            emit_json({**event, "set": index + 1})

        return on_event

    started = time.perf_counter()
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
            click.echo(f"[{index + 1}] {outcome.text}")
        emit_json(
            {
                "event": "result",
                "set": index + 1,
                "exit_code": outcome.exit_code,
                "text": outcome.text,
                "messages": outcome.messages,
            }
        )
    if interrupted:
        click.echo("runner: interrupted; every open session was closed", err=True)
        return EXIT_INTERRUPTED
    code = max((o.exit_code for o in outcomes), default=EXIT_OK)
    emit_json({"event": "summary", "sessions": len(sets), "failed": failed, "exit_code": code})
    return code


async def _run_session(
    compiled: Any, values: dict[str, Any], prompt: str | None, as_json: bool, quiet: bool = False
) -> int:
    from ._events import listen
    from ._progress import ProgressPrinter, terminal_safe
    from ._run import run_once

    emit_json = _json_writer(as_json)
    printer = ProgressPrinter(sys.stderr)

    def on_event(event: dict[str, Any]) -> None:
        if not quiet:
            printer(event)
        emit_json(event)

    with listen(on_event):
        outcome, interrupted = await _until_signal(run_once(compiled.agent, values, prompt=prompt))
    code = outcome.exit_code if outcome is not None else EXIT_FAILED
    for message in outcome.messages if outcome is not None else []:
        click.echo(f"runner: {terminal_safe(message)}", err=True)
    if interrupted:
        click.echo("runner: interrupted; the session was closed", err=True)
        code = EXIT_INTERRUPTED
    text = outcome.text if outcome is not None else None
    if text is not None and not as_json:
        click.echo(text)
    emit_json({"event": "result", "exit_code": code, "text": text})
    return code


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

    async def watch_signals(scope: anyio.CancelScope) -> None:
        # The receiver stays open until the end: the first signal cancels the
        # work (on_destroy still runs, shielded); the second stops on_destroy
        # and goes straight to deleting the sandboxes.
        from ._lifecycle import force_cleanup

        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for received in signals:
                if len(interrupted) == 1:
                    if force_cleanup():
                        click.echo(
                            "runner: interrupted again: on_destroy stopped, deleting the sandbox",
                            err=True,
                        )
                elif not interrupted:
                    click.echo(
                        "runner: interrupted: closing (on_destroy runs; interrupt again to "
                        "skip it and delete the sandbox at once)",
                        err=True,
                    )
                interrupted.append(received)
                scope.cancel()

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(watch_signals, scope)
            result.append(await work)
        tg.cancel_scope.cancel()
    return (result[0] if result else None), bool(interrupted)


@main.command()
def schema() -> None:
    """Print the JSON Schema of the YAML format."""
    from .config.schema import schema_text

    click.echo(schema_text(), nl=False)


@main.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
def info(file: str | None) -> None:
    """What can run here: Docker, images, extras, keys (and what FILE needs)."""
    import importlib.util
    import os
    import platform

    from .sandboxes.docker import DEFAULT_IMAGE, IMAGE_VARIABLE, DockerClient

    click.echo(f"runner {__version__} on Python {platform.python_version()}")
    docker_problem = None
    engine = None
    try:
        engine = DockerClient()._connect()
        click.echo(f"docker: reachable (engine {engine.version().get('Version', '?')})")
    except Exception as exc:
        docker_problem = str(exc)
        click.echo(f"docker: not reachable: {exc}")
    image = os.environ.get(IMAGE_VARIABLE) or DEFAULT_IMAGE
    images = {image}
    compiled = _compile(file) if file else None
    environment = compiled.agent.environment if compiled else None
    if environment is not None and getattr(environment, "image", None):
        images.add(environment.image)
    for name in sorted(images):
        if engine is None:
            click.echo(f"image {name}: unknown (no engine)")
            continue
        try:
            engine.images.get(name)
            click.echo(f"image {name}: present")
        except Exception:
            click.echo(f"image {name}: missing (will be pulled on first use)")
    koyeb = importlib.util.find_spec("koyeb") is not None
    token = "set" if os.environ.get("KOYEB_API_TOKEN") else "not set"
    click.echo(
        "extra koyeb: "
        + ("installed" if koyeb else "not installed (pip install 'sandbox-runner[koyeb]')")
    )
    click.echo("MISTRAL_API_KEY: " + ("set" if os.environ.get("MISTRAL_API_KEY") else "not set"))
    click.echo(f"KOYEB_API_TOKEN: {token}")
    if compiled is not None:
        backend = environment.backend
        click.echo(f"{file}: agent {compiled.agent.name!r}, sandbox {backend}")
        if backend == "docker" and docker_problem:
            _fail(f"{file} needs Docker, which is not reachable here")
        if backend == "mistral":
            from ._errors import AgentsError

            try:
                environment.check_available()
            except AgentsError as exc:
                _fail(f"{file} cannot run here: {exc}")


@main.command()
@click.argument("path", default="runner.yaml", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: str, force: bool) -> None:
    """Write a starter YAML file (local sandbox) that validates."""
    target = Path(path)
    if target.exists() and not force:
        _fail(f"{path} exists; pass --force to overwrite it")
    try:  # a new project's folder may not exist yet: create it
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(STARTER.format(name=path), encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")
    click.echo(f"wrote {path}; try: runner render {path} --input demo.task.title=hello")


@main.command()
def gc() -> None:
    """Remove sandbox containers that expired or whose runner process is gone."""
    from ._errors import SandboxUnavailableError
    from .sandboxes.docker import DockerClient, collect_garbage

    try:
        removed = collect_garbage(DockerClient()._connect())
    except SandboxUnavailableError as exc:
        _fail(str(exc))
    for container_id in removed:
        click.echo(container_id[:12])
    click.echo(f"removed {len(removed)} container(s)", err=True)
