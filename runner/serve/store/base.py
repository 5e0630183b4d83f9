"""The server's journal: sessions, their events and finished steps.

Two engines behind one set of queries (:class:`Store`): a SQLite file
(:class:`SqliteStore`; ``--db FILE``, default ``runner-serve.db`` in the
output folder), opened in WAL mode, zero set-up, one server; or a PostgreSQL
database that several servers share (``--db postgresql://...``, ``postgres``).
Every write commits before the call returns, so a server killed with
SIGKILL loses nothing it had recorded (on SQLite, WAL with
``synchronous=NORMAL`` survives a crashed process, not a power cut, which
would need ``FULL``; see docs/serve-design.md).

What is never written here: a secret value.  Inputs are stored as the
client sent them with every secret input replaced by a reference
(``{"$secret": "memory"}``), events are stored after the lifecycle scrubbed
them, and errors are the scrubbed texts the events carry.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    def close(self) -> None:
        raise NotImplementedError

    def _execute(self, sql: str, args: tuple[Any, ...]) -> int:
        """Run one statement in its own committed transaction; the rows it changed."""
        raise NotImplementedError

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _append(self, sql_last: str, sql_insert: str, key: tuple[Any, ...], value: Any) -> int:
        """In one transaction: read the last number (``sql_last`` with ``key``),
        insert the next (``sql_insert`` with ``*key, number, value``); return it."""
        raise NotImplementedError

    def _atomically(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run ``statements`` in one transaction: all or none."""
        raise NotImplementedError

    # --- who runs which session --------------------------------------------

    def claim(self, session_id: str) -> bool:
        """Take ``session_id`` for this server; False if another live server has it
        (its address and id are written by :meth:`take`)."""
        return True

    def release(self, session_id: str) -> None:
        """Give up ``session_id`` (it is closed or failed)."""

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
        now = time.time()
        # DO NOTHING on either unique column: the id (never reused) or the key.
        inserted = self._execute(
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
        if not inserted:
            return None
        return self.session(session_id)

    def update(self, session_id: str, **fields: Any) -> None:
        """Set ``status``, ``sandbox``, ``result``, ``error`` or ``conversation``
        (fenced: nothing changes if another server took the session over)."""
        json_fields = {"sandbox", "result", "conversation"}
        allowed = {"status", "error", *json_fields}
        if not fields or set(fields) - allowed:
            raise ValueError(f"cannot update {sorted(set(fields) - allowed)}")
        values = [
            json.dumps(v) if k in json_fields and v is not None else v for k, v in fields.items()
        ]
        assignments = ", ".join(f"{name} = ?" for name in fields)
        fence, fenced = self._fence()
        self._execute(
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

    def add_event(self, session_id: str, event: dict[str, Any]) -> int:
        """Append an (already scrubbed) event; return its sequence number (1, 2, ...)."""
        return self._append(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?",
            "INSERT INTO events (session_id, seq, event) VALUES (?, ?, ?)",
            (session_id,),
            json.dumps(event, default=str),
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
        """Record a finished step (``step=WHOLE_HOOK``: a whole hook point)."""
        self._execute(
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
        fence, fenced = self._fence()
        self._atomically(
            [
                (
                    "UPDATE sessions SET status = 'waiting', conversation = ?, result = ?,"
                    f" updated_at = ? WHERE id = ?{fence}",
                    (
                        json.dumps(conversation),
                        json.dumps(result),
                        time.time(),
                        session_id,
                        *fenced,
                    ),
                ),
                ("DELETE FROM steps WHERE session_id = ? AND hook = ?", (session_id, TURN)),
            ]
        )

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
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        with self._lock:
            self._db.executescript(SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(sessions)")}
            for added in ("owner", "server_id"):  # a file written before servers had them
                if added not in columns:
                    self._db.execute(f"ALTER TABLE sessions ADD COLUMN {added} TEXT")
        self._execute(
            "INSERT INTO meta (key, value) VALUES ('id', ?) ON CONFLICT DO NOTHING",
            (f"serve-{os.urandom(8).hex()}",),
        )
        # Made once with the file and kept: the owner of its sessions'
        # durable containers (label sandbox-runner.durable), across restarts.
        ((self.id,),) = self._rows("SELECT value FROM meta WHERE key = 'id'")

    def close(self) -> None:
        with self._lock:
            self._db.close()
        os.close(self._owner)

    def _execute(self, sql: str, args: tuple[Any, ...]) -> int:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                changed = self._db.execute(sql, args).rowcount
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return changed

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _append(self, sql_last: str, sql_insert: str, key: tuple[Any, ...], value: Any) -> int:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                ((last,),) = self._db.execute(sql_last, key).fetchall()
                self._db.execute(sql_insert, (*key, last + 1, value))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return last + 1

    def _atomically(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


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
