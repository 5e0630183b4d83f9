"""A chat-completions server on 127.0.0.1 that replays scripted responses.

It speaks the real protocol over real HTTP (``POST /v1/chat/completions``),
so the runner's HTTP client, retries and timeouts are exercised end to end;
only the model behind it is scripted.  Every request (path, headers, JSON
body) is recorded for the tests to assert.

Every request is checked three ways, and one that fails any of them is
refused (HTTP 400, Mistral's error shape) as the strictest server would:

* ``request_problem``: the OpenAI chat-completions request shape, with the
  ``openai`` package's own typed request parameters
  (``CompletionCreateParamsNonStreaming``, validated by pydantic) plus no
  top-level field those parameters do not declare (the API refuses an
  unrecognized argument; extra keys inside messages are not checked, as the
  typed parameters ignore them);
* ``mistral_problem``: ``mistral-common``'s own request validator (Mistral's
  package; ``MistralRequestValidatorV11`` in serving mode: nine-character
  tool-call ids, calls and results paired by id, valid tool schemas, the
  last message from the user or a tool);
* ``conversation_problem``: rules written here by hand from older
  ``mistral-common`` versions and the Mistral API's answers, that the current
  validator no longer checks: an assistant message with neither content nor
  tool calls, arguments that are no JSON object, a tool message followed by a
  user message.

``strict=False`` turns all three off.
"""

from __future__ import annotations

import json
import re
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


