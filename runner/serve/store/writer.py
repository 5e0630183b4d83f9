"""The store's writer: one thread that commits every write, in order, as
many per transaction as were queued (group commit).

Why a thread and not async psycopg: the store has two engines (the
standard library's ``sqlite3`` has no async driver) and callers that cannot
await (the session's event listener, ``runner.now()``).  One thread, on a
connection of its own, serves both engines and both kinds of caller, keeps
commits (and PostgreSQL's fsync) off the event loop, and lets the writes of
every session in flight share commits: what was queued while one commit
ran goes into the next.  See docs/serve-design.md, "Writes: one writer,
group commit".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import StoreError

logger = logging.getLogger("runner.serve.store")

#: The longest an event waits for a durable write to commit with (then it
#: commits alone): how late, at most, a client following a session sees it.
EVENT_LINGER_SECONDS = 0.05

#: One statement: SQL with ``?`` placeholders, and its arguments.
Statement = tuple[str, tuple[Any, ...]]


@dataclass
class _Write:
    statements: list[Statement]
    session_id: str | None
    #: None for an event: nobody waits for it.
    future: concurrent.futures.Future[int] | None = field(default=None)


class Writer:
    """The store's writer thread: it commits what was queued, oldest first,
    as many writes per transaction as were waiting (group commit).

    A batch holding only events waits up to ``EVENT_LINGER_SECONDS`` for a
    durable write to share its commit (a step's events and its record).  If a
    batch fails, each of its writes runs again alone, so the error reaches
    the caller whose write caused it; an event that cannot be written is
    logged, and the next durable write of its session fails with its error.
    """

    def __init__(
        self,
        commit: Callable[[list[list[Statement]], set[str]], list[int]],
        on_commit: Callable[[], Callable[[set[str]], None] | None],
    ) -> None:
        #: Runs a batch in one transaction on the writer's connection (the store's ``_commit``).
        self._commit = commit
        #: The store's ``on_commit`` as it is now (the server sets it after the store opens).
        self._on_commit = on_commit
        self.queue: list[_Write] = []
        self.ready = threading.Condition()
        self.stopping = False
        self.failed: dict[str, BaseException] = {}
        self.thread = threading.Thread(target=self.run, name="runner-serve-writer", daemon=True)
        self.thread.start()

    def submit(
        self, statements: list[Statement], session_id: str | None, *, wait: bool = True
    ) -> concurrent.futures.Future[int]:
        future: concurrent.futures.Future[int] = concurrent.futures.Future()
        with self.ready:
            if self.stopping:
                raise StoreError("the database is closed")
            if wait and session_id in self.failed:
                future.set_exception(self.failed.pop(session_id))  # type: ignore[arg-type]
                return future
            self.queue.append(_Write(statements, session_id, future if wait else None))
            self.ready.notify()
        if not wait:
            future.set_result(0)
        return future

    def stop(self) -> None:
        """Commit what is queued, then end the thread."""
        with self.ready:
            self.stopping = True
            self.ready.notify()
        self.thread.join()

    def run(self) -> None:
        while True:
            with self.ready:
                while not self.queue and not self.stopping:
                    self.ready.wait()
                if not self.queue:
                    return
                deadline = time.monotonic() + EVENT_LINGER_SECONDS
                while not self.stopping and all(w.future is None for w in self.queue):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.ready.wait(left)
                batch, self.queue = self.queue, []
            self.commit(batch)

    def commit(self, batch: list[_Write]) -> None:
        try:
            results = self._commit(
                [w.statements for w in batch], {w.session_id for w in batch if w.session_id}
            )
        except BaseException as exc:
            if len(batch) > 1:
                for write in batch:  # the writes that can commit do; the error finds its own
                    self.commit([write])
                return
            (write,) = batch
            if write.future is not None:
                write.future.set_exception(exc)
            elif write.session_id is not None:
                logger.error("session %s: an event could not be stored: %s", write.session_id, exc)
                with self.ready:
                    self.failed[write.session_id] = exc
            return
        for write, changed in zip(batch, results, strict=True):
            if write.future is not None:
                write.future.set_result(changed)
        committed = {w.session_id for w in batch if w.session_id and w.statements}
        wake = self._on_commit()
        if committed and wake is not None:
            try:
                wake(committed)
            except Exception:  # a stopping server's loop: nobody to wake
                logger.debug("on_commit failed", exc_info=True)


async def awaited(future: concurrent.futures.Future[int]) -> int:
    """Wait for the writer's answer without blocking the event loop."""
    return await asyncio.wrap_future(future)
