"""``runner run``: one session, or one per input set, as exit codes, progress
and ``--json`` events."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from .common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Stopped,
    backend_options,
    compile_for_cli,
    fail,
    input_options,
    input_values,
    print_notices,
)


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


#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner run agent.yaml --input acme.repo.url=https://example.com/r.git
  runner run agent.yaml --inputs values.yaml --prompt 'Fix the failing test'
  runner run agent.yaml --sandbox local --json > events.jsonl
  runner run agent.yaml --input-sets sets.yaml --parallel 8
"""


@click.command(cls=_RunCommand, epilog=EXAMPLES)
@click.argument("file", type=click.Path(dir_okay=False))
@input_options
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
@backend_options
@click.option(
    "--no-cache",
    is_flag=True,
    help="Neither use nor save snapshots of cached hooks (cache: true): every on_create runs.",
)
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress lines, no output and no warnings: only errors and the answer.",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Also print every output line of the steps (and of the agent's commands) as it comes.",
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
    verbose: bool,
) -> None:
    """Start a session of FILE's agent: run on_create, the prompt (if any), on_destroy.

    With a prompt, the agent's final answer goes to stdout (with --json, in
    the `turn` event) and a failed turn exits 1.  With --json, stdout ends
    with one `result` event (exit code and why), after a usage error or an
    interrupt too; `runner schema --events` is the schema of every event.
    """
    import anyio

    _log_unreported_only()
    started = time.perf_counter()
    with _result_if_stopped(as_json, started):
        if prompt is not None and prompt_file is not None:
            fail("give --prompt or --prompt-file, not both")
        if quiet and verbose:
            fail("give --quiet or --verbose, not both")
        interval = _progress_interval()
        if prompt_file is not None:
            prompt = prompt_file.read()
        compiled = compile_for_cli(
            file,
            output_dir=str(Path(output_dir).resolve()),
            sandbox=sandbox,
            image=image,
            notes=False,
        )
        values = input_values(compiled, assignments, input_files)
        sets = None if input_sets is None else _load_input_sets(input_sets, base=values)
        if not quiet:
            print_notices(compiled, file, sandbox, values if sets is None else None)
    from ..core.snapshot_keys import snapshots_disabled

    with snapshots_disabled() if no_cache else contextlib.nullcontext():
        if sets is None:
            sys.exit(
                anyio.run(
                    _run_session,
                    compiled,
                    values,
                    prompt,
                    as_json,
                    quiet,
                    (verbose, interval),
                    started,
                )
            )
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
            None if quiet else (verbose, interval),
        )
    sys.exit(code)


@contextlib.contextmanager
def _result_if_stopped(as_json: bool, started: float) -> Iterator[None]:
    """A usage or input error before any session still ends ``--json`` output
    with a ``result`` event saying why, so a CI job reading only stdout knows."""
    from .running import RunOutcome

    try:
        yield
    except Stopped as stopped:
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
        fail(str(exc))
    if not isinstance(data, list) or not data or not all(isinstance(i, dict) for i in data):
        fail(f"--input-sets {path}: expected a non-empty list of mappings (input_id: value)")
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
    display: tuple[bool, float] | None,
) -> int:
    """One session per set, at most ``parallel`` at once; set N saves under OUTPUT_DIR/N/.
    ``display`` is -v and the plain lines' interval; None under --quiet (no
    progress lines; the summary table and the answers still show)."""
    from ..core.progress import ProgressPrinter, terminal_safe
    from .running import CloseTrace, run_many

    emit_json = _json_writer(as_json)
    # Compiled once per set: each set's save: steps write into its own folder.
    agents = [
        compile_for_cli(
            file, output_dir=str(output_dir / str(index + 1)), notes=False, **overrides
        ).agent
        for index in range(len(sets))
    ]
    traces = [CloseTrace() for _ in sets]
    verbose, interval = display or (False, 0.0)
    printers = [
        ProgressPrinter(sys.stderr, prefix=f"[{index + 1}] ", verbose=verbose, interval=interval)
        for index in range(len(sets))
    ]

    def listener_for(index: int) -> Any:
        def on_event(event: dict[str, Any]) -> None:
            traces[index](event)
            if display is not None:
                printers[index](event)
            emit_json({**event, "set": index + 1})

        return on_event

    outcomes, interrupted = await _until_signal(
        run_many(
            agents.__getitem__,
            sets,
            prompt=prompt,
            concurrency=parallel,
            listener_for=listener_for,
            output_for=None if display is None else (lambda index: printers[index].output),
            every_line=verbose,
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
    display: tuple[bool, float],
    started: float,
) -> int:
    """One session; ``display`` is -v and the plain lines' interval."""
    from ..core.events import listen
    from ..core.output import listen_output
    from ..core.progress import ProgressPrinter, terminal_safe
    from .running import CloseTrace, RunOutcome, run_once

    emit_json = _json_writer(as_json)
    # On a terminal the running step's line is live (its elapsed time and
    # last output line); in a CI log, plain lines.
    printer = ProgressPrinter(
        sys.stderr,
        live=sys.stderr.isatty() and not as_json,
        verbose=display[0],
        interval=display[1],
    )
    trace = CloseTrace()

    def on_event(event: dict[str, Any]) -> None:
        trace(event)
        if not quiet:
            printer(event)
        emit_json(event)

    # --quiet: no output lines either (the printer would drop them anyway)
    every_line = display[0]
    lines = (
        contextlib.nullcontext() if quiet else listen_output(printer.output, every_line=every_line)
    )
    try:
        with listen(on_event), lines:
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


def _progress_interval() -> float:
    """``RUNNER_PROGRESS_INTERVAL``: seconds between two "still running"
    lines of a running step in a log (not a terminal); 0: none."""
    import os

    from ..core.progress import DEFAULT_INTERVAL

    value = os.environ.get("RUNNER_PROGRESS_INTERVAL", "")
    try:
        seconds = float(value) if value else DEFAULT_INTERVAL
    except ValueError:
        fail(f"RUNNER_PROGRESS_INTERVAL={value!r}: expected a number of seconds")
    if not seconds >= 0:  # NaN and negatives
        fail(f"RUNNER_PROGRESS_INTERVAL={value!r}: expected a number of seconds, 0 or more")
    return seconds


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
        from ..engine.cleanup import force_cleanup

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


def _log_unreported_only() -> None:
    """The runner's warnings on stderr, as Python's last-resort handler prints
    them, but not a failure the session reports itself (an ``on_destroy``
    that failed): the progress lines and the final message already say it,
    and it was printed three times."""
    import logging

    logger = logging.getLogger("runner")
    if logger.handlers or logging.getLogger().handlers:
        return  # the caller configured logging: theirs to decide
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(lambda record: not getattr(record, "runner_reported", False))
    logger.addHandler(handler)