def assistant(
    text: str | None = None,
    *calls: tuple[str, str, Any],
    finish_reason: str | None = None,
    refusal: str | None = None,
) -> Reply:
    """A completion whose message has ``text`` and tool calls ``(id, name, arguments)``.

    ``finish_reason`` defaults to what a complete reply says; ``refusal`` is
    OpenAI's refusal field.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if refusal is not None:
        message["refusal"] = refusal
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
                    "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                }
            ],
        }
    )


def error(status: int, message: str = "scripted failure", **headers: str) -> Reply:
    return Reply({"error": {"message": message}}, status=status, headers=headers)


CALL_ID = re.compile(r"[a-zA-Z0-9]{9}")
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def conversation_problem(messages: list[dict[str, Any]]) -> str | None:
    """What Mistral would refuse in ``messages`` (None: nothing)."""
    pending: list[str] = []  # ids of the last assistant message not yet answered
    seen: set[str] = set()
    previous = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if pending and role != "tool":
            return f"Not the same number of function calls and responses (message {index})"
        if previous == "tool" and role not in ("tool", "assistant"):
            return f"Unexpected role '{role}' after role 'tool' (message {index})"
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not message.get("content") and not calls:
                return "Assistant message must have either content or tool_calls, but not none."
            for call in calls:
                call_id = call.get("id", "")
                if not CALL_ID.fullmatch(call_id):
                    return (
                        f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
                    )
                if call_id in seen:
                    return f"Tool call id {call_id} is used twice"
                seen.add(call_id)
                function = call.get("function") or {}
                if not FUNCTION_NAME.fullmatch(function.get("name", "")):
                    return f"Function name was {function.get('name')!r} but must match a-zA-Z0-9_-"
                try:
                    arguments = json.loads(function.get("arguments", ""))
                except ValueError:
                    return f"Function arguments are not valid JSON: {function.get('arguments')!r}"
                if not isinstance(arguments, dict):
                    return "Function arguments must be a JSON object"
                pending.append(call_id)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return f"Tool message answers no pending tool call ({call_id!r})"
            pending.remove(call_id)
        elif role not in ("system", "user"):
            return f"Unknown role {role!r}"
        previous = role
    if pending:
        return "Not the same number of function calls and responses"
    if previous not in ("user", "tool"):
        return f"Expected last role User or Tool but got {previous}"
    return None


def _telling_error(errors: list[Any]) -> Any:
    """The error of the union member the request meant (the one whose ``role``
    or ``type`` matched), else the first."""
    missed = {
        error["loc"][:-1]
        for error in errors
        if error["type"] == "literal_error" and error["loc"][-1:] in (("role",), ("type",))
    }
    meant = [e for e in errors if not any(e["loc"][: len(m)] == m for m in missed)]
    return (meant or errors)[0]


class _ShapeError(Exception):
    """A request part that does not have the OpenAI shape (its dotted place, what)."""


def _consume(value: Any, path: tuple[Any, ...] = ()) -> Any:
    """``value`` with every lazy iterator pydantic made drained into a list.

    The typed parameters declare their lists as ``Iterable[...]``, which
    pydantic validates only while they are iterated; an item refused then is
    a ``_ShapeError`` naming its place in the request."""
    from pydantic import ValidationError

    if isinstance(value, dict):
        return {key: _consume(item, (*path, key)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_consume(item, (*path, index)) for index, item in enumerate(value)]
    if not hasattr(value, "__next__"):
        return value
    items = []
    while True:
        try:
            item = next(value)
        except StopIteration:
            return items
        except ValidationError as exc:
            first = _telling_error(exc.errors())
            where = ".".join(str(part) for part in (*path, *first["loc"]))
            raise _ShapeError(f"{where}: {first['msg']} ({exc.error_count()} errors)") from None
        items.append(_consume(item, (*path, len(items))))


_ADAPTERS: dict[str, Any] = {}


def request_problem(body: Any) -> str | None:
    """What the OpenAI request shape refuses in ``body`` (None: nothing)."""
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from pydantic import TypeAdapter, ValidationError

    if not isinstance(body, dict):
        return "openai: the request body is not a JSON object"
    params = CompletionCreateParamsNonStreaming
    declared = params.__required_keys__ | params.__optional_keys__
    unknown = sorted(set(body) - declared)
    if unknown:
        return f"openai: Unrecognized request argument supplied: {', '.join(unknown)}"
    if _ADAPTERS.get("openai") is None:
        _ADAPTERS["openai"] = TypeAdapter(params)
    try:
        _consume(_ADAPTERS["openai"].validate_python(body))
    except ValidationError as exc:
        first = _telling_error(exc.errors())
        where = ".".join(str(part) for part in first["loc"])
        return f"openai: {where}: {first['msg']} ({exc.error_count()} errors)"
    except _ShapeError as exc:
        return f"openai: {exc}"
    return None


def mistral_problem(body: Any) -> str | None:
    """What ``mistral-common``'s request validator refuses in ``body`` (None: nothing)."""
    from mistral_common.exceptions import MistralCommonException
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.validator import (
        MistralRequestValidatorV11,
        ValidationMode,
    )
    from pydantic import ValidationError

    if not isinstance(body, dict):
        return "mistral-common: the request body is not a JSON object"
    try:
        request = ChatCompletionRequest.from_openai(
            messages=body.get("messages") or [],
            tools=body.get("tools"),
            model=body.get("model"),
            tool_choice=body.get("tool_choice", "auto"),
        )
        MistralRequestValidatorV11(mode=ValidationMode.serving).validate_request(request)
    except (MistralCommonException, ValidationError, ValueError, KeyError, TypeError) as exc:
        text = " ".join(str(exc).split())
        return f"mistral-common: {type(exc).__name__}: {text[:300]}"
    return None


def invalid_request(message: str) -> Reply:
    """Mistral's answer to a request its validator refuses."""
    return Reply(
        {"object": "error", "message": message, "type": "invalid_request_message_order"},
        status=400,
    )


class ChatServer:
    """Use as a context manager; ``url`` is the API root to give a client."""

    def __init__(self, replies: list[Reply], *, strict: bool = True) -> None:
        self.replies = list(replies)
        self.strict = strict
        self.requests: list[dict[str, Any]] = []
        #: Why each refused request was refused (one of the three checks).
        self.refusals: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw or b"null")
                problem = None
                if server.strict:
                    problem = (
                        request_problem(body)
                        or mistral_problem(body)
                        or conversation_problem(body.get("messages") or [])
                    )
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body,
                        }
                    )
                    if problem:
                        server.refusals.append(problem)
                        reply = invalid_request(problem)
                    elif server.replies:
                        reply = server.replies.pop(0)
                    else:
                        reply = error(500, "no reply left")
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
