"""A real, throwaway PostgreSQL server for the tests.

Why: code that talks to PostgreSQL is tested against the real thing, not a
mock or SQLite, and these machines have no database service to share.  So a
test run makes its own cluster: ``initdb`` in a fresh temp dir, then
``postgres`` listening on a unix socket in that dir only (no TCP port at all),
with durability turned off (fsync, synchronous_commit, full_page_writes) since
the data is thrown away.  ``stop()`` ends that one postmaster, by its pid, and
removes the temp dir, so nothing is left behind.  The system cluster
(/var/lib/postgresql) is never used nor started.

PostgreSQL refuses to run as root, and the tests run as root: then initdb and
the server run as the unprivileged ``postgres`` user (Debian's package makes
it), which owns the temp dir.  The switch is done by ``subprocess.Popen``'s
``user``/``group`` (setuid in the child before exec) rather than ``runuser``,
because runuser stays as a root parent process: here the pid we hold is the
postmaster's own.  As another user, everything runs as that user.

The binaries are Debian's /usr/lib/postgresql/VERSION/bin (the highest
version), else ``pg_config --bindir``; scripts/postgres-install installs them.

    with PostgresServer() as server:
        dsn = server.new_database()   # postgresql://runner@/t_1_ab12cd34?host=...
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

#: The superuser initdb makes; every connection uses it (trust authentication).
SUPERUSER = "runner"
#: Who runs the cluster when we are root.
SERVICE_USER = "postgres"

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def _version_key(bindir: str) -> tuple[int, ...]:
    version = Path(bindir).parent.name
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return (-1,)


def find_bindir() -> Path | None:
    """The folder of ``initdb`` and ``postgres``, or None if they are not installed."""
    found = [
        d
        for d in glob.glob("/usr/lib/postgresql/*/bin")
        if os.access(os.path.join(d, "initdb"), os.X_OK)
        and os.access(os.path.join(d, "postgres"), os.X_OK)
    ]
    if found:
        return Path(max(found, key=_version_key))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        bindir = Path(out)
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    return None


def _traversable_by_others(path: Path) -> bool:
    """Whether every folder from / down to ``path`` can be entered by any user."""
    return all(os.stat(folder).st_mode & 1 for folder in [path, *path.parents])


def _children(pid: int) -> list[int]:
    """The pids of the processes whose parent is ``pid``."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            children.append(int(entry))
    return children


class PostgresServer:
    """One PostgreSQL cluster in a temp dir, reached by a unix socket only."""

    _counter = itertools.count(1)

    def __init__(self, bindir: Path | None = None, *, durable: bool = False) -> None:
        self.bindir = bindir
        #: Keep fsync and synchronous commits on, as a deployment would (bench/serve.py).
        self.durable = durable
        self.root: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    # -- paths -------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        assert self.root is not None, "the server is not started"
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        assert self.root is not None, "the server is not started"
        return self.root / "sock"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs (it was started by this object)."""
        return self.process.pid if self.process is not None else None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of initdb's and the server's output."""
        if self._log is None or not self._log.exists():
            return "(no log)"
        text = self._log.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection URI for ``dbname`` over this server's socket."""
        host = quote(str(self.socket_dir.resolve()), safe="/")
        return f"postgresql://{SUPERUSER}@/{quote(dbname, safe='')}?host={host}"

    # -- life cycle ----------------------------------------------------------

    def _as_service_user(self) -> dict[str, object]:
        """Popen arguments that run the child as the cluster's owner."""
        if os.geteuid() != 0:
            return {}
        entry = pwd.getpwnam(SERVICE_USER)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def start(self) -> PostgresServer:
        if self.process is not None:
            return self
        bindir = self.bindir or find_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed: run scripts/postgres-install")
        self.bindir = bindir
        owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam(SERVICE_USER)
            except KeyError:
                raise RuntimeError(
                    f"running as root, and there is no {SERVICE_USER!r} user to run"
                    " PostgreSQL as (PostgreSQL refuses root): run scripts/postgres-install"
                ) from None
        base = Path(tempfile.gettempdir())
        if owner is not None and not _traversable_by_others(base):
            base = Path("/tmp")  # the service user must reach its data dir
        self.root = Path(tempfile.mkdtemp(prefix="runner-pg-", dir=base))
        atexit.register(self.stop)
        try:
            self._start(owner)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, owner: pwd.struct_passwd | None) -> None:
        assert self.root is not None and self.bindir is not None
        self.socket_dir.mkdir()
        self._log = self.root / "postgres.log"
        self._log.touch()
        if owner is not None:
            for path in (self.root, self.socket_dir, self._log):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        as_owner = self._as_service_user()
        with open(self._log, "ab") as log:
            initdb = subprocess.run(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    SUPERUSER,
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                    "--no-instructions",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                timeout=120,
                **as_owner,  # type: ignore[arg-type]
            )
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{self.log_tail()}")
        with open(self._log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-k",
                    str(self.socket_dir),
                    "-c",
                    "listen_addresses=",
                    *(
                        ()
                        if self.durable
                        else (
                            "-c",
                            "fsync=off",
                            "-c",
                            "synchronous_commit=off",
                            "-c",
                            "full_page_writes=off",
                        )
                    ),
                    "-c",
                    "max_connections=200",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                # out of the terminal's process group: a Ctrl-C of pytest
                # reaches the server only through stop()
                start_new_session=True,
                **as_owner,  # type: ignore[arg-type]
            )
        self._wait_ready()

    def _ready(self) -> bool:
        try:
            import psycopg
        except ImportError:
            assert self.bindir is not None
            result = subprocess.run(
                [
                    str(self.bindir / "pg_isready"),
                    "-q",
                    "-h",
                    str(self.socket_dir),
                    "-U",
                    SUPERUSER,
                    "-d",
                    "postgres",
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            )
            return result.returncode == 0
        try:
            psycopg.connect(self.dsn(), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited ({self.process.returncode}) while starting:\n"
                    f"{self.log_tail()}"
                )
            if self._ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"postgres did not accept connections within {START_TIMEOUT:.0f} s:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def new_database(self) -> str:
        """Create a database with a fresh name; return its DSN."""
        if self.process is None:
            raise RuntimeError("the server is not started")
        name = f"t_{next(self._counter)}_{secrets.token_hex(4)}"
        try:
            import psycopg
        except ImportError:
            assert self.bindir is not None
            subprocess.run(
                [
                    str(self.bindir / "psql"),
                    "-X",
                    "-q",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-d",
                    self.dsn(),
                    "-c",
                    f'CREATE DATABASE "{name}"',
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
                check=True,
            )
        else:
            with psycopg.connect(self.dsn(), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the postmaster (fast shutdown, then SIGKILL) and remove the temp dir."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                process.send_signal(signal.SIGINT)  # fast shutdown
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                # each backend is in a session of its own (setsid): kill
                # the postmaster's children by pid too
                children = _children(process.pid)
                process.kill()
                process.wait()
                for child in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
        root, self.root = self.root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
