"""The journal on PostgreSQL: many servers share the sessions, one runs each.

``runner serve --db postgresql://...`` (psycopg 3, in the ``serve`` extra).
The tables and queries are :class:`~.base.Store`'s, the same as on SQLite.

Who runs a session is PostgreSQL's to say, not a lease we keep: a server
holds a session-level advisory lock (``pg_try_advisory_lock``) on every
session it runs, on one connection kept open for that.  The lock lives as
long as that connection: a server that dies (SIGKILL, OOM, a crashed
machine once PostgreSQL notices the connection is gone) loses all its locks
at once, and another server's next look (``Sessions.watch_claims``) takes the
sessions over.  No heartbeat, no expiry to tune, no clock to trust.  A
server that loses that connection while alive (the database restarted, the
network broke) can no longer prove it owns anything: it stops (see
:meth:`PostgresStore.check_alive`) rather than run sessions another server
may be taking over.

Advisory locks are per database: give ``runner serve`` a database of its
own (``createdb runner``), so another application's locks cannot collide
with a session's.

Clients following a session that another server runs are woken by that
server's commits: each commit that writes a session sends a notification
(``pg_notify`` on ``EVENTS_CHANNEL``, the session's id as payload, delivered
at commit), and a server with such clients listens (:meth:`PostgresStore.listen`,
on a connection of its own).  A server that cannot listen falls back to
reading the database twice a second per client (``app.FOLLOW_ELSEWHERE_SECONDS``).

Four connections per server: reads (the event loop's, short queries), writes
(the store's writer thread), claims (the advisory locks) and, once a client
follows a session run elsewhere, notifications.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import select
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

from . import statements
from .base import Store
from .errors import StoreError
from .schema import SCHEMA
from .writer import Statement

#: The channel a commit notifies with the ids of the sessions it wrote.
EVENTS_CHANNEL = "runner_serve_events"

_SCHEMA_LOCK = int.from_bytes(
    hashlib.sha256(b"runner serve: schema").digest()[:8], "big", signed=True
)


#: Held (shared) by every live server on its claims connection: how many
#: servers are alive is how many hold it (``live_servers``), with no
#: heartbeat, as with the sessions' locks.
_SERVERS_LOCK = int.from_bytes(
    hashlib.sha256(b"runner serve: a live server").digest()[:8], "big", signed=True
)

#: A 64-bit advisory lock's key from ``pg_locks``: ``classid`` holds its high
#: 32 bits, ``objid`` its low ones (the shift wraps as the key was signed).
_PG_LOCKS_KEY = "((classid::bigint << 32) | objid::bigint)"


def lock_key(session_id: str) -> int:
    """The advisory lock of a session: 64 bits of a hash of its id."""
    return int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:8], "big", signed=True)


def redacted(url: str) -> str:
    """``url`` without its password, for the log (``postgresql://u:***@h/db``)."""
    return re.sub(r"^(\w+://[^:/@]*):[^@]*@", r"\1:***@", url)


def _placeholders(sql: str) -> str:
    """The store's ``?`` placeholders as psycopg's ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresStore(Store):
    """Sessions in a PostgreSQL database that any number of servers share."""

    exclusive = False
    reads_wait = True

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                "--db postgresql://... needs psycopg: pip install 'sandbox-runner[serve]'"
            ) from None
        self.where = redacted(url)
        self._url = url
        self._error = psycopg.Error
        # Unique per server process, unlike its address (two machines may both
        # listen on 127.0.0.1:8000 behind their proxies).
        self.server_id = f"{socket.gethostname()}/{os.getpid()}/{os.urandom(6).hex()}"
        # TCP keep-alives (ignored on a unix socket): a dead network is noticed
        # in about 30 s, not at the system default of two hours.
        options: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": 10,
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
        }
        self._options = options
        try:
            # Named with the process id, for pg_stat_activity.
            self._db = psycopg.connect(
                url, application_name=f"runner serve {os.getpid()}", **options
            )
            # Its own connection: the locks live exactly as long as it does.
            self._claims = psycopg.connect(
                url, application_name=f"runner serve {os.getpid()} claims", **options
            )
            # The writer thread's: the event loop's reads never wait for a commit.
            self._write_db = psycopg.connect(
                url, application_name=f"runner serve {os.getpid()} writes", **options
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the database {self.where}: {exc}") from None
        self._lock = threading.Lock()
        self._claims_lock = threading.Lock()
        self._claimed: set[str] = set()
        #: Called with a session's id when another server commits to it (listen()).
        self.on_commit_elsewhere: Callable[[str], None] | None = None
        self._listener: Any = None
        self._closing = False
        self._listen_lock = threading.Lock()
        with self._lock, self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute(
                _placeholders(statements.INSERT_DATABASE_ID), (f"serve-{os.urandom(8).hex()}",)
            )
        # Shared by every server of this database: the owner of its durable containers.
        ((self.id,),) = self._rows(statements.DATABASE_ID)
        with self._claims_lock:  # counted among the live servers while it lives
            self._claims.execute("SELECT pg_advisory_lock_shared(%s)", (_SERVERS_LOCK,))
        self._start_writer()

    def close(self) -> None:
        self._stop_writer()  # what is queued commits first
        self._write_db.close()
        self._closing = True  # the listening thread ends within a second
        with self._lock:
            self._db.close()
        with self._claims_lock:
            self._claims.close()  # every claim this server held lapses here
            self._claimed.clear()

    @contextlib.contextmanager
    def _database(self) -> Iterator[Any]:
        """The main connection, under its lock; a database error becomes a
        ``StoreError`` naming the database (never a raw driver error)."""
        with self._lock:
            try:
                yield self._db
            except self._error as exc:
                raise StoreError(f"the database {self.where} failed: {exc}") from exc

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._database() as db:
            return db.execute(_placeholders(sql), args).fetchall()

    def _commit(self, writes: list[list[Statement]], sessions: set[str]) -> list[int]:
        db = self._write_db
        try:
            with db.transaction():
                changed = [
                    sum(db.execute(_placeholders(sql), args).rowcount for sql, args in write)
                    for write in writes
                ]
                for session_id in sorted(sessions):  # delivered at commit, to listeners
                    db.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, session_id))
        except self._error as exc:
            raise StoreError(f"the database {self.where} failed: {exc}") from exc
        return changed

    # --- following sessions run elsewhere ------------------------------------

    def listen(self) -> bool:
        """Listen for other servers' commits (once; ``on_commit_elsewhere`` is
        called with each session id, from a thread of its own); False if the
        database cannot be listened to now (clients then poll)."""
        import psycopg

        with self._listen_lock:
            if self._closing:
                return False
            if self._listener is not None and not self._listener.closed:
                return True
            try:
                listener = psycopg.connect(
                    self._url,
                    application_name=f"runner serve {os.getpid()} notifications",
                    **self._options,
                )
                listener.execute(f"LISTEN {EVENTS_CHANNEL}")
            except psycopg.Error:
                return False
            self._listener = listener

        def receive() -> None:
            # A timeout, so close() needs no second thread to touch this connection.
            try:
                while not self._closing:
                    for notice in listener.notifies(timeout=1.0):
                        if self.on_commit_elsewhere is not None:
                            self.on_commit_elsewhere(notice.payload)
            except (psycopg.Error, OSError):  # the connection broke: clients poll
                pass
            finally:
                with contextlib.suppress(psycopg.Error):
                    listener.close()

        threading.Thread(target=receive, name="runner-serve-listen", daemon=True).start()
        return True

    # --- who runs which session --------------------------------------------

    def claim(self, session_id: str) -> bool:
        with self._claims_lock:
            if session_id in self._claimed:
                return True
            try:
                ((taken,),) = self._claims.execute(
                    "SELECT pg_try_advisory_lock(%s)", (lock_key(session_id),)
                ).fetchall()
            except self._error as exc:
                raise self._lost(exc) from None
            if taken:
                self._claimed.add(session_id)
            return bool(taken)

    def live_servers(self) -> int:
        """How many servers share this database now (each holds the servers'
        lock, shared, for as long as its claims connection lives)."""
        ((count,),) = self._rows(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND mode = 'ShareLock' AND objsubid = 1"
            f" AND {_PG_LOCKS_KEY} = ?",
            (_SERVERS_LOCK,),
        )
        return int(count)

    def unheld(self, session_ids: list[str]) -> list[str]:
        """Those of ``session_ids`` no live server holds (their server died),
        in their order: one look at ``pg_locks``, no lock taken."""
        held = {
            key
            for (key,) in self._rows(
                f"SELECT {_PG_LOCKS_KEY} FROM pg_locks"
                " WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock'"
                " AND objsubid = 1"
            )
        }
        return [i for i in session_ids if lock_key(i) not in held]

    def release(self, session_id: str) -> None:
        """Never raises: a lock whose connection is gone is released already."""
        with self._claims_lock:
            if session_id not in self._claimed:
                return
            self._claimed.discard(session_id)
            with contextlib.suppress(self._error):
                self._claims.execute("SELECT pg_advisory_unlock(%s)", (lock_key(session_id),))

    def check_alive(self) -> None:
        """The claims connection answers and still holds every claim (a pooler
        in front of PostgreSQL could answer from another backend without them)."""
        with self._claims_lock:
            try:
                ((held,),) = self._claims.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                    " AND pid = pg_backend_pid() AND granted"
                ).fetchall()
            except self._error as exc:
                raise self._lost(exc) from None
            if held < len(self._claimed):
                raise self._lost(f"it holds {held} of this server's {len(self._claimed)} claims")

    def watch_connection(self, on_lost: Callable[[StoreError], None]) -> None:
        """Call ``on_lost`` (from a thread of its own) as soon as the claims
        connection ends: PostgreSQL restarted, the backend was terminated, the
        network broke (TCP keep-alives).  Waiting for the socket to turn
        readable costs nothing while all is well."""

        def watch() -> None:
            while True:
                try:
                    select.select([self._claims.fileno()], [], [])
                except (OSError, ValueError, self._error) as exc:  # closed under us
                    if self._claims.closed:
                        return  # close(): a clean stop
                    on_lost(self._lost(exc))
                    return
                with self._claims_lock:
                    if self._claims.closed:
                        return
                    try:  # readable: an answer to a claim, a notice, or the end
                        self._claims.execute("SELECT 1").fetchall()
                    except self._error as exc:
                        on_lost(self._lost(exc))
                        return

        threading.Thread(target=watch, name="runner-serve-claims", daemon=True).start()

    def _lost(self, why: object) -> StoreError:
        return StoreError(
            f"lost the connection to {self.where} that holds this server's sessions "
            f"({why}); another server may take them over, so this one stops"
        )
