"""A chat-completions server on 127.0.0.1 that replays scripted responses.

It speaks the real protocol over real HTTP (``POST /v1/chat/completions``),
so the runner's HTTP client, retries and timeouts are exercised end to end;
only the model behind it is scripted.  Every request (path, headers, JSON
body) is recorded for the tests to assert.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP answer: a status, a JSON body and headers, after a delay."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    #: Seconds between body bytes: a server that answers, but ever so slowly.
    trickle_seconds: float = 0.0


def assistant(text: str | None = None, *calls: tuple[str, str, Any]) -> Reply:
    """A completion whose message has ``text`` and tool calls ``(id, name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for call_id, name, arguments in calls
        ]
    return Reply(
        {
            "id": "cmpl-test",
            "object": "chat.completion",
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
        }
    )


def error(status: int, message: str = "scripted failure", **headers: str) -> Reply:
    return Reply({"error": {"message": message}}, status=status, headers=headers)


class ChatServer:
    """Use as a context manager; ``url`` is the API root to give a client."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": json.loads(raw or b"null"),
                        }
                    )
                    reply = server.replies.pop(0) if server.replies else error(500, "no reply left")
                time.sleep(reply.delay_seconds)
                payload = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if reply.trickle_seconds:
                        for byte in payload:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(reply.trickle_seconds)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
