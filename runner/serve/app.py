"""The HTTP API of ``runner serve``: routes, the bearer token, the OpenAPI document.

Every route, ``/openapi.json`` included, needs ``Authorization: Bearer
<RUNNER_SERVE_TOKEN>``, compared in constant time.  Errors are JSON
``{"error": code, "message": text}``: 400 bad input (the CLI's messages),
401 no or a wrong token, 404 no such session or route, 405 wrong method,
409 an idempotency conflict or a session in the wrong state, 413 a body
over the limit, 503 (with ``Retry-After``) a new session beyond
``--max-sessions``.
"""

from __future__ import annotations

import functools
import hmac
import json
import re
import time
from typing import Any

import anyio

from .http_messages import Request, Response, StreamResponse, error_response, json_response
from .sessions import DEFAULT_MAX_SESSIONS, ApiError, Sessions
from .store.base import FINAL_STATUSES

#: How often a quiet event stream sends a comment line, so proxies keep it open.
KEEPALIVE_SECONDS = 15.0
#: How often a stream reads the database for a session another server runs
#: (PostgreSQL) when this server cannot listen for that server's commits.
FOLLOW_ELSEWHERE_SECONDS = 0.5
#: ... and when it listens (each commit wakes the stream): a safety net only.
FOLLOW_LISTENING_SECONDS = 10.0

_SESSION = re.compile(r"^/v1/sessions/(sess_[0-9a-f]{32})(/messages|/events)?$")


#: ``GET /v1/sessions``: the page size without ``limit``, and the largest.
DEFAULT_PAGE = 100
MAX_PAGE = 1000


class App:
    def __init__(self, sessions: Sessions, *, token: str, metrics: Any = None) -> None:
        self.sessions = sessions
        self.metrics = metrics
        self._token = f"Bearer {token}".encode()
        #: Set when the server stops: event streams end (clients reconnect
        #: with Last-Event-ID, to this server once back or to another one).
        self.streams_ending = False

    def end_streams(self) -> None:
        """End every event stream now (a stopping server), each at an event's end."""
        self.streams_ending = True
        for session_id in list(self.sessions._changed):
            self.sessions._notify(session_id)

    def authorized(self, request: Request) -> bool:
        """The bearer token, compared in constant time; the scheme's case is
        free (RFC 9110 11.1: ``bearer`` is ``Bearer``)."""
        scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
        given = f"Bearer {token.strip()}".encode("utf-8", "replace")
        return scheme.lower() == "bearer" and hmac.compare_digest(given, self._token)

    async def __call__(self, request: Request) -> Response | StreamResponse:
        try:
            if request.path in ("/healthz", "/readyz"):  # probes: no token, nothing told
                return self._probe(request)
            if not self.authorized(request):
                return error_response(
                    401, "unauthorized", "send the header Authorization: Bearer $RUNNER_SERVE_TOKEN"
                )
            return await self._route(request)
        except ApiError as exc:
            return error_response(exc.status, exc.code, exc.message, headers=exc.headers)

    async def _route(self, request: Request) -> Response | StreamResponse:
        method, path = request.method, request.path
        if path == "/metrics":
            _allow(method, "GET")
            if self.metrics is None:
                raise ApiError(404, "not_found", "no route /metrics")
            from .metrics import CONTENT_TYPE

            return Response(200, self.metrics.exposition(), content_type=CONTENT_TYPE)
        if path == "/openapi.json":
            _allow(method, "GET")
            return json_response(
                200, openapi(sorted(self.sessions.agents), self.sessions.max_sessions)
            )
        if path == "/v1/sessions":
            _allow(method, "GET", "POST")
            if method == "GET":
                return json_response(200, self._page(request))
            row, created = await self.sessions.create(_json(request))
            headers = [] if created else [("idempotent-replayed", "true")]
            return json_response(201, {"id": row.id, "status": row.status}, headers=headers)
        match = _SESSION.match(path)
        if match is None:
            raise ApiError(404, "not_found", f"no route {path}")
        session_id, sub = match.groups()
        if sub is None:
            _allow(method, "GET", "DELETE")
            if method == "GET":
                row = await self.sessions.store.read(self.sessions.row, session_id)
                return json_response(200, row.public())
            row = await self.sessions.close(session_id)
            return json_response(200, row.public())
        if sub == "/messages":
            _allow(method, "POST")
            body = _json(request)
            text = body.get("text") if isinstance(body, dict) else None
            if not isinstance(text, str) or not text or set(body) != {"text"}:
                raise ApiError(400, "bad_request", 'the body must be {"text": "<message>"}')
            turn = await self.sessions.message(session_id, text)
            row = await self.sessions.store.read(self.sessions.row, session_id)
            return json_response(200, {"id": session_id, "status": row.status, "turn": turn})
        _allow(method, "GET")
        await self.sessions.store.read(self.sessions.row, session_id)  # 404 before the stream
        after = _last_event_id(request)
        return StreamResponse(self._events(session_id, after))

    def _probe(self, request: Request) -> Response:
        """``/healthz``: the process answers.  ``/readyz``: it should get
        traffic: its database answers and it is not stopping."""
        _allow(request.method, "GET")
        if request.path == "/healthz":
            return json_response(200, {"status": "ok"})
        if self.sessions.draining:
            return error_response(503, "not_ready", "this server is stopping")
        try:
            self.sessions.store.ping()
        except Exception as exc:
            return error_response(
                503, "not_ready", f"the database does not answer: {type(exc).__name__}"
            )
        return json_response(200, {"status": "ready"})

    def _page(self, request: Request) -> dict[str, Any]:
        """One page of sessions, oldest first; ``next`` (only when there are
        more) is the ``after`` of the next page."""
        limit_text = (request.query.get("limit") or [str(DEFAULT_PAGE)])[0]
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE:
            raise ApiError(400, "bad_request", f"limit must be a whole number from 1 to {MAX_PAGE}")
        limit = int(limit_text)
        after_given = request.query.get("after")
        after = _cursor_value(after_given[0]) if after_given else None
        rows = self.sessions.store.sessions_page(limit=limit + 1, after=after)
        page: dict[str, Any] = {"sessions": [row.public() for row in rows[:limit]]}
        if len(rows) > limit:
            page["next"] = _cursor(rows[limit - 1].created_at, rows[limit - 1].id)
        return page

    async def _events(self, session_id: str, after: int) -> Any:
        """Server-sent events: each stored event as ``id: N`` + ``data: {json}``,
        then the live ones, until the session is closed or failed."""
        last = after
        quiet_since = time.monotonic()
        store = self.sessions.store
        while True:
            # Before the reads below: a commit after them wakes this stream.
            listening = self.sessions.runs_here(session_id) or store.listen()
            changed = self.sessions.changed(session_id)
            for seq, event in await store.read(_events_after, store, session_id, last):
                last = seq
                quiet_since = time.monotonic()
                yield f"id: {seq}\ndata: {json.dumps(event, default=str)}\n\n".encode()
            if self.streams_ending:
                return
            status = await store.read(store.status_of, session_id)
            if status is None or status in FINAL_STATUSES:
                if not await store.read(_events_after, store, session_id, last):
                    return
                continue
            # Keep-alive on time even when wake-ups bring no new event.
            wait = max(0.0, KEEPALIVE_SECONDS - (time.monotonic() - quiet_since))
            if not self.sessions.runs_here(session_id):
                poll = FOLLOW_LISTENING_SECONDS if listening else FOLLOW_ELSEWHERE_SECONDS
                wait = min(wait, poll)
            with anyio.move_on_after(wait):
                await changed.wait()
                continue
            if time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                quiet_since = time.monotonic()
                yield b": keep-alive\n\n"


