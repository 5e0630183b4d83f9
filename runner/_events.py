"""Progress events: how the lifecycle reports what it does, to whoever listens.

The lifecycle calls :func:`emit`; a listener (the CLI's progress printer, a
test, a user's dashboard) subscribes with :func:`listen` for the duration of a
``with`` block.  Listeners live in a context variable, so concurrent sessions
in different tasks each report to their own listener, and nothing is printed
unless someone listens.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from typing import Any

Event = dict[str, Any]
Listener = Callable[[Event], None]

_listeners: contextvars.ContextVar[tuple[Listener, ...]] = contextvars.ContextVar(
    "runner_event_listeners", default=()
)


def emit(event: str, /, **fields: Any) -> None:
    """Send one event to every listener of the current context."""
    listeners = _listeners.get()
    if not listeners:
        return
    payload: Event = {"event": event, "time": time.time(), **fields}
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
