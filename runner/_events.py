"""Progress events: how the lifecycle reports what it does, to whoever listens.

The lifecycle calls :func:`emit`; a listener (the CLI's progress printer, a
test, a user's dashboard) subscribes with :func:`listen` for the duration of a
``with`` block.  Listeners live in a context variable, so concurrent sessions
in different tasks each report to their own listener, and nothing is printed
unless someone listens.

What each event holds is a contract: ``runner/schemas/events.schema.json``
(printed by ``runner schema --events``, loaded by :func:`events_schema`)
lists every kind and every field, closed, and a test fails if an ``emit``
names a kind it does not document.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from typing import Any

Event = dict[str, Any]
Listener = Callable[[Event], None]

_listeners: contextvars.ContextVar[tuple[Listener, ...]] = contextvars.ContextVar(
    "runner_event_listeners", default=()
)


#: Secret strings of the sessions started in this context: every event is
#: scrubbed of them before any listener sees it.
_secrets: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "runner_event_secrets", default=()
)


def add_secrets(strings: Iterable[str]) -> None:
    """Scrub these strings from every event emitted later in this context."""
    new = set(strings) - set(_secrets.get())
    if new:
        merged = sorted({*_secrets.get(), *new}, key=len, reverse=True)
        _secrets.set(tuple(merged))


def scrubbed(value: Any) -> Any:
    """``value`` (an event field) with the context's secrets replaced by ***."""
    secrets = _secrets.get()
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, bytes):  # a file's content, journaled by runner serve
        for secret in secrets:
            value = value.replace(secret.encode(), b"***")
        return value
    if isinstance(value, dict):
        return {k: scrubbed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed(v) for v in value]
    return value


def emit(event: str, /, **fields: Any) -> None:
    """Send one event, scrubbed of secrets, to every listener of the current context."""
    listeners = _listeners.get()
    if not listeners:
        return
    payload: Event = {"event": event, "time": time.time(), **scrubbed(fields)}
    for listener in listeners:
        listener(payload)


@contextlib.contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Call ``listener(event)`` for every event emitted inside the block."""
    token = _listeners.set((*_listeners.get(), listener))
    try:
        yield
    finally:
        _listeners.reset(token)


@functools.cache
def events_schema_text() -> str:
    """The JSON Schema of the events, as shipped in the package (``runner schema --events``)."""
    return resources.files("runner").joinpath("schemas/events.schema.json").read_text("utf-8")


def events_schema() -> dict[str, Any]:
    """The events schema as a dict, for validating a ``--json`` stream with ``jsonschema``."""
    return json.loads(events_schema_text())
