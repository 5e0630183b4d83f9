"""The throwaway PostgreSQL server of the tests (tests/support/postgres_server.py) and
its fixtures: it answers queries, each ``postgres_dsn`` is a database of its
own, it runs as a non-root user, listens on no TCP port, and leaves no
process and no temp dir behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_server import PostgresServer


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])  # the real uid; the others follow
    raise AssertionError(f"no Uid line for pid {pid}")


def test_query_through_postgres_dsn(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_each_database_is_its_own(postgres_server: Any, postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (name text)")
        conn.execute("INSERT INTO items VALUES ('a')")
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT name FROM items").fetchall() == [("a",)]
    other = postgres_server.new_database()
    assert other != postgres_dsn
    with psycopg.connect(other) as conn:
        found = conn.execute("SELECT to_regclass('items')").fetchone()
        assert found == (None,)


def test_listens_on_no_tcp_port(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.info.host.startswith("/")  # a unix socket's folder
        assert conn.execute("SELECT inet_server_addr()").fetchone() == (None,)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root has a user to drop")
def test_server_runs_as_non_root(postgres_server: Any) -> None:
    assert postgres_server.pid is not None
    assert _uid_of(postgres_server.pid) != 0


def test_own_server_leaves_nothing_behind(postgres_server: Any) -> None:
    # postgres_server only for its skip (fail under CI) when PostgreSQL is missing
    server = PostgresServer()
    with server:
        pid = server.pid
        root = server.root
        assert pid is not None and root is not None
        assert Path(f"/proc/{pid}").exists()
        assert root.is_dir()
        with psycopg.connect(server.new_database()) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("runner",)
    assert not Path(f"/proc/{pid}").exists()
    assert not root.exists()
    assert server.pid is None
    server.stop()  # idempotent
