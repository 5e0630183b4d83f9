"""A small HTTP/1.1 server on anyio and h11, for ``runner serve``.

h11 (the protocol engine under httpx, so already installed with the runner)
parses and frames every message; this module only moves bytes and applies
the server's bounds:

- a request's head may hold at most ``MAX_HEAD_BYTES`` (h11 answers 431
  beyond that, as far as the head can be parsed at all: we answer 400);
- a request body may hold at most ``max_body_bytes``: a larger
  ``Content-Length`` is refused with 413 before any of the body is read, and
  a chunked body is cut off at the limit (413);
- a request must arrive within ``REQUEST_TIMEOUT_SECONDS`` of its first byte
  and an idle keep-alive connection is closed after ``IDLE_TIMEOUT_SECONDS``,
  so slow clients cannot hold connections forever;
- no request, however malformed, and no connection's failure stops the
  server: a connection that fails in any way is logged and closed alone
  (one unauthenticated ``HEAD`` used to end the whole server: a body was
  written for it), and running out of file descriptors on ``accept`` backs
  off and retries instead of ending the accept loop.

Handlers get a :class:`Request` and return a :class:`Response` or a
:class:`StreamResponse` (server-sent events: chunks sent as they come).
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import h11

logger = logging.getLogger("runner.serve.service")

MAX_HEAD_BYTES = 16 * 1024
REQUEST_TIMEOUT_SECONDS = 30.0
IDLE_TIMEOUT_SECONDS = 75.0
_READ_SIZE = 64 * 1024


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


class _TooLarge(Exception):
    pass


async def serve_connection(
    stream: anyio.abc.ByteStream, handler: Handler, *, max_body_bytes: int
) -> None:
    """Answer requests on one connection until either side closes it."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    try:
        while True:
            try:
                request = await _read_request(conn, stream, max_body_bytes=max_body_bytes)
            except _TooLarge:
                await _send(
                    conn,
                    stream,
                    error_response(
                        413,
                        "payload_too_large",
                        f"the request body is larger than {max_body_bytes} bytes",
                    ),
                    close=True,
                )
                return
            except (h11.RemoteProtocolError, UnicodeDecodeError) as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await _send(
                        conn,
                        stream,
                        error_response(400, "bad_request", f"malformed HTTP request: {exc}"),
                        close=True,
                    )
                return
            if request is None:
                return
            head = request.method == "HEAD"
            try:  # HEAD is GET without the body (RFC 9110 9.3.2)
                response = await handler(replace(request, method="GET") if head else request)
            except Exception as exc:  # a bug in a handler must not kill the server
                logger.error("handler failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
                response = error_response(500, "internal", "internal server error")
            keep = await _send(conn, stream, response, close=False, head=head)
            if not keep or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
        return
    except TimeoutError:
        return
    except Exception as exc:  # this connection only: the server goes on
        logger.warning("connection closed after %s: %s", type(exc).__name__, exc)
        return
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()


async def _next_event(conn: h11.Connection, stream: anyio.abc.ByteStream) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            data = await stream.receive(_READ_SIZE)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            data = b""
        conn.receive_data(data)


async def _read_request(
    conn: h11.Connection, stream: anyio.abc.ByteStream, *, max_body_bytes: int
) -> Request | None:
    with anyio.fail_after(IDLE_TIMEOUT_SECONDS):
        event = await _next_event(conn, stream)
    if isinstance(event, h11.ConnectionClosed):
        return None
    if not isinstance(event, h11.Request):
        raise h11.RemoteProtocolError("expected a request")
    headers = {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers
    }
    length = headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body_bytes:
        raise _TooLarge
    if conn.they_are_waiting_for_100_continue:  # Expect: 100-continue (curl, for big bodies)
        await stream.send(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
    body = bytearray()
    with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
        while True:
            part = await _next_event(conn, stream)
            if isinstance(part, h11.Data):
                body += part.data
                if len(body) > max_body_bytes:
                    raise _TooLarge
            elif isinstance(part, h11.EndOfMessage):
                break
            else:
                raise h11.RemoteProtocolError("the request ended early")
    target = urlsplit(event.target.decode("ascii"))
    return Request(
        method=event.method.decode("ascii").upper(),
        path=target.path,
        query=parse_qs(target.query),
        headers=headers,
        body=bytes(body),
    )


async def _send(
    conn: h11.Connection,
    stream: anyio.abc.ByteStream,
    response: Response | StreamResponse,
    *,
    close: bool,
    head: bool = False,
) -> bool:
    """Send ``response`` (for a ``HEAD`` request, its head only: the same
    headers a ``GET`` gets, no body); return whether the connection may
    carry another request."""
    headers = [
        ("content-type", response.content_type),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
        *response.headers,
    ]
    if close:
        headers.append(("connection", "close"))
    if isinstance(response, Response):
        headers.append(("content-length", str(len(response.body))))
    await stream.send(conn.send(h11.Response(status_code=response.status, headers=headers)))
    if isinstance(response, Response):
        if response.body and not head:
            await stream.send(conn.send(h11.Data(data=response.body)))
    else:
        try:
            if not head:
                async for chunk in response.chunks:
                    await stream.send(conn.send(h11.Data(data=chunk)))
        finally:
            aclose = getattr(response.chunks, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
    await stream.send(conn.send(h11.EndOfMessage()))
    return not close


#: How long the accept loop waits when the process is out of file
#: descriptors (or the kernel of buffers) before it accepts again.
ACCEPT_BACKOFF_SECONDS = 0.1
_ACCEPT_SHORTAGES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


async def serve_forever(
    listener: anyio.abc.Listener[Any], handler: Handler, max_body_bytes: int
) -> None:
    """Accept connections until cancelled, each served in a task of its own
    (on every socket of a ``MultiListener``); a shortage of descriptors or
    memory pauses accepting, never ends it."""
    sockets = getattr(listener, "listeners", [listener])
    async with anyio.create_task_group() as connections:
        for one in sockets:
            connections.start_soon(_accept_loop, one, connections, handler, max_body_bytes)


async def _accept_loop(
    listener: Any, connections: anyio.abc.TaskGroup, handler: Handler, max_body_bytes: int
) -> None:
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _ACCEPT_SHORTAGES:
                raise
            logger.warning("cannot accept a connection (%s); retrying", exc)
            await anyio.sleep(ACCEPT_BACKOFF_SECONDS)
            continue
        connections.start_soon(
            partial(serve_connection, stream, handler, max_body_bytes=max_body_bytes)
        )
