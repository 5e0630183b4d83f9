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

import hmac
import json
import re
import time
from typing import Any

import anyio

from .http_server import Request, Response, StreamResponse, error_response, json_response
from .sessions import DEFAULT_MAX_SESSIONS, ApiError, Sessions
from .store.base import FINAL_STATUSES

#: How often a quiet event stream sends a comment line, so proxies keep it open.
KEEPALIVE_SECONDS = 15.0
#: How often a stream reads the database for a session another server runs
#: (PostgreSQL): that server's events do not wake this process.
FOLLOW_ELSEWHERE_SECONDS = 0.5

_SESSION = re.compile(r"^/v1/sessions/(sess_[0-9a-f]{32})(/messages|/events)?$")


class App:
    def __init__(self, sessions: Sessions, *, token: str) -> None:
        self.sessions = sessions
        self._token = f"Bearer {token}".encode()

    def authorized(self, request: Request) -> bool:
        given = request.headers.get("authorization", "").encode("utf-8", "replace")
        return hmac.compare_digest(given, self._token)

    async def __call__(self, request: Request) -> Response | StreamResponse:
        if not self.authorized(request):
            return error_response(
                401, "unauthorized", "send the header Authorization: Bearer $RUNNER_SERVE_TOKEN"
            )
        try:
            return await self._route(request)
        except ApiError as exc:
            return error_response(exc.status, exc.code, exc.message, headers=exc.headers)

    async def _route(self, request: Request) -> Response | StreamResponse:
        method, path = request.method, request.path
        if path == "/openapi.json":
            _allow(method, "GET")
            return json_response(
                200, openapi(sorted(self.sessions.agents), self.sessions.max_sessions)
            )
        if path == "/v1/sessions":
            _allow(method, "GET", "POST")
            if method == "GET":
                rows = self.sessions.store.sessions()
                return json_response(200, {"sessions": [row.public() for row in rows]})
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
                return json_response(200, self.sessions.row(session_id).public())
            row = await self.sessions.close(session_id)
            return json_response(200, row.public())
        if sub == "/messages":
            _allow(method, "POST")
            body = _json(request)
            text = body.get("text") if isinstance(body, dict) else None
            if not isinstance(text, str) or not text or set(body) != {"text"}:
                raise ApiError(400, "bad_request", 'the body must be {"text": "<message>"}')
            turn = await self.sessions.message(session_id, text)
            row = self.sessions.row(session_id)
            return json_response(200, {"id": session_id, "status": row.status, "turn": turn})
        _allow(method, "GET")
        self.sessions.row(session_id)  # 404 before the stream starts
        after = _last_event_id(request)
        return StreamResponse(self._events(session_id, after))

    async def _events(self, session_id: str, after: int) -> Any:
        """Server-sent events: each stored event as ``id: N`` + ``data: {json}``,
        then the live ones, until the session is closed or failed."""
        last = after
        quiet_since = time.monotonic()
        while True:
            changed = self.sessions.changed(session_id)
            for seq, event in self.sessions.store.events(session_id, after=last):
                last = seq
                quiet_since = time.monotonic()
                yield f"id: {seq}\ndata: {json.dumps(event, default=str)}\n\n".encode()
            status = self.sessions.store.status_of(session_id)
            if status is None or status in FINAL_STATUSES:
                if not any(True for _ in self.sessions.store.events(session_id, after=last)):
                    return
                continue
            # Keep-alive on time even when wake-ups bring no new event.
            wait = max(0.0, KEEPALIVE_SECONDS - (time.monotonic() - quiet_since))
            if not self.sessions.runs_here(session_id):
                wait = min(wait, FOLLOW_ELSEWHERE_SECONDS)
            with anyio.move_on_after(wait):
                await changed.wait()
                continue
            if time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                quiet_since = time.monotonic()
                yield b": keep-alive\n\n"


