"""The journal's tables, and what one session row is.

Both engines create the same tables from :data:`SCHEMA` (the types are
PostgreSQL's; SQLite takes them as its own).  A column added after a
database could already exist is listed in :data:`ADDED_COLUMNS`: a SQLite
file written before it gets it at open (``sqlite.SqliteStore``).

The values some columns hold have names here too, because the queries
(``statements``) and the server (``sessions``, ``recovery``, ``journal``)
must agree on them: the statuses, and the ``steps`` rows that stand for a
whole hook point or for the turn in flight.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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

#: The ``sessions`` columns a file written before the servers had them
#: lacks, each with the statement that adds it (a SQLite file, at open).
ADDED_COLUMNS = {
    "owner": "ALTER TABLE sessions ADD COLUMN owner TEXT",
    "server_id": "ALTER TABLE sessions ADD COLUMN server_id TEXT",
}

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


@dataclass(frozen=True)
class NewSession:
    """What a session is created with (``Store.create_session_async``): its
    row's first values.  The row starts ``starting``, its times now, its
    ``server_id`` the creating server's."""

    id: str
    agent: str
    inputs: dict[str, Any]
    idempotency_key: str | None
    fingerprint: str
    file_hash: str
    backend: str
    owner: str | None = None


#: The ``sessions`` columns in :class:`SessionRow`'s order (what every
#: ``SELECT`` of a whole row names, :data:`COLUMNS`).
NAMES = (
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
COLUMNS = ", ".join(NAMES)
#: The columns stored as JSON text.
JSON_COLUMNS = frozenset({"inputs", "sandbox", "result", "conversation"})


def session_row(row: tuple[Any, ...]) -> SessionRow:
    """A ``SELECT COLUMNS`` row as a :class:`SessionRow` (JSON columns decoded)."""
    values = dict(zip(NAMES, row, strict=True))
    for name in JSON_COLUMNS:
        values[name] = json.loads(values[name]) if values[name] else None
    return SessionRow(**values)
