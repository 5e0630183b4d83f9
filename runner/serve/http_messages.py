"""The request and the responses the routes (``app``) deal in, whatever
serves them (``asgi``: uvicorn): plain data, no framing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class StreamResponse:
    chunks: AsyncIterator[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[Request], Awaitable[Response | StreamResponse]]


def json_response(
    status: int, payload: Any, *, headers: list[tuple[str, str]] | None = None
) -> Response:
    body = (json.dumps(payload) + "\n").encode("utf-8")  # a newline ends curl's output
    return Response(status, body, headers=headers or [])


def error_response(
    status: int, error: str, message: str, *, headers: list[tuple[str, str]] | None = None
) -> Response:
    """The one error shape of the API: ``{"error": code, "message": text}``."""
    extra = [("www-authenticate", "Bearer")] if status == 401 else []
    return json_response(
        status, {"error": error, "message": message}, headers=[*extra, *(headers or [])]
    )
