"""The routes (``app``) served by uvicorn, through a thin ASGI adapter.

uvicorn (on h11) frames every message, answers ``Expect: 100-continue``,
sends no body for ``HEAD``, answers 400 to a malformed request and 503
beyond ``--limit-concurrency``, closes idle keep-alive connections, reads
proxy headers from ``--forwarded-allow-ips`` and backs off when ``accept``
runs out of descriptors (asyncio's accept loop: 1 s, then again).  This
module adds the bounds the API had on its own server:

- a request's head may hold at most ``MAX_HEAD_BYTES`` (400 beyond) and must
  arrive within ``--head-timeout`` seconds of its first byte (then the
  connection is closed), so a slow client cannot hold a connection forever;
- a body may hold at most ``max_body_bytes``: a larger ``Content-Length`` is
  refused with 413 before any of it is read, a chunked body is cut off at
  the limit (413); it must arrive within ``BODY_TIMEOUT_SECONDS`` (408);
- ``HEAD`` gets ``GET``'s head, and an event stream is never started for it;
- a handler that raises gets 500 and a log line; nothing stops the server;
- an event stream ends when its client goes away (uvicorn says
  ``http.disconnect``), not at its next keep-alive.

Starlette is not used: the routes are five, already written against
:class:`Request`/:class:`Response`, and this adapter is all they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .http_messages import Handler, Request, Response, StreamResponse, error_response

logger = logging.getLogger("runner.serve.service")

MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_SECONDS = 30.0
BODY_TIMEOUT_SECONDS = 30.0
IDLE_TIMEOUT_SECONDS = 75.0
#: Connections (and requests in progress) beyond this get 503 from uvicorn.
LIMIT_CONCURRENCY = 1000
#: How long a stopping server lets uvicorn close its connections.
SHUTDOWN_GRACE_SECONDS = 2.0

#: Called after each request: method, path, status, seconds, and the
#: client's address (``X-Forwarded-For``'s when the peer is a trusted proxy).
Observer = Callable[[str, str, int, float, str], None]


@dataclass
class HttpSettings:
    """What ``runner serve`` passes to uvicorn."""

    max_body_bytes: int
    limit_concurrency: int | None = LIMIT_CONCURRENCY
    forwarded_allow_ips: str | None = None
    head_timeout: float = HEAD_TIMEOUT_SECONDS
    root_path: str = ""
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None


class AsgiAdapter:
    """An ASGI 3 application around a :data:`Handler`."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body_bytes: int,
        observe: Observer | None = None,
    ) -> None:
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        self.observe = observe

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        started = time.perf_counter()
        status = await self._answer(scope, receive, send)
        if self.observe is not None and status:
            # uvicorn put X-Forwarded-For's address here if the peer is in
            # --forwarded-allow-ips, else the peer's own.
            client = scope.get("client") or ("-", 0)
            seconds = time.perf_counter() - started
            self.observe(scope["method"], _path(scope), status, seconds, str(client[0]))

    async def _answer(self, scope: dict[str, Any], receive: Any, send: Any) -> int:
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        length = headers.get("content-length", "")
        too_large = error_response(
            413, "payload_too_large", f"the request body is larger than {self.max_body_bytes} bytes"
        )
        if length.isdigit() and int(length) > self.max_body_bytes:
            return await _send(send, too_large, close=True)
        body = bytearray()
        try:
            with anyio.fail_after(BODY_TIMEOUT_SECONDS):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return 0
                    body += message.get("body", b"")
                    if len(body) > self.max_body_bytes:
                        return await _send(send, too_large, close=True)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            slow = error_response(
                408, "request_timeout", f"the body did not arrive within {BODY_TIMEOUT_SECONDS:g} s"
            )
            return await _send(send, slow, close=True)
        head = scope["method"] == "HEAD"
        request = Request(
            method="GET" if head else scope["method"],  # HEAD is GET without the body
            path=_path(scope),
            query=parse_qs(
                scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
            ),
            headers=headers,
            body=bytes(body),
        )
        try:
            response = await self.handler(request)
        except Exception as exc:  # a bug in a handler must not kill the server
            logger.error("handler failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
            response = error_response(500, "internal", "internal server error")
        if isinstance(response, Response):
            return await _send(send, response, head=head)
        return await _stream(send, receive, response, head=head)


def _path(scope: dict[str, Any]) -> str:
    """The route's path: uvicorn's ``path`` holds ``--root-path`` in front."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def _head(response: Response | StreamResponse, *, close: bool) -> list[tuple[bytes, bytes]]:
    headers = [
        ("content-type", response.content_type),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
        *response.headers,
    ]
    if isinstance(response, Response):
        headers.append(("content-length", str(len(response.body))))
    if close:
        headers.append(("connection", "close"))
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def _send(send: Any, response: Response, *, close: bool = False, head: bool = False) -> int:
    await send(
        {
            "type": "http.response.start",
            "status": response.status,
            "headers": _head(response, close=close),
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else response.body})
    return response.status


async def _stream(send: Any, receive: Any, response: StreamResponse, *, head: bool) -> int:
    """Send the chunks as they come, until they end or the client goes away."""
    chunks = response.chunks
    try:
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": _head(response, close=False),
            }
        )
        if not head:
            async with anyio.create_task_group() as tg:

                async def until_disconnected() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(until_disconnected)
                async for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                tg.cancel_scope.cancel()
        await send({"type": "http.response.body", "body": b""})
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()
    return response.status


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on a request's head, which
    uvicorn does not have: a connection that sends part of a head and then
    trickles (or nothing) is closed ``head_timeout`` seconds after the head's
    first byte; one that sends nothing at all, after the keep-alive timeout."""

    #: ``--head-timeout`` (set on the subclass ``http_server`` makes).
    head_timeout = HEAD_TIMEOUT_SECONDS
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is None and self.conn.their_state is h11.IDLE:
            self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)
        super().data_received(data)
        if self._head_deadline is not None and self.conn.their_state is not h11.IDLE:
            self._head_deadline.cancel()
            self._head_deadline = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None
        super().connection_lost(exc)

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            logger.info("closed a connection: its head took over %g s", self.head_timeout)
            self.transport.close()


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: SIGTERM and SIGINT are the
    service's (a drain first, then ``should_exit``)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def http_server(app: AsgiAdapter, settings: HttpSettings) -> uvicorn.Server:
    protocol = type("_Protocol", (_Protocol,), {"head_timeout": settings.head_timeout})
    config = uvicorn.Config(
        app,
        http=protocol,
        ws="none",
        lifespan="off",
        interface="asgi3",
        log_config=None,
        access_log=False,
        server_header=False,
        limit_concurrency=settings.limit_concurrency,
        timeout_keep_alive=int(IDLE_TIMEOUT_SECONDS),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        root_path=settings.root_path,
        ssl_certfile=settings.ssl_certfile,
        ssl_keyfile=settings.ssl_keyfile,
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS),
    )
    return _Server(config)


def log_loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's errors in the server's words; running out of
    descriptors on ``accept`` is a pause (asyncio retries in 1 s), not an end."""
    if context.get("message") == "socket.accept() out of system resource":
        logger.warning("cannot accept a connection (%s); retrying in 1 s", context.get("exception"))
        return
    loop.default_exception_handler(context)


async def serve_http(server: uvicorn.Server, sockets: list[Any], stopped: anyio.Event) -> None:
    """Serve on ``sockets`` (already bound and listening) until ``should_exit``."""
    asyncio.get_running_loop().set_exception_handler(log_loop_errors)
    try:
        await server.serve(sockets=sockets)
    finally:
        stopped.set()


async def stop_http(server: uvicorn.Server, stopped: anyio.Event) -> None:
    """Stop accepting and close the connections (event streams too), for at
    most ``SHUTDOWN_GRACE_SECONDS``."""
    server.should_exit = True
    server.force_exit = True  # no waiting for event streams: they would wait for their sessions
    with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS):
        await stopped.wait()
