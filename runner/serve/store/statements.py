"""The journal's SQL: every query and write the store runs, on either engine.

Each write is a :data:`~.writer.Statement` (SQL with ``?`` placeholders and
its arguments) that the store hands to its writer; each read is SQL (and
arguments) for the store's ``_rows``.  Kept apart from the store, which
decides when and how a statement runs (waited for, queued, in one
transaction with others), so the SQL both engines must speak reads in one
place: the subset of SQLite and PostgreSQL with ``?`` placeholders (the
PostgreSQL store turns them into psycopg's), ``ON CONFLICT`` and
``excluded``.

Writes to a session's row made on behalf of one server are *fenced* with
its id (:func:`fence`): on PostgreSQL a server whose claims lapsed while it
still ran changes nothing of a session another server took over.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .schema import (
    COLUMNS,
    FINAL_STATUSES,
    OPEN_STATUSES,
    TURN,
    WHOLE_HOOK,
    NewSession,
    SessionRow,
    session_row,
)
from .writer import Statement

# --- the database's id --------------------------------------------------------

#: Made once with the database (a random id as the argument) and kept.
INSERT_DATABASE_ID = "INSERT INTO meta (key, value) VALUES ('id', ?) ON CONFLICT DO NOTHING"
DATABASE_ID = "SELECT value FROM meta WHERE key = 'id'"

PING = "SELECT 1"


def fence(server_id: str | None) -> tuple[str, tuple[Any, ...]]:
    """The ``WHERE`` clause's tail that limits a write to ``server_id``'s
    sessions, and its argument; nothing where one server owns all (None)."""
    if server_id is None:
        return "", ()
    return " AND server_id = ?", (server_id,)


# --- sessions -------------------------------------------------------------------

#: Session rows updated as JSON text (:func:`update_session`).
_UPDATED_AS_JSON = {"sandbox", "result", "conversation"}
#: What :func:`update_session` may set.
_UPDATABLE = {"status", "error", *_UPDATED_AS_JSON}


def insert_session(new: NewSession, server_id: str | None) -> Statement:
    """A new session, ``starting``; it changes no row if the id or the key is taken."""
    now = time.time()
    # DO NOTHING on either unique column: the id (never reused) or the key.
    return (
        "INSERT INTO sessions (id, agent, status, inputs, idempotency_key, fingerprint,"
        " file_hash, backend, owner, server_id, created_at, updated_at)"
        " VALUES (?, ?, 'starting', ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            new.id,
            new.agent,
            json.dumps(new.inputs),
            new.idempotency_key,
            new.fingerprint,
            new.file_hash,
            new.backend,
            new.owner,
            server_id,
            now,
            now,
        ),
    )


def inserted_session(insert: Statement) -> SessionRow:
    """The row an :func:`insert_session` statement wrote, without reading it back."""
    _, args = insert
    return session_row((*args[:2], "starting", *args[2:9], None, None, None, None, *args[9:]))


def update_session(session_id: str, fields: dict[str, Any], server_id: str | None) -> Statement:
    """Set ``status``, ``sandbox``, ``result``, ``error`` or ``conversation``
    (fenced); a ValueError for any other field, or none."""
    if not fields or set(fields) - _UPDATABLE:
        raise ValueError(f"cannot update {sorted(set(fields) - _UPDATABLE)}")
    values = [
        json.dumps(v) if k in _UPDATED_AS_JSON and v is not None else v for k, v in fields.items()
    ]
    assignments = ", ".join(f"{name} = ?" for name in fields)
    where, fenced = fence(server_id)
    return (
        f"UPDATE sessions SET {assignments}, updated_at = ? WHERE id = ?{where}",
        (*values, time.time(), session_id, *fenced),
    )


def take(session_id: str, owner: str, server_id: str | None) -> Statement:
    """Make the session ``server_id``'s, at the address ``owner`` (not fenced:
    the server claimed it first)."""
    return (
        "UPDATE sessions SET owner = ?, server_id = ?, updated_at = ? WHERE id = ?",
        (owner, server_id, time.time(), session_id),
    )


OPEN_IDS = f"SELECT id, agent FROM sessions WHERE status IN {OPEN_STATUSES!r} ORDER BY created_at"
STATUS_OF = "SELECT status FROM sessions WHERE id = ?"
SESSION = f"SELECT {COLUMNS} FROM sessions WHERE id = ?"
SESSION_BY_KEY = f"SELECT {COLUMNS} FROM sessions WHERE idempotency_key = ?"
COUNT_BY_STATUS = "SELECT status, COUNT(*) FROM sessions GROUP BY status"


def sessions(*, open_only: bool) -> str:
    """Every session, or the open ones, oldest first."""
    where = f" WHERE status IN {OPEN_STATUSES!r}" if open_only else ""
    return f"SELECT {COLUMNS} FROM sessions{where} ORDER BY created_at"


def sessions_page(*, limit: int, after: tuple[float, str] | None) -> Statement:
    """Up to ``limit`` sessions, oldest first, after the one at
    ``(created_at, id)`` (a page's last row, which may be gone since)."""
    args: tuple[Any, ...] = ()
    where = ""
    if after is not None:
        where = " WHERE created_at > ? OR (created_at = ? AND id > ?)"
        args = (after[0], after[0], after[1])
    return (
        f"SELECT {COLUMNS} FROM sessions{where} ORDER BY created_at, id LIMIT ?",
        (*args, limit),
    )


def count_open(server_id: str | None) -> Statement:
    """How many sessions are not closed or failed (fenced: ``server_id``'s)."""
    where, fenced = fence(server_id)
    return f"SELECT COUNT(*) FROM sessions WHERE status IN {OPEN_STATUSES!r}{where}", fenced


#: The closed and failed sessions last changed before a time (the argument).
_FINAL_BEFORE = f"SELECT id FROM sessions WHERE status IN {FINAL_STATUSES!r} AND updated_at < ?"


def count_final_before(cutoff: float) -> Statement:
    """How many sessions :func:`delete_final_before` would delete."""
    return f"SELECT COUNT(*) FROM ({_FINAL_BEFORE}) AS old", (cutoff,)


def delete_final_before(cutoff: float) -> list[Statement]:
    """Delete the closed and failed sessions last changed before ``cutoff``,
    with their events and journal (to run in one transaction)."""
    return [
        (f"DELETE FROM events WHERE session_id IN ({_FINAL_BEFORE})", (cutoff,)),
        (f"DELETE FROM steps WHERE session_id IN ({_FINAL_BEFORE})", (cutoff,)),
        (f"DELETE FROM sessions WHERE id IN ({_FINAL_BEFORE})", (cutoff,)),
    ]


# --- events ---------------------------------------------------------------------


def add_event(session_id: str, event: dict[str, Any]) -> Statement:
    """Append ``event``, numbered after the session's last (the number is
    taken in the transaction that writes it)."""
    return (
        "INSERT INTO events (session_id, seq, event)"
        " SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM events WHERE session_id = ?",
        (session_id, json.dumps(event, default=str), session_id),
    )


def events(session_id: str, *, after: int) -> Statement:
    """``(seq, event)`` of the session's events numbered after ``after``, in order."""
    return (
        "SELECT seq, event FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
        (session_id, after),
    )


# --- the step journal -----------------------------------------------------------


def finish_step(
    session_id: str, hook: int, point: str, step: int, details: dict[str, Any]
) -> Statement:
    """Record a finished step (``step=WHOLE_HOOK``: a whole hook point); a
    step recorded again keeps the newest details."""
    return (
        "INSERT INTO steps (session_id, hook, point, step, details, finished_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, hook, point, step)"
        " DO UPDATE SET details = excluded.details, finished_at = excluded.finished_at",
        (session_id, hook, point, step, json.dumps(details), time.time()),
    )


def finished_step(session_id: str, hook: int, point: str, step: int) -> Statement:
    """The details of a finished step (no row: it never finished)."""
    return (
        "SELECT details FROM steps WHERE session_id = ? AND hook = ? AND point = ? AND step = ?",
        (session_id, hook, point, step),
    )


def finished_hooks(session_id: str, point: str) -> Statement:
    """The hooks of ``point`` recorded as finished whole."""
    return (
        "SELECT hook FROM steps WHERE session_id = ? AND point = ? AND step = ?",
        (session_id, point, WHOLE_HOOK),
    )


def end_turn(
    session_id: str,
    conversation: list[dict[str, Any]],
    result: dict[str, Any],
    server_id: str | None,
) -> list[Statement]:
    """The turn in flight ended: its conversation and result stored, the
    session ``waiting``, the turn's journal dropped (to run in one transaction)."""
    where, fenced = fence(server_id)
    return [
        (
            "UPDATE sessions SET status = 'waiting', conversation = ?, result = ?,"
            f" updated_at = ? WHERE id = ?{where}",
            (json.dumps(conversation), json.dumps(result), time.time(), session_id, *fenced),
        ),
        ("DELETE FROM steps WHERE session_id = ? AND hook = ?", (session_id, TURN)),
    ]
