"""The server's journal: sessions, their events and finished steps.

Two engines behind one set of queries (:class:`Store`): a SQLite file
(:class:`SqliteStore`; ``--db FILE``, default ``runner-serve.db`` in the
output folder), opened in WAL mode, zero set-up, one server; or a PostgreSQL
database that several servers share (``--db postgresql://...``, ``postgres``).

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

On SQLite, WAL with ``synchronous=NORMAL`` survives a crashed process, not a
power cut, which would need ``FULL``; see docs/serve-design.md.

What is never written here: a secret value.  Inputs are stored as the
client sent them with every secret input replaced by a reference
(``{"$secret": "memory"}``), events are stored after the lifecycle scrubbed
them, and errors are the scrubbed texts the events carry.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio

from .writer import Statement, Writer, awaited

logger = logging.getLogger("runner.serve.store")

T = TypeVar("T")


#: Statuses a session can have; the last two are final.
OPEN_STATUSES = ("starting", "waiting", "running", "closing")
FINAL_STATUSES = ("closed", "failed")

#: Both engines' tables (the types are PostgreSQL's; SQLite takes them as its own).
SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    status TEXT NOT NULL,
    inputs TEXT NOT NULL,
    idempotency_key TEXT UNIQUE,
    fingerprint TEXT NOT NULL,
    file_hash TEXT NOT NULL,
    backend TEXT NOT NULL,
    owner TEXT,
    server_id TEXT,
    sandbox TEXT,
    result TEXT,
    error TEXT,
    conversation TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    session_id TEXT NOT NULL,
    hook INTEGER NOT NULL,
    point TEXT NOT NULL,
    step INTEGER NOT NULL,
    details TEXT NOT NULL,
    finished_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, hook, point, step)
);
"""

#: ``steps.step`` of a row that records a whole hook point as finished.
WHOLE_HOOK = -1
#: ``steps.hook`` of the rows of the turn in flight (its message, model
#: replies and tool calls), dropped when the turn ends.
TURN = -1


