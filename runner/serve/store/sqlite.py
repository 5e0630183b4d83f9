"""The journal in a SQLite file: zero set-up, one server (``--db FILE``,
default ``runner-serve.db`` in the output folder).

Opened in WAL mode with ``synchronous=NORMAL``: readers never wait for the
writer's commits, and a crashed process loses nothing committed (a power
cut would need ``FULL``; see docs/serve-design.md).  The tables and queries
are :class:`~.base.Store`'s, the same as on PostgreSQL.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from . import statements
from .base import Store
from .errors import StoreInUseError
from .schema import ADDED_COLUMNS, SCHEMA
from .writer import Statement


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
            for added, statement in ADDED_COLUMNS.items():  # a file written before them
                if added not in columns:
                    self._db.execute(statement)
        # The writer's own connection: readers (WAL) never wait for its commits.
        self._write_db = _connect(self.path)
        self._start_writer()
        self._execute(statements.INSERT_DATABASE_ID, (f"serve-{os.urandom(8).hex()}",))
        # Made once with the file and kept: the owner of its sessions'
        # durable containers (label sandbox-runner.durable), across restarts.
        ((self.id,),) = self._rows(statements.DATABASE_ID)

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