def _allow(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise ApiError(405, "method_not_allowed", f"use {' or '.join(allowed)}")


def _json(request: Request) -> Any:
    from ..config.input_values import json_value

    try:
        return json_value(request.body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_request", f"the body must be JSON: {exc}") from None


def _last_event_id(request: Request) -> int:
    text = request.headers.get("last-event-id") or (request.query.get("after") or ["0"])[0]
    return int(text) if text.isdigit() else 0


def openapi(agents: list[str], max_sessions: int = DEFAULT_MAX_SESSIONS) -> dict[str, Any]:
    """The OpenAPI 3.1 document of this API (served at ``/openapi.json``)."""
    error = {"$ref": "#/components/schemas/Error"}
    session = {"$ref": "#/components/schemas/Session"}

    def answer(description: str, schema: Any, content: str = "application/json") -> dict:
        return {"description": description, "content": {content: {"schema": schema}}}

    def errors(*codes: int) -> dict[str, Any]:
        texts = {
            400: "bad input; the message is the CLI's",
            401: "no or a wrong bearer token",
            404: "no such session",
            409: "idempotency conflict, or the session is not in a state for this",
            413: "the request body is too large",
            503: f"the server already has its limit of {max_sessions} open sessions "
            "(--max-sessions; open: not closed or failed); nothing was created: retry "
            "after the seconds in Retry-After",
        }
        answers = {str(c): answer(texts[c], error) for c in (401, *codes)}
        if "503" in answers:
            answers["503"]["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait before trying again",
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        return answers

    session_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^sess_[0-9a-f]{32}$"},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "runner serve",
            "version": "0.1.0",
            "description": "Sessions of the agents this server serves, over HTTP. Every "
            "request needs Authorization: Bearer $RUNNER_SERVE_TOKEN.",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {
                        "200": answer("the OpenAPI document", {"type": "object"}),
                        **errors(),
                    },
                }
            },
            "/v1/sessions": {
                "post": {
                    "summary": "Create a session (its on_create runs in the background)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/CreateSession"}
                            }
                        },
                    },
                    "responses": {
                        "201": answer(
                            "created, or the session this idempotency key already created "
                            "(then the header Idempotent-Replayed: true)",
                            {"$ref": "#/components/schemas/Created"},
                        ),
                        **errors(400, 409, 413, 503),
                    },
                },
                "get": {
                    "summary": "List the sessions",
                    "responses": {
                        "200": answer(
                            "every session, oldest first",
                            {
                                "type": "object",
                                "properties": {"sessions": {"type": "array", "items": session}},
                            },
                        ),
                        **errors(),
                    },
                },
            },
            "/v1/sessions/{id}": {
                "parameters": [session_id],
                "get": {
                    "summary": "A session's status and result",
                    "responses": {"200": answer("the session", session), **errors(404)},
                },
                "delete": {
                    "summary": "Close the session: every on_destroy, then the sandbox is deleted",
                    "responses": {"200": answer("the closed session", session), **errors(404, 409)},
                },
            },
            "/v1/sessions/{id}/messages": {
                "parameters": [session_id],
                "post": {
                    "summary": "Send a message: runs one turn and answers when it ends",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"text": {"type": "string", "minLength": 1}},
                                    "required": ["text"],
                                    "additionalProperties": False,
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": answer(
                            "the turn's outcome",
                            {
                                "type": "object",
                                "properties": {
                                    "id": {"type": "string"},
                                    "status": {"type": "string"},
                                    "turn": {"$ref": "#/components/schemas/Turn"},
                                },
                            },
                        ),
                        **errors(400, 404, 409, 413),
                    },
                },
            },
            "/v1/sessions/{id}/events": {
                "parameters": [
                    session_id,
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": "Resume after this event (also ?after=N).",
                    },
                ],
                "get": {
                    "summary": "The session's events as server-sent events (`id: N`, `data: "
                    "{json}`), the objects of `runner run --json` (`runner schema --events`); "
                    "the stream ends once the session is closed or failed",
                    "responses": {
                        "200": answer("the event stream", {"type": "string"}, "text/event-stream"),
                        **errors(404),
                    },
                },
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
                    "required": ["error", "message"],
                },
                "CreateSession": {
                    "type": "object",
                    "properties": {
                        "agent": {
                            "enum": agents,
                            "description": "optional when one agent is served",
                        },
                        "inputs": {
                            "type": "object",
                            "description": "input_id: value, as in `runner run --inputs`",
                        },
                        "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 255},
                    },
                    "additionalProperties": False,
                },
                "Created": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "status": {"type": "string"}},
                    "required": ["id", "status"],
                },
                "Turn": {
                    "type": "object",
                    "properties": {
                        "status": {"enum": ["completed", "failed"]},
                        "text": {"type": ["string", "null"]},
                        "error": {"type": ["string", "null"]},
                    },
                },
                "Session": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "agent": {"type": "string"},
                        "status": {
                            "enum": [
                                "starting",
                                "waiting",
                                "running",
                                "closing",
                                "closed",
                                "failed",
                            ]
                        },
                        "inputs": {
                            "type": "object",
                            "description": "as given; a secret input's value is a reference",
                        },
                        "idempotency_key": {"type": ["string", "null"]},
                        "owner": {
                            "type": ["string", "null"],
                            "description": "the address of the server that runs it; with "
                            "several servers on one PostgreSQL database, a message or a "
                            "DELETE sent to another server is answered 409 owned_elsewhere",
                        },
                        "result": {
                            "type": ["object", "null"],
                            "description": "the last turn's outcome",
                        },
                        "error": {
                            "type": ["string", "null"],
                            "description": "why the session failed",
                        },
                        "created_at": {"type": "number"},
                        "updated_at": {"type": "number"},
                    },
                },
            },
        },
    }