def _events_after(store: Any, session_id: str, last: int) -> list[tuple[int, dict[str, Any]]]:
    return list(store.events(session_id, after=last))


def _cursor(created_at: float, session_id: str) -> str:
    import base64

    return base64.urlsafe_b64encode(f"{created_at!r} {session_id}".encode()).decode()


def _cursor_value(text: str) -> tuple[float, str]:
    import base64
    import binascii

    try:
        stamp, session_id = base64.urlsafe_b64decode(text.encode()).decode().split(" ")
        return float(stamp), session_id
    except (ValueError, binascii.Error, UnicodeError):
        raise ApiError(
            400, "bad_request", "after must be the next of a previous page, unchanged"
        ) from None


def _allow(method: str, *allowed: str) -> None:
    """405 with the ``Allow`` header RFC 9110 asks for (HEAD with every GET)."""
    if method not in allowed:
        methods = [*allowed, *(["HEAD"] if "GET" in allowed else [])]
        raise ApiError(
            405,
            "method_not_allowed",
            f"use {' or '.join(allowed)}",
            headers=[("allow", ", ".join(methods))],
        )


def _json(request: Request) -> Any:
    from ..config.input_values import json_value

    try:
        return json_value(request.body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_request", f"the body must be JSON: {exc}") from None


#: The largest event number a client may name (a 64-bit column's bound).
_MAX_EVENT_ID = 2**62


def _last_event_id(request: Request) -> int:
    """Where a stream resumes: ``Last-Event-ID`` (what a browser resends; a
    value that is not a number starts from the first event), or ``?after=N``."""
    after = (request.query.get("after") or ["0"])[0]
    if not after.isdigit():
        raise ApiError(400, "bad_request", "after must be an event number (0, 1, ...)")
    header = request.headers.get("last-event-id", "").strip()
    if header:
        after = header if header.isdigit() else "0"
    return min(int(after), _MAX_EVENT_ID)


def openapi(agents: list[str], max_sessions: int = DEFAULT_MAX_SESSIONS) -> dict[str, Any]:
    """The OpenAPI 3.1 document of this API (served at ``/openapi.json``): the
    file ``runner/schemas/openapi.json``, with this server's agents and
    ``--max-sessions`` filled in."""
    text = _openapi_text().replace("{max_sessions}", str(max_sessions))
    document: dict[str, Any] = json.loads(text)
    create = document["components"]["schemas"]["CreateSession"]["properties"]
    create["agent"]["enum"] = list(agents)
    return document


@functools.cache
def _openapi_text() -> str:
    from importlib import resources

    return resources.files("runner").joinpath("schemas/openapi.json").read_text("utf-8")
