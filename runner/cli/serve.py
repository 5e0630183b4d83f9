"""``runner serve``: the command; the server is ``runner.serve``."""

from __future__ import annotations

import click

from .common import (
    fail,
)

#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  RUNNER_SERVE_TOKEN=... runner serve agent.yaml --port 8765
  runner serve a.yaml b.yaml --db postgresql://runner@db/runner
"""


@click.command(epilog=EXAMPLES)
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
@click.option(
    "--limit-concurrency",
    type=click.IntRange(min=1),
    default=1000,  # serve.asgi.LIMIT_CONCURRENCY
    show_default=True,
    metavar="N",
    help="Connections and requests in progress (event streams count) beyond which a "
    "request is answered 503 at once.",
)
@click.option(
    "--forwarded-allow-ips",
    envvar="FORWARDED_ALLOW_IPS",
    metavar="IPS",
    help="Comma-separated addresses (or *) of the proxies whose X-Forwarded-For and "
    "X-Forwarded-Proto are trusted [default: 127.0.0.1]. Also read from "
    "FORWARDED_ALLOW_IPS.",
)
@click.option(
    "--head-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,  # serve.asgi.HEAD_TIMEOUT_SECONDS
    show_default=True,
    metavar="SECONDS",
    help="How long a request's head (its line and headers) may take to arrive, from "
    "its first byte; a client slower than that is disconnected.",
)
@click.option(
    "--root-path",
    default="",
    metavar="PATH",
    help="The path prefix a proxy serves this API under (e.g. /runner), for a proxy "
    "that strips it before forwarding.",
)
@click.option(
    "--ssl-certfile",
    type=click.Path(dir_okay=False, exists=True),
    help="Serve HTTPS with this certificate (PEM; with --ssl-keyfile).",
)
@click.option(
    "--ssl-keyfile",
    type=click.Path(dir_okay=False, exists=True),
    help="The private key of --ssl-certfile (PEM).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="The log on stderr: lines of text, or one JSON object a line (time, level, "
    "logger, message, and client, method, path, status, duration_ms for requests). "
    "RUNNER_DEBUG=1 adds DEBUG records (hook errors in full).",
)
@click.option(
    "--retain-days",
    type=click.FloatRange(min=0),
    metavar="DAYS",
    help="Delete sessions closed or failed more than DAYS days ago, with their events "
    "and journal (at start, then hourly) [default: keep them].",
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
    limit_concurrency: int,
    forwarded_allow_ips: str | None,
    head_timeout: float,
    root_path: str,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    log_format: str,
    retain_days: float | None,
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

    from ..serve import logs
    from ..serve.service import ServeError
    from ..serve.service import serve as run_server

    if not files and not python_agents:
        fail("give YAML FILES to serve, --agent MODULE:ATTR, or both")
    logs.configure(log_format)
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
                limit_concurrency=limit_concurrency,
                forwarded_allow_ips=forwarded_allow_ips,
                head_timeout=head_timeout,
                root_path=root_path,
                ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile,
                retain_days=retain_days,
                say=logs.say,
            )
        )
    except ServeError as exc:
        fail(str(exc), details=exc.details)
