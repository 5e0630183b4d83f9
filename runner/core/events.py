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

from .redaction import masked

Event = dict[str, Any]
Listener = Callable[[Event], None]

_listeners: contextvars.ContextVar[tuple[Listener, ...]] = contextvars.ContextVar(
    "runner_event_listeners", default=()
)


#: Secret strings of the sessions started in this context, longest first: every
#: event is scrubbed of them before any listener sees it.
_secrets: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "runner_event_secrets", default=()
)


class _Derived:
    """What scrubbing needs besides the tuple of secrets: a set to tell a new
    secret in constant time, and the byte forms of those that are not UTF-8."""

    __slots__ = ("byte_forms", "members", "secrets")

    def __init__(
        self,
        secrets: tuple[str, ...],
        members: frozenset[str] | None = None,
        byte_forms: list[bytes] | None = None,
    ) -> None:
        from ..core.redaction import secret_bytes_forms

        self.secrets = secrets
        self.members = frozenset(secrets) if members is None else members
        self.byte_forms = secret_bytes_forms(secrets) if byte_forms is None else byte_forms


#: The derived data of the last few tuples, found by identity: sessions of one
#: process share it, and a tuple is never changed, only replaced.
_derived_cache: list[_Derived] = []


def _derived(secrets: tuple[str, ...]) -> _Derived:
    for derived in _derived_cache:
        if derived.secrets is secrets:
            return derived
    return _remember(_Derived(secrets))


def _remember(derived: _Derived) -> _Derived:
    _derived_cache.insert(0, derived)
    del _derived_cache[8:]
    return derived


def add_secrets(strings: Iterable[str]) -> None:
    """Scrub these strings from every event emitted later in this context.

    Cheap when nothing is new (a set lookup per string), and linear in the
    secrets already known when something is: the runner adds the words it
    rendered from secret inputs at every render.
    """
    current = _secrets.get()
    derived = _derived(current)
    new = {s for s in strings if s not in derived.members}
    if new:
        from ..core.redaction import secret_bytes_forms

        # Two runs already in order: the sort merges them in linear time (and,
        # stable, keeps a known secret before a new one of the same length).
        merged = tuple(sorted((*current, *sorted(new)), key=len, reverse=True))
        byte_forms = sorted({*derived.byte_forms, *secret_bytes_forms(new)}, key=len, reverse=True)
        _remember(_Derived(merged, derived.members | new, byte_forms))
        _secrets.set(merged)


def scrubbed(value: Any) -> Any:
    """``value`` (an event field) with the context's secrets replaced by ***."""
    secrets = _secrets.get()
    if not secrets:
        return value
    if isinstance(value, str):
        return masked(value, secrets, "***")
    if isinstance(value, bytes):  # a file's content, journaled by runner serve
        from ..core.redaction import _original_bytes

        return masked(value, map(_original_bytes, secrets), b"***")
    if isinstance(value, dict):
        return {k: scrubbed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed(v) for v in value]
    return value


def decode_output(data: bytes) -> str:
    """A command's output as text (UTF-8, undecodable bytes as U+FFFD), with
    the bytes of every secret of this context that is not UTF-8 replaced by
    *** first: decoding would turn them into U+FFFD, which no form matches.
    (A UTF-8 secret decodes unchanged and is scrubbed from the text wherever
    the runner shows it.)"""
    secrets = _secrets.get()
    if secrets:
        data = masked(data, _derived(secrets).byte_forms, b"***")
    return data.decode("utf-8", errors="replace")


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
