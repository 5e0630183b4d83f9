"""Models over HTTP: the chat-completions protocol, spoken by Mistral and by
OpenAI-compatible servers (vLLM, llama.cpp, Ollama, ...).

One request per model call: ``POST {base_url}/chat/completions`` with the
conversation and the tool specifications; the first choice's message is the
reply.  ``httpx`` is imported on first use.

What is retried (exponential backoff, ``Retry-After`` honoured within a cap):
timeouts, dropped or refused connections, and the answers that say "try
again": 408, 409, 429, 502, 503 and 504.  A 500 is retried too, unless its
body says the error is permanent (``PERMANENT_HINTS``: llama.cpp without
``--jinja`` answers 500 "tools param requires --jinja flag" to every request
with tools).  Everything else fails at once with a ``ModelError`` that says
what the server answered: every other 4xx (a bad key, a bad request, an
unknown model), every other 5xx (501 Not Implemented, 505, ...) and a
redirect (``base_url`` should name the final address).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

import anyio

from ..core.errors import AgentsError
from .protocol import Message, ModelReply, ToolCall

MISTRAL_SERVER_URL = "https://api.mistral.ai/v1"
#: Answers that mean "try again later" (408 timeout, 409 conflict, 429 rate
#: limit, 502/503/504 gateway and overload); a 500 is retried unless permanent.
RETRYABLE_STATUS = frozenset({408, 409, 429, 502, 503, 504})
#: Words in a 500 answer that mark the error as permanent: the same request
#: would fail the same way (a server feature not enabled or not supported).
PERMANENT_HINTS = re.compile(
    r"requires? --|not supported|unsupported|not implemented|does not support",
    re.IGNORECASE,
)
#: Advice added to an error whose text contains the key.
ERROR_ADVICE = {
    "--jinja": "start llama.cpp's llama-server with --jinja to use tools",
}
MAX_RETRY_AFTER_SECONDS = 30.0


class ModelError(AgentsError):
    """The model endpoint failed (after retries) or answered something unusable."""


class MissingCredentialsError(AgentsError):
    """A model needs an API key that is not set; raised before any sandbox exists."""


class ChatCompletionsModel:
    """A ``Model`` that calls a chat-completions endpoint.

    ``base_url`` is the API root (``.../v1``).  ``api_key``, if given, is sent
    as ``Authorization: Bearer``; it never appears in errors or reprs.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout_seconds: float = 120.0,
        max_retries: int = 3,
        backoff_seconds: float = 0.5,
        unreachable_hint: str = "is the server running, and base_url its address?",
    ) -> None:
        self.model = model
        #: What to set when no attempt could connect (offline, a server not
        #: started): said at the end of the error, so the one line a CLI
        #: user sees names the fix.
        self.unreachable_hint = unreachable_hint
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        return f"ChatCompletionsModel({self.model!r}, base_url={self.base_url!r}{key})"

    def request_body(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = "auto"
        return body

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelReply:
        import httpx

        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = f"{self.base_url}/chat/completions"
        body = self.request_body(messages, tools)
        last_problem = ""
        connected = False  # some attempt got through (an answer, or a timeout)
        # One client per call: the agent may be used from several event loops.
        async with httpx.AsyncClient(timeout=self.timeout_seconds) as client:
            for attempt in range(self.max_retries + 1):
                delay = self.backoff_seconds * (2**attempt)
                try:
                    # httpx's timeout is per read: a server trickling bytes
                    # would never trip it, so the whole request has a deadline.
                    with anyio.fail_after(self.timeout_seconds):
                        response = await client.post(url, json=body, headers=headers)
                except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                    last_problem = f"connection failed: {type(exc).__name__}"
                except (httpx.TimeoutException, TimeoutError):
                    last_problem = f"no answer within {self.timeout_seconds:g}s"
                    connected = True
                except httpx.TransportError as exc:
                    last_problem = f"connection failed: {type(exc).__name__}"
                    connected = True
                else:
                    connected = True
                    status = response.status_code
                    if status < 300:
                        return parse_reply(response)
                    if status < 400:
                        location = response.headers.get("Location") or "nowhere"
                        raise ModelError(
                            f"{url} answered HTTP {status}, a redirect to {location}: "
                            "set base_url to the final address (redirects are not followed)"
                        )
                    last_problem = f"HTTP {status}: {_snippet(response.text)}"
                    if not is_retryable(status, response.text):
                        raise ModelError(f"{url} answered {last_problem}{_advice(response.text)}")
                    delay = _retry_after(response, default=delay)
                if attempt < self.max_retries:
                    await anyio.sleep(delay)
        attempts = f"after {self.max_retries + 1} attempts"
        if not connected:  # offline, or nothing listens there: say what to set
            raise ModelError(
                f"cannot reach the model at {url} ({last_problem}, {attempts}); "
                f"{self.unreachable_hint}"
            )
        raise ModelError(f"{url}: {last_problem} ({attempts})")


def is_retryable(status: int, body: str) -> bool:
    """Whether an HTTP error answer may succeed if asked again (see the module doc)."""
    if status == 500:
        return not PERMANENT_HINTS.search(body)
    return status in RETRYABLE_STATUS


def _advice(body: str) -> str:
    """What to do about a known permanent error (empty if none is known)."""
    hints = [advice for key, advice in ERROR_ADVICE.items() if key in body]
    return f" ({'; '.join(hints)})" if hints else ""


def _snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after(response: Any, *, default: float) -> float:
    try:
        value = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return default
    return max(0.0, min(value, MAX_RETRY_AFTER_SECONDS))


def parse_reply(response: Any) -> ModelReply:
    """The first choice's message as a ``ModelReply``; a malformed body is a ModelError.

    Tool-call ids are kept as sent (an absent one is empty): the turn replaces
    any id that could not be sent back, so servers need not agree on a format.
    """
    try:
        payload = response.json()
        choice = payload["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError(f"unexpected response: {_snippet(response.text)}") from None
    if not isinstance(message, dict):
        raise ModelError(f"the reply has no message (got {message!r}): {_snippet(response.text)}")
    content = message.get("content") or ""
    if isinstance(content, list):  # content chunks: keep the text ones (not "thinking")
        content = "".join(
            chunk.get("text", "")
            for chunk in content
            if isinstance(chunk, dict) and chunk.get("type", "text") == "text"
        )
    calls = []
    for raw in message.get("tool_calls") or []:
        if not isinstance(raw, dict):
            raise ModelError(f"a tool call is not an object: {_snippet(response.text)}")
        function = raw.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(
                id=str(raw.get("id") or ""),
                name=str(function.get("name") or ""),
                arguments=arguments,
            )
        )
    finish_reason = choice.get("finish_reason") if isinstance(choice, dict) else None
    refusal = message.get("refusal")
    return ModelReply(
        text=str(content),
        tool_calls=tuple(calls),
        finish_reason=str(finish_reason) if finish_reason else None,
        refusal=str(refusal) if refusal else None,
    )


def model_for(
    name: str,
    *,
    base_url: str | None,
    timeout_seconds: float = 120.0,
    max_retries: int = 3,
) -> ChatCompletionsModel:
    """The HTTP model an agent's model *name* means.

    With ``base_url``: an OpenAI-compatible endpoint; ``OPENAI_API_KEY`` is
    sent if set.  Without: the Mistral API, with ``MISTRAL_API_KEY``
    (required) at ``MISTRAL_SERVER_URL`` (default the public API).
    ``timeout_seconds`` bounds each request; ``max_retries`` counts the
    retries of an answer that may succeed if asked again (``is_retryable``),
    a timeout or a dropped connection.
    """
    limits: dict[str, Any] = {"timeout_seconds": timeout_seconds, "max_retries": max_retries}
    if base_url:
        return ChatCompletionsModel(
            name,
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY"),
            unreachable_hint="start the server, or set the agent's base_url to where it runs",
            **limits,
        )
    api_key = os.environ.get("MISTRAL_API_KEY")
    if not api_key:
        raise MissingCredentialsError(
            f"model {name!r} runs on the Mistral API, which needs MISTRAL_API_KEY; set it, "
            "or give the agent a base_url for an OpenAI-compatible server"
        )
    server = os.environ.get("MISTRAL_SERVER_URL") or MISTRAL_SERVER_URL
    hint = (
        "check the network (offline?), or set the agent's base_url to a reachable "
        "OpenAI-compatible server (MISTRAL_SERVER_URL for another Mistral API address)"
    )
    return ChatCompletionsModel(
        name, base_url=server, api_key=api_key, unreachable_hint=hint, **limits
    )
