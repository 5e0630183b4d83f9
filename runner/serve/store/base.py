"""The server's journal: sessions, their events and finished steps.

Two engines behind one set of queries (:class:`Store`): a SQLite file
(``sqlite.SqliteStore``; ``--db FILE``, default ``runner-serve.db`` in the
output folder), opened in WAL mode, zero set-up, one server; or a PostgreSQL
database that several servers share (``--db postgresql://...``, ``postgres``).
This module is the store's logic: which statements run, when, and how the
caller waits for them.  The SQL is apart: the tables in ``schema``, the
queries and writes in ``statements``.  The server imports what it needs of
the store from here (:class:`Store`, :class:`SessionRow`, the statuses,
:class:`StoreError`).

Writes go through one writer thread per store (``writer.Writer``), on a connection
of its own, so the event loop never waits for a commit's fsync and the
writes of every session in flight share commits (group commit: what was
queued while one commit ran goes into the next).  Two kinds of write:

- durable ones (a session's row, a finished step, the end of a turn): the
  call returns once its transaction committed, so a server killed with
  SIGKILL loses nothing it was told was recorded;
- events (``add_event``): queued and committed with the next durable write
  (a step's events with the step's record) or, if none comes, within
  ``writer.EVENT_LINGER_SECONDS``.  Writes commit in the order they were made, so
  a step's events are durable before the step is recorded as finished, and
  clients see an event only once it is committed (``on_commit`` wakes them).

What is never written here: a secret value.  Inputs are stored as the
client sent them with every secret input replaced by a reference
(``{"$secret": "memory"}``), events are stored after the lifecycle scrubbed
them, and errors are the scrubbed texts the events carry.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio

from . import statements
from .errors import StoreError
from .schema import (
    FINAL_STATUSES,
    OPEN_STATUSES,
    TURN,
    WHOLE_HOOK,
    NewSession,
    SessionRow,
    session_row,
)
from .writer import Statement, Writer, awaited

# The server's names for the store's vocabulary, defined apart (``schema``,
# ``errors``) so that the SQL and the writer can use them too.
__all__ = [
    "FINAL_STATUSES",
    "OPEN_STATUSES",
    "TURN",
    "WHOLE_HOOK",
    "NewSession",
    "SessionRow",
    "Store",
    "StoreError",
]

logger = logging.getLogger("runner.serve.store")

T = TypeVar("T")


class Store:
    """The journal's queries, shared by both engines: ``SqliteStore`` (``sqlite``:
    a file, one server) and ``PostgresStore`` (``postgres``: many servers).

    Safe to call from the event loop (each call is one short transaction) and
    from worker threads (one lock around the connection).  The SQL is the
    subset both engines speak (``statements``).

    Who runs which session: :meth:`claim` a session before running it and
    :meth:`release` it once it is final.  A SQLite file has one server, which
    owns every session (``exclusive``); on PostgreSQL each session is claimed
    by one server at a time and a dead server's claims lapse with its
    connection (``PostgresStore``).
    """

    #: One server owns every session of this database.
    exclusive = True
    #: Where the database is, for the server's log (never a password).
    where = ""
    #: The database's id: the owner of its sessions' durable containers.
    id = ""
    #: This server's own id where several share the database (PostgreSQL):
    #: written with every session it runs, and every write to a session's row
    #: is fenced by it, so a server that lost a session to another one (its
    #: claims lapsed while it still ran) can no longer change that session.
    #: None (SQLite): one server, no fence.
    server_id: str | None = None

    #: Whether a read waits for another process (PostgreSQL): the event loop
    #: then reads in a worker thread (:meth:`read`); SQLite answers in microseconds.
    reads_wait = False

    async def read(self, query: Callable[..., T], *args: Any) -> T:
        """``query(*args)`` (a read of this store) without blocking the event
        loop while the database answers."""
        if not self.reads_wait:
            return query(*args)
        return await anyio.to_thread.run_sync(query, *args)

    #: Called (from the writer's thread) with the ids of the sessions a commit
    #: wrote: the server wakes the clients following them.
    on_commit: Callable[[set[str]], None] | None = None

    def close(self) -> None:
        raise NotImplementedError

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _commit(self, writes: list[list[Statement]], sessions: set[str]) -> list[int]:
        """Run every write of ``writes`` in one transaction (the writer's
        connection, its thread); the rows each changed.  ``sessions``: the
        sessions the transaction writes (PostgreSQL notifies other servers)."""
        raise NotImplementedError

    def _start_writer(self) -> None:
        self._unsettled: dict[str, Future[int]] = {}
        self._unsettled_lock = threading.Lock()
        self._writer = Writer(self._commit, lambda: self.on_commit)

    def _stop_writer(self) -> None:
        self._writer.stop()

    def _execute(self, sql: str, args: tuple[Any, ...], session_id: str | None = None) -> int:
        """Run one statement in its own committed transaction; the rows it changed."""
        return self._writer.submit([(sql, args)], session_id).result()

    async def _execute_async(
        self, sql: str, args: tuple[Any, ...], session_id: str | None = None
    ) -> int:
        """:meth:`_execute` for the event loop: it waits without blocking it."""
        return await awaited(self._writer.submit([(sql, args)], session_id))

    def _atomically(self, statements: list[Statement], session_id: str | None = None) -> None:
        """Run ``statements`` in one transaction: all or none."""
        self._writer.submit(statements, session_id).result()

    async def _atomically_async(
        self, statements: list[Statement], session_id: str | None = None
    ) -> None:
        await awaited(self._writer.submit(statements, session_id))

    def _soon(self, statements: list[Statement], session_id: str) -> None:
        """Queue a durable write without waiting for it (a caller that cannot
        await): :meth:`settle` waits for it before the session's next effect."""
        future = self._writer.submit(statements, session_id)
        with self._unsettled_lock:
            self._unsettled[session_id] = future  # the newest: writes commit in order

        def done(future: Future[int]) -> None:
            if future.exception() is not None:  # kept: settle() raises it
                error = future.exception()
                logger.error("session %s: a journal write failed: %s", session_id, error)
                return
            with self._unsettled_lock:  # committed: nothing to wait for (nor to keep)
                if self._unsettled.get(session_id) is future:
                    del self._unsettled[session_id]

        future.add_done_callback(done)

    async def settle(self, session_id: str) -> None:
        """Return once the session's writes queued by ``*_soon`` are committed
        (a step or sandbox call runs only after them); raise their error."""
        with self._unsettled_lock:
            future = self._unsettled.pop(session_id, None)
        if future is not None:
            await awaited(future)

    def listen(self) -> bool:
        """Make other servers' commits wake this one's clients (``on_commit``);
        False if they cannot (SQLite: there are no other servers)."""
        return False

    def flush(self) -> None:
        """Return once every write made so far (events included) is committed."""
        self._writer.submit([], None).result()

    # --- who runs which session --------------------------------------------

    def claim(self, session_id: str) -> bool:
        """Take ``session_id`` for this server; False if another live server has it
        (its address and id are written by :meth:`take`)."""
        return True

    def release(self, session_id: str) -> None:
        """Give up ``session_id`` (it is closed or failed)."""

    def live_servers(self) -> int:
        """How many servers share this store now (SQLite: this one alone)."""
        return 1

    def unheld(self, session_ids: list[str]) -> list[str]:
        """Those of ``session_ids`` no live server holds (SQLite: every one
        this server does not run: it is the file's only server)."""
        return list(session_ids)

    def check_alive(self) -> None:
        """Raise if this server may have lost its claims (PostgreSQL: the
        connection that holds them broke)."""

    # --- sessions -----------------------------------------------------------

    async def create_session_async(self, new: NewSession) -> SessionRow | None:
        """Insert a session; None (and nothing written) if the key is taken.
        Waits for the commit without blocking the event loop."""
        insert = statements.insert_session(new, self.server_id)
        if not await self._execute_async(*insert, new.id):
            return None
        return statements.inserted_session(insert)

    def update(self, session_id: str, **fields: Any) -> None:
        """Set ``status``, ``sandbox``, ``result``, ``error`` or ``conversation``
        (fenced: nothing changes if another server took the session over)."""
        sql, args = statements.update_session(session_id, fields, self.server_id)
        self._execute(sql, args, session_id)

    def update_soon(self, session_id: str, **fields: Any) -> None:
        """:meth:`update` without waiting: committed before the session's next
        step, sandbox call or durable write (:meth:`settle`)."""
        self._soon([statements.update_session(session_id, fields, self.server_id)], session_id)

    async def update_async(self, session_id: str, **fields: Any) -> None:
        """:meth:`update` for the event loop."""
        sql, args = statements.update_session(session_id, fields, self.server_id)
        await self._execute_async(sql, args, session_id)

    def take(self, session_id: str, owner: str) -> None:
        """Make the session this server's (after :meth:`claim`): its address and id."""
        self._execute(*statements.take(session_id, owner, self.server_id), session_id)

    def open_ids(self) -> list[tuple[str, str]]:
        """``(id, agent)`` of every open session, oldest first (a light query)."""
        return [(session_id, agent) for session_id, agent in self._rows(statements.OPEN_IDS)]

    def status_of(self, session_id: str) -> str | None:
        rows = self._rows(statements.STATUS_OF, (session_id,))
        return rows[0][0] if rows else None

    def session(self, session_id: str) -> SessionRow | None:
        rows = self._rows(statements.SESSION, (session_id,))
        return session_row(rows[0]) if rows else None

    def session_by_key(self, key: str) -> SessionRow | None:
        rows = self._rows(statements.SESSION_BY_KEY, (key,))
        return session_row(rows[0]) if rows else None

    def sessions(self, *, open_only: bool = False) -> list[SessionRow]:
        return [session_row(r) for r in self._rows(statements.sessions(open_only=open_only))]

    def sessions_page(
        self, *, limit: int, after: tuple[float, str] | None = None
    ) -> list[SessionRow]:
        """Up to ``limit`` sessions, oldest first, after the one at
        ``(created_at, id)`` (a page's last row, which may be gone since)."""
        rows = self._rows(*statements.sessions_page(limit=limit, after=after))
        return [session_row(r) for r in rows]

    def count_by_status(self) -> dict[str, int]:
        """How many sessions the database holds, by status (every server's)."""
        return dict(self._rows(statements.COUNT_BY_STATUS))

    def ping(self) -> None:
        """Raise ``StoreError`` if the database does not answer."""
        self._rows(statements.PING)

    def delete_final_before(self, cutoff: float) -> int:
        """Delete the closed and failed sessions last changed before ``cutoff``
        (a time), with their events and journal, in one transaction; how many."""
        ((count,),) = self._rows(*statements.count_final_before(cutoff))
        if count:
            self._atomically(statements.delete_final_before(cutoff))
        return int(count)

    def count_open(self) -> int:
        """How many sessions this server runs that are not closed or failed
        (``--max-sessions`` counts these; on SQLite, all of the file's)."""
        ((count,),) = self._rows(*statements.count_open(self.server_id))
        return count

    # --- events -------------------------------------------------------------

    def add_event(self, session_id: str, event: dict[str, Any]) -> None:
        """Append an (already scrubbed) event, numbered 1, 2, ... per session.

        Queued, not waited for: it commits with the session's next durable
        write, or alone within ``EVENT_LINGER_SECONDS`` (see the module's
        docstring); its number is taken in that transaction.  One server
        writes a session's events (its owner); the primary key refuses a
        second writer's number anyway."""
        self._writer.submit([statements.add_event(session_id, event)], session_id, wait=False)

    def events(self, session_id: str, *, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        for seq, text in self._rows(*statements.events(session_id, after=after)):
            yield seq, json.loads(text)

    # --- the step journal ---------------------------------------------------

    def finish_step(
        self, session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> None:
        """Record a finished step (``step=WHOLE_HOOK``: a whole hook point);
        durable (with the events before it) when this returns."""
        sql, args = statements.finish_step(session_id, hook, point, step, details)
        self._execute(sql, args, session_id)

    def finish_step_soon(
        self, session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> None:
        """:meth:`finish_step` without waiting (see :meth:`update_soon`)."""
        self._soon([statements.finish_step(session_id, hook, point, step, details)], session_id)

    async def finish_step_async(
        self, session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> None:
        """:meth:`finish_step` for the event loop."""
        sql, args = statements.finish_step(session_id, hook, point, step, details)
        await self._execute_async(sql, args, session_id)

    def finished_step(
        self, session_id: str, hook: int, point: str, step: int
    ) -> dict[str, Any] | None:
        """The recorded details of a finished step, or None if it never finished."""
        rows = self._rows(*statements.finished_step(session_id, hook, point, step))
        return json.loads(rows[0][0]) if rows else None

    def end_turn(
        self, session_id: str, *, conversation: list[dict[str, Any]], result: dict[str, Any]
    ) -> None:
        """The turn in flight ended: store the conversation and the turn's
        result, set the session ``waiting`` and drop the turn's journal, in one
        transaction (a restart then never replays a turn it already stored)."""
        self._atomically(
            statements.end_turn(session_id, conversation, result, self.server_id), session_id
        )

    async def end_turn_async(
        self, session_id: str, *, conversation: list[dict[str, Any]], result: dict[str, Any]
    ) -> None:
        """:meth:`end_turn` for the event loop."""
        await self._atomically_async(
            statements.end_turn(session_id, conversation, result, self.server_id), session_id
        )

    def finished_hooks(self, session_id: str, point: str) -> set[int]:
        return {hook for (hook,) in self._rows(*statements.finished_hooks(session_id, point))}
