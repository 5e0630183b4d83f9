"""Starting ``runner serve``: agents loaded from YAML files and Python specs,
the bearer token, the store, the server, and stopping on a signal."""

from __future__ import annotations

import importlib
import inspect
import ipaddress
import os
import re
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

#: A request body larger than this is refused with 413 (inputs and messages are small).
MAX_BODY_BYTES = 1 << 20
#: How often servers sharing a PostgreSQL database look for sessions whose
#: server died (and check they still hold their own).
CLAIM_INTERVAL_SECONDS = 1.0
#: How long a stopping server (SIGTERM) lets running steps finish.  Below
#: Kubernetes' default grace period (30 s), after which SIGKILL comes anyway.
DRAIN_SECONDS = 20.0
#: The shortest RUNNER_SERVE_TOKEN accepted.
MIN_TOKEN_LENGTH = 16
#: ``--agent [NAME=]MODULE:ATTR[()]``: a dotted module, a dotted attribute
#: path, and ``()`` for a factory to call (gunicorn's ``module:create_app()``).
_AGENT_SPEC = re.compile(
    r"^(?:(?P<name>[^=:\s]+)=)?(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)"
    r":(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?P<call>\(\))?$"
)


class ServeError(Exception):
    """The server cannot start; the message says why (the CLI exits 2)."""

    def __init__(self, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.details = list(details)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_token(host: str, environ: dict[str, str] | None = None) -> tuple[str, bool]:
    """The bearer token and whether it was generated (loopback without one set).

    Without ``RUNNER_SERVE_TOKEN`` the server refuses any non-loopback address;
    on loopback it makes a random token and prints it once, as Jupyter does.
    """
    token = (os.environ if environ is None else environ).get("RUNNER_SERVE_TOKEN", "")
    if token:
        if len(token) < MIN_TOKEN_LENGTH:
            raise ServeError(
                f"RUNNER_SERVE_TOKEN is shorter than {MIN_TOKEN_LENGTH} characters; "
                'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        return token, False
    if not is_loopback(host):
        raise ServeError(
            f"refusing to listen on {host} without a token: set RUNNER_SERVE_TOKEN "
            "(every request must then send Authorization: Bearer $RUNNER_SERVE_TOKEN), "
            "or listen on 127.0.0.1"
        )
    return secrets.token_urlsafe(32), True


def load_agents(files: Sequence[str], output_dir: Path) -> dict:
    """Compile every file once (a broken file stops the server before it listens)."""
    from ..config import ConfigError, compile_file
    from .sessions import AgentFile

    agents: dict[str, AgentFile] = {}
    for file in files:
        try:
            compiled = compile_file(file, output_dir=output_dir)
        except ConfigError as exc:
            problems = [str(p) for p in exc.problems]
            raise ServeError(f"{len(problems)} problem(s) in {file}", problems) from None
        name = compiled.agent.name
        _check_extras(file, compiled.agent.environment)
        if name in agents:
            raise ServeError(
                f"two files declare an agent named {name!r}: {agents[name].path} and {file}"
            )
        agents[name] = AgentFile(
            name=name, path=Path(file).resolve(), backend=compiled.agent.environment.backend
        )
    return agents


def _check_extras(where: str, environment: Any) -> None:
    """Stop before listening when ``where``'s backend needs an extra that is not
    installed (every session would fail); other problems a backend reports
    here (a token not set yet) are the sessions' to meet."""
    from ..core.errors import MissingExtraError

    try:
        environment.check_available()
    except MissingExtraError as exc:
        raise ServeError(f"{where}: sandbox: {environment.backend}: {exc}") from None
    except Exception:
        return


def load_python_agents(specs: Sequence[str], taken: dict) -> dict:
    """Import every ``--agent [NAME=]MODULE:ATTR``: a ``runner.Agent`` object,
    served under NAME (default: the last part of ATTR).  ``MODULE:ATTR()``
    names a factory instead: a function called once, with no arguments, at
    start (and at every restart), that returns the Agent (gunicorn's
    ``module:create_app()`` spelling; a factory can read settings or build
    hooks the module cannot at import).  Anything that stops it (no such
    module, the module or the factory raising, no such attribute, not an
    Agent, a name already served) stops the server before it listens, naming
    the module and what failed.  Modules are imported from the current
    directory first (as ``python -m`` and uvicorn do), then from the
    installed packages.
    """
    from ..engine.agent import Agent
    from .sessions import AgentFile

    agents: dict[str, AgentFile] = {}
    if specs and os.getcwd() not in sys.path:
        # Kept: a hook may import more of its package later, at a session's start.
        sys.path.insert(0, os.getcwd())
    for spec in specs:
        found = _AGENT_SPEC.match(spec)
        if found is None:
            raise ServeError(
                f"--agent {spec!r}: expected MODULE:ATTR or NAME=MODULE:ATTR, or MODULE:ATTR() "
                "for a factory (e.g. --agent support=mypackage.agents:support_agent)"
            )
        module_name, attr = found["module"], found["attr"]
        name = found["name"] or attr.rsplit(".", 1)[-1]
        reference = f"{module_name}:{attr}{found['call'] or ''}"
        try:
            target: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name + ".").startswith(exc.name + "."):
                raise ServeError(
                    f"--agent {spec}: cannot import module {module_name!r}: no module named "
                    f"{exc.name!r} (looked in the current directory and the installed packages)"
                ) from None
            raise ServeError(_import_failure(spec, module_name, exc)) from None
        except Exception as exc:
            raise ServeError(_import_failure(spec, module_name, exc)) from None
        for part in attr.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise ServeError(
                    f"--agent {spec}: module {module_name!r} has no attribute {attr!r}"
                ) from None
        if found["call"]:
            target = _call_factory(spec, reference, target)
        if not isinstance(target, Agent):
            if inspect.isfunction(target) and not found["call"]:
                raise ServeError(
                    f"--agent {spec}: {reference} is the function {target.__qualname__}, not a "
                    f"runner.Agent; to call it at start, write --agent {spec}()"
                )
            what = "returned" if found["call"] else "is"
            raise ServeError(
                f"--agent {spec}: {reference} {what} {type(target).__name__} {target!r:.80}, "
                "not a runner.Agent (build one: runner.Agent(model=..., environment=...))"
            )
        if name in taken or name in agents:
            where = (taken.get(name) or agents[name]).describe()
            raise ServeError(f"--agent {spec}: an agent named {name!r} is already served ({where})")
        try:
            target.environment.check_available()
        except Exception as exc:
            raise ServeError(f"--agent {spec}: {exc}") from None
        agents[name] = AgentFile(
            name=name,
            path=None,
            backend=target.environment.backend,
            python=target,
            reference=reference,
        )
    return agents


def _call_factory(spec: str, reference: str, factory: object) -> object:
    """What ``MODULE:ATTR()`` gives: the factory called once, with no arguments."""
    if not callable(factory):
        raise ServeError(
            f"--agent {spec}: {reference[:-2]} is {type(factory).__name__}, not a function to call"
        )
    if inspect.iscoroutinefunction(factory):
        raise ServeError(
            f"--agent {spec}: {reference[:-2]} is an async function; a factory must be a "
            "plain function that returns the runner.Agent"
        )
    try:
        return factory()
    except Exception as exc:
        import traceback

        frames = traceback.extract_tb(exc.__traceback__)[1:]  # past this frame
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise ServeError(
            f"--agent {spec}: calling {reference} failed: {type(exc).__name__}: {exc}{where}"
        ) from None


def _import_failure(spec: str, module_name: str, exc: BaseException) -> str:
    """Why importing ``module_name`` failed: the exception and where it was raised."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "importlib" not in f.filename]
    where = f" at {ours[-1].filename}:{ours[-1].lineno}" if ours else ""
    return (
        f"--agent {spec}: importing module {module_name!r} failed: "
        f"{type(exc).__name__}: {exc}{where}"
    )


async def serve(
    files: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    output_dir: str | Path = ".",
    db: str | Path | None = None,
    python_agents: Sequence[str] = (),
    max_sessions: int | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    claim_interval: float = CLAIM_INTERVAL_SECONDS,
    reattach_timeout: float | None = None,
    drain_timeout: float = DRAIN_SECONDS,
    limit_concurrency: int | None = None,
    forwarded_allow_ips: str | None = None,
    head_timeout: float | None = None,
    root_path: str = "",
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    retain_days: float | None = None,
    say: Callable[[str], None] = lambda line: print(f"runner: {line}", file=sys.stderr),
) -> None:
    """Serve until SIGINT/SIGTERM.  Sessions left open stay in the database and
    are resumed by the next start (or, on PostgreSQL, by another server)."""
    try:
        from . import asgi
    except ModuleNotFoundError as exc:
        raise ServeError(
            f"runner serve needs the 'serve' extra ({exc.name} is not installed): "
            "pip install 'sandbox-runner[serve]'"
        ) from None
    from .app import App
    from .metrics import Metrics
    from .sessions import DEFAULT_MAX_SESSIONS, Sessions
    from .store.base import StoreError

    settings = asgi.HttpSettings(
        max_body_bytes=max_body_bytes,
        limit_concurrency=limit_concurrency or asgi.LIMIT_CONCURRENCY,
        forwarded_allow_ips=forwarded_allow_ips,
        head_timeout=head_timeout or asgi.HEAD_TIMEOUT_SECONDS,
        root_path=root_path.rstrip("/"),
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise ServeError("--ssl-certfile and --ssl-keyfile go together: give both or neither")
    if ssl_certfile and ssl_keyfile:
        _check_tls(ssl_certfile, ssl_keyfile)
    token, generated = server_token(host)
    if max_sessions is None:
        max_sessions = DEFAULT_MAX_SESSIONS
    if max_sessions < 1:
        raise ServeError(f"--max-sessions must be at least 1, got {max_sessions}")
    out = Path(output_dir).resolve()
    agents = load_agents(files, out)
    agents.update(load_python_agents(python_agents, agents))
    if not agents:
        raise ServeError("nothing to serve: give YAML files, --agent MODULE:ATTR, or both")
    out.mkdir(parents=True, exist_ok=True)
    try:
        store = open_store(db or out / "runner-serve.db")
    except StoreError as exc:
        raise ServeError(str(exc)) from None
    try:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as exc:
        store.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = listener.listeners[0].extra(anyio.abc.SocketAttribute.local_port)
    url_host = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::", ""):  # all addresses: other servers reach it by name
        url_host = socket.gethostname()
    scheme = "https" if ssl_certfile else "http"
    url = f"{scheme}://{url_host}:{bound}"
    sockets = [one.extra(anyio.abc.SocketAttribute.raw_socket) for one in listener.listeners]
    sessions: Sessions | None = None
    try:
        async with anyio.create_task_group() as tg:
            sessions = Sessions(
                agents=agents,
                store=store,
                output_dir=out,
                task_group=tg,
                max_sessions=max_sessions,
                owner=url,
                **({} if reattach_timeout is None else {"reattach_timeout": reattach_timeout}),
            )
            resumed = await sessions.resume_all()
            metrics = Metrics(store.count_by_status, sessions.warm_sandboxes)
            sessions.on_event = metrics.event
            app = App(sessions, token=token, metrics=metrics)
            adapter = asgi.AsgiAdapter(
                app, max_body_bytes=max_body_bytes, observe=_observer(metrics)
            )
            server = asgi.http_server(adapter, settings)
            stopped = anyio.Event()

            async def stop_serving() -> None:
                app.end_streams()
                await asgi.stop_http(server, stopped)
                if sessions.parked:  # cancelling them would unwind them: leave them
                    await anyio.to_thread.run_sync(store.flush)
                    _exit_now(
                        say,
                        f"stopped; {sessions.parked} session(s) stopped between two steps "
                        "of on_create resume at the next start or on another server",
                    )
                tg.cancel_scope.cancel()

            tg.start_soon(_stop_on_signal, stop_serving, sessions, drain_timeout, say)
            tg.start_soon(asgi.serve_http, server, sockets, stopped)
            if retain_days is not None:
                tg.start_soon(_retain, store, retain_days)
            if not store.exclusive:
                store.watch_connection(lambda exc: _stop_now(exc, say))  # type: ignore[attr-defined]
                tg.start_soon(_watch_claims, sessions, claim_interval, say)
            if generated:
                say(f"RUNNER_SERVE_TOKEN is not set; this run's token is {token}")
            if resumed:
                say(f"resuming {len(resumed)} session(s) left open: {', '.join(resumed)}")
            say(
                f"serving {', '.join(sorted(agents))} on {url} "
                f"(database {store.where}, output {out}, at most {max_sessions} open sessions)"
            )
    finally:
        if sessions is not None:
            sessions.close_pools()
        store.close()


#: How often ``--retain-days`` looks for closed sessions to delete (and at start).
RETENTION_SWEEP_SECONDS = 3600.0


async def _retain(store: Any, days: float) -> None:
    """Delete the sessions closed or failed more than ``days`` days ago, with
    their events and journal: at start, then every hour."""
    import logging
    import time

    logger = logging.getLogger("runner.serve.service")
    while True:
        try:
            deleted = store.delete_final_before(time.time() - days * 86400)
        except Exception as exc:  # the database is down: the next sweep tries again
            logger.warning("--retain-days: cannot delete old sessions: %s", exc)
        else:
            if deleted:
                logger.info("deleted %d session(s) closed more than %g day(s) ago", deleted, days)
        await anyio.sleep(RETENTION_SWEEP_SECONDS)


def _observer(metrics: Any) -> Callable[[str, str, int, float, str], None]:
    """After each request: its latency in the metrics, and a log line."""
    import logging

    from .metrics import route_of

    log = logging.getLogger("runner.serve.http")

    def observe(method: str, path: str, status: int, seconds: float, client: str) -> None:
        route = route_of(path)
        metrics.request(method, route, status, seconds)
        if route != "other":  # a scanner's paths are not logged
            fields = {"client": client, "method": method, "path": path, "status": status}
            duration = round(seconds * 1000, 1)
            log.info(
                "%s %s %s %d %.1f ms",
                *fields.values(),
                duration,
                extra={**fields, "duration_ms": duration},
            )

    return observe


def _check_tls(certfile: str, keyfile: str) -> None:
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise ServeError(
            f"cannot use --ssl-certfile {certfile} with --ssl-keyfile {keyfile}: {exc}"
        ) from None


def open_store(db: str | Path) -> Any:
    """The store ``--db`` names: a ``postgresql://`` (or ``postgres://``) URL, or
    a SQLite file's path."""
    if isinstance(db, str) and db.startswith(("postgresql://", "postgres://")):
        from .store.postgres import PostgresStore

        return PostgresStore(db)
    from .store.sqlite import SqliteStore

    return SqliteStore(db)


async def _watch_claims(sessions: Any, interval: float, say: Callable[[str], None]) -> None:
    """Take over dead servers' sessions; stop at once if this server's claims
    may be lost."""
    from .store.base import StoreError

    try:
        await sessions.watch_claims(interval)
    except StoreError as exc:
        _stop_now(exc, say)


def _stop_now(exc: Exception, say: Callable[[str], None]) -> None:
    """Exit (2) at once, as if killed: a server that may have lost its claims
    must not unwind its sessions (no on_destroy, no status written, no sandbox
    deleted): another server is taking them over, as after a SIGKILL."""
    say(str(exc))
    sys.stderr.flush()
    os._exit(2)


async def _stop_on_signal(
    stop: Callable[[], Awaitable[None]], sessions: Any, drain: float, say: Callable[[str], None]
) -> None:
    """SIGTERM or SIGINT: drain, then stop.  No session is failed by a stop.

    New sessions and messages get 503 at once; running starts, turns and
    closes get ``drain`` seconds to finish.  Work still running then is
    left as a SIGKILL leaves it (nothing unwinds: no ``on_destroy``, no
    status written, the sandbox kept): the next start, or on PostgreSQL
    another server, resumes it.  A second signal stops at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            break
        say(
            f"stopping: no new sessions or messages; waiting up to {drain:g} s for "
            f"{sessions.busy} running step(s)"
        )
        async with anyio.create_task_group() as wait:

            async def second_signal() -> None:
                async for _ in signals:
                    _exit_now(say, "stopping at once (second signal)")

            wait.start_soon(second_signal)
            idle = await sessions.drain(drain)
            wait.cancel_scope.cancel()
        if not idle:
            _exit_now(
                say,
                f"{sessions.busy} step(s) still running after {drain:g} s: left as they "
                "are, to resume at the next start or on another server",
            )
        say("stopped; sessions left open resume at the next start")
        await stop()


def _exit_now(say: Callable[[str], None], why: str) -> None:
    """Leave as a SIGKILL would (the journal is already durable)."""
    say(why)
    sys.stderr.flush()
    os._exit(0)


__all__ = [
    "MAX_BODY_BYTES",
    "ServeError",
    "is_loopback",
    "load_python_agents",
    "serve",
    "server_token",
]