@dataclass
class SessionRow:
    id: str
    agent: str
    status: str
    inputs: dict[str, Any]
    idempotency_key: str | None
    fingerprint: str
    #: sha256 of the agent's YAML file when the session started (the journal's positions).
    file_hash: str
    backend: str
    #: The address of the server that runs it (PostgreSQL: one of several).
    owner: str | None
    #: That server's own id (PostgreSQL; see ``Store.server_id``).
    server_id: str | None
    sandbox: dict[str, Any] | None
    result: dict[str, Any] | None
    error: str | None
    #: The messages so far, scrubbed of the session's secrets (for a resumed session).
    conversation: list[dict[str, Any]] | None
    created_at: float
    updated_at: float

    def public(self) -> dict[str, Any]:
        """What ``GET /v1/sessions/{id}`` answers (inputs hold references, not secrets)."""
        return {
            "id": self.id,
            "agent": self.agent,
            "status": self.status,
            "inputs": self.inputs,
            "idempotency_key": self.idempotency_key,
            "owner": self.owner,
            "result": self.result,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


class StoreError(Exception):
    """The database cannot be used; the message says why (the server does not start)."""


class StoreInUseError(StoreError):
    """Another server holds the SQLite file: two would resume the same sessions."""


class Store:
    """The journal's queries, shared by both engines: :class:`SqliteStore` (a
    file, one server) and ``PostgresStore`` (``postgres``: many servers).

    Safe to call from the event loop (each call is one short transaction) and
    from worker threads (one lock around the connection).  The SQL is the
    subset both engines speak (``?`` placeholders, ``ON CONFLICT``, ``excluded``).

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

    def create_session(
        self,
        *,
        session_id: str,
        agent: str,
        inputs: dict[str, Any],
        idempotency_key: str | None,
        fingerprint: str,
        file_hash: str,
        backend: str,
        owner: str | None = None,
    ) -> SessionRow | None:
        """Insert a session; None (and nothing written) if the key is taken."""
        sql, args = self._insert_session(
            session_id, agent, inputs, idempotency_key, fingerprint, file_hash, backend, owner
        )
        if not self._execute(sql, args, session_id):
            return None
        return self.session(session_id)

    async def create_session_async(
        self,
        *,
        session_id: str,
        agent: str,
        inputs: dict[str, Any],
        idempotency_key: str | None,
        fingerprint: str,
        file_hash: str,
        backend: str,
        owner: str | None = None,
    ) -> SessionRow | None:
        """:meth:`create_session` for the event loop (it waits for the commit
        without blocking the loop)."""
        sql, args = self._insert_session(
            session_id, agent, inputs, idempotency_key, fingerprint, file_hash, backend, owner
        )
        if not await self._execute_async(sql, args, session_id):
            return None
        # What the insert wrote, without reading it back.
        return _row((*args[:2], "starting", *args[2:9], None, None, None, None, *args[9:]))

    def _insert_session(
        self,
        session_id: str,
        agent: str,
        inputs: dict[str, Any],
        idempotency_key: str | None,
        fingerprint: str,
        file_hash: str,
        backend: str,
        owner: str | None,
    ) -> Statement:
        now = time.time()
        # DO NOTHING on either unique column: the id (never reused) or the key.
        return (
            "INSERT INTO sessions (id, agent, status, inputs, idempotency_key, fingerprint,"
            " file_hash, backend, owner, server_id, created_at, updated_at)"
            " VALUES (?, ?, 'starting', ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                session_id,
                agent,
                json.dumps(inputs),
                idempotency_key,
                fingerprint,
                file_hash,
                backend,
                owner,
                self.server_id,
                now,
                now,
            ),
        )

    def update(self, session_id: str, **fields: Any) -> None:
        """Set ``status``, ``sandbox``, ``result``, ``error`` or ``conversation``
        (fenced: nothing changes if another server took the session over)."""
        sql, args = self._update(session_id, fields)
        self._execute(sql, args, session_id)

    def update_soon(self, session_id: str, **fields: Any) -> None:
        """:meth:`update` without waiting: committed before the session's next
        step, sandbox call or durable write (:meth:`settle`)."""
        self._soon([self._update(session_id, fields)], session_id)

    async def update_async(self, session_id: str, **fields: Any) -> None:
        """:meth:`update` for the event loop."""
        sql, args = self._update(session_id, fields)
        await self._execute_async(sql, args, session_id)

    def _update(self, session_id: str, fields: dict[str, Any]) -> Statement:
        json_fields = {"sandbox", "result", "conversation"}
        allowed = {"status", "error", *json_fields}
        if not fields or set(fields) - allowed:
            raise ValueError(f"cannot update {sorted(set(fields) - allowed)}")
        values = [
            json.dumps(v) if k in json_fields and v is not None else v for k, v in fields.items()
        ]
        assignments = ", ".join(f"{name} = ?" for name in fields)
        fence, fenced = self._fence()
        return (
            f"UPDATE sessions SET {assignments}, updated_at = ? WHERE id = ?{fence}",
            (*values, time.time(), session_id, *fenced),
        )

    def _fence(self) -> tuple[str, tuple[Any, ...]]:
        if self.server_id is None:
            return "", ()
        return " AND server_id = ?", (self.server_id,)

    def take(self, session_id: str, owner: str) -> None:
        """Make the session this server's (after :meth:`claim`): its address and id."""
        self._execute(
            "UPDATE sessions SET owner = ?, server_id = ?, updated_at = ? WHERE id = ?",
            (owner, self.server_id, time.time(), session_id),
            session_id,
        )

    def open_ids(self) -> list[tuple[str, str]]:
        """``(id, agent)`` of every open session, oldest first (a light query)."""
        return [
            (session_id, agent)
            for session_id, agent in self._rows(
                f"SELECT id, agent FROM sessions WHERE status IN {OPEN_STATUSES!r}"
                " ORDER BY created_at"
            )
        ]

    def status_of(self, session_id: str) -> str | None:
        rows = self._rows("SELECT status FROM sessions WHERE id = ?", (session_id,))
        return rows[0][0] if rows else None

    def session(self, session_id: str) -> SessionRow | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return _row(rows[0]) if rows else None

    def session_by_key(self, key: str) -> SessionRow | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM sessions WHERE idempotency_key = ?", (key,))
        return _row(rows[0]) if rows else None

    def sessions(self, *, open_only: bool = False) -> list[SessionRow]:
        where = f" WHERE status IN {OPEN_STATUSES!r}" if open_only else ""
        rows = self._rows(f"SELECT {_COLUMNS} FROM sessions{where} ORDER BY created_at")
        return [_row(r) for r in rows]

    def sessions_page(
        self, *, limit: int, after: tuple[float, str] | None = None
    ) -> list[SessionRow]:
        """Up to ``limit`` sessions, oldest first, after the one at
        ``(created_at, id)`` (a page's last row, which may be gone since)."""
        args: tuple[Any, ...] = ()
        where = ""
        if after is not None:
            where = " WHERE created_at > ? OR (created_at = ? AND id > ?)"
            args = (after[0], after[0], after[1])
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM sessions{where} ORDER BY created_at, id LIMIT ?",
            (*args, limit),
        )
        return [_row(r) for r in rows]

    def count_by_status(self) -> dict[str, int]:
        """How many sessions the database holds, by status (every server's)."""
        return dict(self._rows("SELECT status, COUNT(*) FROM sessions GROUP BY status"))

    def ping(self) -> None:
        """Raise ``StoreError`` if the database does not answer."""
        self._rows("SELECT 1")

    def delete_final_before(self, cutoff: float) -> int:
        """Delete the closed and failed sessions last changed before ``cutoff``
        (a time), with their events and journal, in one transaction; how many."""
        old = f"SELECT id FROM sessions WHERE status IN {FINAL_STATUSES!r} AND updated_at < ?"
        ((count,),) = self._rows(f"SELECT COUNT(*) FROM ({old}) AS old", (cutoff,))
        if count:
            self._atomically(
                [
                    (f"DELETE FROM events WHERE session_id IN ({old})", (cutoff,)),
                    (f"DELETE FROM steps WHERE session_id IN ({old})", (cutoff,)),
                    (f"DELETE FROM sessions WHERE id IN ({old})", (cutoff,)),
                ]
            )
        return int(count)

    def count_open(self) -> int:
        """How many sessions this server runs that are not closed or failed
        (``--max-sessions`` counts these; on SQLite, all of the file's)."""
        fence, fenced = self._fence()
        ((count,),) = self._rows(
            f"SELECT COUNT(*) FROM sessions WHERE status IN {OPEN_STATUSES!r}{fence}", fenced
        )
        return count

    # --- events -------------------------------------------------------------

    def add_event(self, session_id: str, event: dict[str, Any]) -> None:
        """Append an (already scrubbed) event, numbered 1, 2, ... per session.

        Queued, not waited for: it commits with the session's next durable
        write, or alone within ``EVENT_LINGER_SECONDS`` (see the module's
        docstring); its number is taken in that transaction.  One server
        writes a session's events (its owner); the primary key refuses a
        second writer's number anyway."""
        self._writer.submit(
            [
                (
                    "INSERT INTO events (session_id, seq, event)"
                    " SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM events WHERE session_id = ?",
                    (session_id, json.dumps(event, default=str), session_id),
                )
            ],
            session_id,
            wait=False,
        )

    def events(self, session_id: str, *, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        rows = self._rows(
            "SELECT seq, event FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        )
        for seq, text in rows:
            yield seq, json.loads(text)

    # --- the step journal ---------------------------------------------------

    def finish_step(
        self, session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> None:
        """Record a finished step (``step=WHOLE_HOOK``: a whole hook point);
        durable (with the events before it) when this returns."""
        sql, args = self._step(session_id, hook, point, step, details)
        self._execute(sql, args, session_id)

    def finish_step_soon(
        self, session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> None:
        """:meth:`finish_step` without waiting (see :meth:`update_soon`)."""
        self._soon([self._step(session_id, hook, point, step, details)], session_id)

    async def finish_step_async(
        self, session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> None:
        """:meth:`finish_step` for the event loop."""
        sql, args = self._step(session_id, hook, point, step, details)
        await self._execute_async(sql, args, session_id)

    @staticmethod
    def _step(
        session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
    ) -> Statement:
        return (
            "INSERT INTO steps (session_id, hook, point, step, details, finished_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, hook, point, step)"
            " DO UPDATE SET details = excluded.details, finished_at = excluded.finished_at",
            (session_id, hook, point, step, json.dumps(details), time.time()),
        )

    def finished_step(
        self, session_id: str, hook: int, point: str, step: int
    ) -> dict[str, Any] | None:
        """The recorded details of a finished step, or None if it never finished."""
        rows = self._rows(
            "SELECT details FROM steps WHERE session_id = ? AND hook = ? AND point = ?"
            " AND step = ?",
            (session_id, hook, point, step),
        )
        return json.loads(rows[0][0]) if rows else None

    def end_turn(
        self, session_id: str, *, conversation: list[dict[str, Any]], result: dict[str, Any]
    ) -> None:
        """The turn in flight ended: store the conversation and the turn's
        result, set the session ``waiting`` and drop the turn's journal, in one
        transaction (a restart then never replays a turn it already stored)."""
        self._atomically(self._end_turn(session_id, conversation, result), session_id)

    async def end_turn_async(
        self, session_id: str, *, conversation: list[dict[str, Any]], result: dict[str, Any]
    ) -> None:
        """:meth:`end_turn` for the event loop."""
        await self._atomically_async(self._end_turn(session_id, conversation, result), session_id)

    def _end_turn(
        self, session_id: str, conversation: list[dict[str, Any]], result: dict[str, Any]
    ) -> list[Statement]:
        fence, fenced = self._fence()
        return [
            (
                "UPDATE sessions SET status = 'waiting', conversation = ?, result = ?,"
                f" updated_at = ? WHERE id = ?{fence}",
                (json.dumps(conversation), json.dumps(result), time.time(), session_id, *fenced),
            ),
            ("DELETE FROM steps WHERE session_id = ? AND hook = ?", (session_id, TURN)),
        ]

    def finished_hooks(self, session_id: str, point: str) -> set[int]:
        rows = self._rows(
            "SELECT hook FROM steps WHERE session_id = ? AND point = ? AND step = ?",
            (session_id, point, WHOLE_HOOK),
        )
        return {hook for (hook,) in rows}


class SqliteStore(Store):
    """A SQLite file: zero set-up, one server.

    One server per file: an exclusive ``flock`` on ``PATH.lock``, held while the
    store is open (the kernel drops it when the process dies, even by SIGKILL).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self._owner = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._owner)
            raise StoreInUseError(
                f"another runner serve is using {self.path}; give this one its own --db"
            ) from None
        self._lock = threading.Lock()
        self._db = _connect(self.path)
        with self._lock:
            self._db.executescript(SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(sessions)")}
            for added in ("owner", "server_id"):  # a file written before servers had them
                if added not in columns:
                    self._db.execute(f"ALTER TABLE sessions ADD COLUMN {added} TEXT")
        # The writer's own connection: readers (WAL) never wait for its commits.
        self._write_db = _connect(self.path)
        self._start_writer()
        self._execute(
            "INSERT INTO meta (key, value) VALUES ('id', ?) ON CONFLICT DO NOTHING",
            (f"serve-{os.urandom(8).hex()}",),
        )
        # Made once with the file and kept: the owner of its sessions'
        # durable containers (label sandbox-runner.durable), across restarts.
        ((self.id,),) = self._rows("SELECT value FROM meta WHERE key = 'id'")

    def close(self) -> None:
        self._stop_writer()
        self._write_db.close()
        with self._lock:
            self._db.close()
        os.close(self._owner)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _commit(self, writes: list[list[Statement]], sessions: set[str]) -> list[int]:
        db = self._write_db
        db.execute("BEGIN IMMEDIATE")
        try:
            changed = [sum(db.execute(sql, args).rowcount for sql, args in w) for w in writes]
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return changed


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


_NAMES = (
    "id",
    "agent",
    "status",
    "inputs",
    "idempotency_key",
    "fingerprint",
    "file_hash",
    "backend",
    "owner",
    "server_id",
    "sandbox",
    "result",
    "error",
    "conversation",
    "created_at",
    "updated_at",
)
_COLUMNS = ", ".join(_NAMES)
_JSON = {"inputs", "sandbox", "result", "conversation"}


def _row(row: tuple[Any, ...]) -> SessionRow:
    values = dict(zip(_NAMES, row, strict=True))
    for name in _JSON:
        values[name] = json.loads(values[name]) if values[name] else None
    return SessionRow(**values)
