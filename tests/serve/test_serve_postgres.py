"""``runner serve --db postgresql://...``: several servers share the sessions,
one runs each, and a dead server's sessions are taken over by another.

Real parts: a throwaway PostgreSQL server from Debian's packages (the
``postgres_server`` fixture: its own cluster in a temp dir, run by an
unprivileged user, unix socket only), the real ``runner serve`` processes,
local sandboxes whose counter files prove how often each step ran.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import psycopg
import pytest
from agent_files import agent_yaml
from serve_process import Server, lines, processes_with_home, wait_for, wait_status

from runner.serve.store.base import NewSession, StoreError
from runner.serve.store.postgres import PostgresStore, lock_key, redacted
from runner.serve.store.sqlite import SqliteStore

BLOCK = "touch {flag}; echo $$ > {flag}.pid; while [ ! -f {go} ]; do sleep 0.05; done"


def shared_file(tmp_path: Path) -> Path:
    return agent_yaml(
        tmp_path,
        "shared.yaml",
        f"""\
            version: 1
            agent:
              name: shared
              model: local-model
              environment:
                sandbox: local
                default_exec_timeout_seconds: 120
                hooks:
                  - name: counted
                    on_create:
                      - run: echo ran >> create-1.count
                      - run: echo ran >> create-2.count; {BLOCK.format(flag="creating", go=tmp_path / "GO_CREATE")}
                      - run: echo ran >> create-3.count
                    on_destroy:
                      - run: echo ran >> destroy-1.count
                      - save: create-2.count
                        to: create-2.count
            """,
    )


@pytest.fixture
def two_servers(tmp_path: Path, postgres_dsn: str):
    """Two servers of one agent file on one database, each in its own folder."""
    agent = shared_file(tmp_path)
    servers = [
        Server(
            [agent],
            tmp_path / name,
            db=postgres_dsn,  # type: ignore[arg-type]
            args=["--claim-interval", "0.1"],
        )
        for name in ("a", "b")
    ]
    yield servers
    (tmp_path / "GO_CREATE").touch()  # a command a killed server left blocked ends
    for server in servers:
        server.stop()


# --- the store: the same queries on both engines --------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path: Path):
    if request.param == "sqlite":
        opened = SqliteStore(tmp_path / "journal.db")
    else:
        opened = PostgresStore(request.getfixturevalue("postgres_dsn"))
    yield opened
    opened.close()


def create(store, session_id: str, *, key: str | None = None, owner: str = "http://a"):
    """Insert a session as the server does (``create_session_async``: through
    the writer thread, the commit awaited)."""
    return anyio.run(
        store.create_session_async,
        NewSession(
            id=session_id,
            agent="shared",
            inputs={"n": 1},
            idempotency_key=key,
            fingerprint="f",
            file_hash="h",
            backend="local",
            owner=owner,
        ),
    )


def test_both_engines_keep_sessions_events_and_steps_alike(store) -> None:
    row = create(store, "sess_1", key="k1")
    assert (row.id, row.status, row.inputs, row.owner) == (
        "sess_1",
        "starting",
        {"n": 1},
        "http://a",
    )
    # The id and the idempotency key are unique: a second insert writes nothing.
    assert create(store, "sess_2", key="k1") is None
    assert create(store, "sess_1") is None
    assert store.session("sess_2") is None
    assert store.session_by_key("k1").id == "sess_1"

    created_at = row.created_at
    store.update("sess_1", status="waiting", sandbox={"root": "/x"})
    store.take("sess_1", "http://b")
    again = store.session("sess_1")
    assert (again.status, again.sandbox, again.owner) == ("waiting", {"root": "/x"}, "http://b")
    assert again.created_at == created_at  # a timestamp keeps its precision (not float4)
    assert again.updated_at >= created_at

    for name in ("a", "b", "c"):
        store.add_event("sess_1", {"event": name})  # queued: committed by the next write
    store.add_event("other", {"event": "x"})
    store.flush()
    assert list(store.events("sess_1", after=1)) == [(2, {"event": "b"}), (3, {"event": "c"})]
    assert list(store.events("other")) == [(1, {"event": "x"})]  # numbered per session

    store.finish_step("sess_1", 0, "on_create", 1, {"exit_code": 0})
    store.finish_step("sess_1", 0, "on_create", 1, {"exit_code": 1})  # the later record wins
    assert store.finished_step("sess_1", 0, "on_create", 1) == {"exit_code": 1}
    assert store.finished_step("sess_1", 0, "on_create", 2) is None
    store.finish_step("sess_1", 2, "on_create", -1, {})
    assert store.finished_hooks("sess_1", "on_create") == {2}

    create(store, "sess_3", owner="http://a")
    assert store.count_open() == 2
    assert [sid for sid, _ in store.open_ids()] == ["sess_1", "sess_3"]
    assert store.status_of("sess_3") == "starting" and store.status_of("nope") is None
    store.update("sess_3", status="closed")
    assert [r.id for r in store.sessions(open_only=True)] == ["sess_1"]
    assert [r.id for r in store.sessions()] == ["sess_1", "sess_3"]


def test_a_session_taken_over_is_fenced_from_the_server_that_lost_it(postgres_dsn: str) -> None:
    first, second = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    try:
        assert first.server_id != second.server_id
        assert first.claim("sess_f")
        create(first, "sess_f", owner="http://a")
        assert (first.count_open(), second.count_open()) == (1, 0)  # each counts its own
        first.release("sess_f")  # as if its claims connection had died
        assert second.claim("sess_f")
        second.take("sess_f", "http://b")
        # The server that lost it still runs it for a moment: its writes change nothing.
        first.update("sess_f", status="failed", error="the server stopped")
        first.end_turn("sess_f", conversation=[], result={"turn": "stale"})
        row = second.session("sess_f")
        assert (row.status, row.error, row.result, row.owner) == (
            "starting",
            None,
            None,
            "http://b",
        )
        assert row.server_id == second.server_id
        assert (first.count_open(), second.count_open()) == (0, 1)
        second.update("sess_f", status="waiting")
        assert second.status_of("sess_f") == "waiting"
    finally:
        first.close()
        second.close()


def test_a_sqlite_file_from_before_owners_gains_the_column(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, agent TEXT NOT NULL, status TEXT NOT NULL,"
        " inputs TEXT NOT NULL, idempotency_key TEXT UNIQUE, fingerprint TEXT NOT NULL,"
        " file_hash TEXT NOT NULL, backend TEXT NOT NULL, sandbox TEXT, result TEXT,"
        " error TEXT, conversation TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL)"
    )
    old.execute(
        "INSERT INTO sessions VALUES ('sess_old', 'a', 'waiting', '{}', NULL, 'f', 'h',"
        " 'local', NULL, NULL, NULL, NULL, 1.0, 1.0)"
    )
    old.commit()
    old.close()
    store = SqliteStore(path)
    try:
        assert store.session("sess_old").owner is None
        assert store.count_open() == 1
    finally:
        store.close()


# --- claims: PostgreSQL says which server runs a session ------------------


def test_a_session_is_claimed_by_one_store_at_a_time(postgres_dsn: str) -> None:
    first, second = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    try:
        assert first.id == second.id  # one database: one owner of durable containers
        assert first.claim("sess_x")
        assert first.claim("sess_x")  # again: still its own
        assert not second.claim("sess_x")
        assert second.claim("sess_y")
        first.release("sess_x")
        assert second.claim("sess_x")
        assert not first.claim("sess_x")
    finally:
        first.close()
    try:
        # Closing a store gives up its claims (its connection is gone).
        third = PostgresStore(postgres_dsn)
        assert not third.claim("sess_x")  # still the second's
        second.close()
        assert wait_for(lambda: third.claim("sess_x"), what="the claim to lapse")
    finally:
        third.close()


HOLDER = """
import sys, time
from runner.serve.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1])
assert store.claim("sess_held")
print("claimed", flush=True)
time.sleep(600)
"""


def test_a_killed_servers_claims_lapse_with_its_connection(postgres_dsn: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, postgres_dsn], stdout=subprocess.PIPE, text=True
    )
    store = PostgresStore(postgres_dsn)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        assert not store.claim("sess_held")
        holder.send_signal(signal.SIGKILL)  # no cleanup runs in the holder
        holder.wait(timeout=10)
        assert wait_for(
            lambda: store.claim("sess_held"),
            what="PostgreSQL to drop the dead process's lock",
            timeout=10,
        )
    finally:
        holder.kill()
        holder.wait()
        store.close()


def test_a_store_that_lost_its_claims_connection_says_so(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn)
    try:
        store.check_alive()  # fine while connected
        assert store.claim("sess_z")
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name LIKE 'runner serve % claims'"
            )
        with pytest.raises(StoreError, match="another server may take them over"):
            store.check_alive()
        other = PostgresStore(postgres_dsn)
        try:
            assert other.claim("sess_z")  # the lock went with the connection
        finally:
            other.close()
    finally:
        store.close()


def test_lock_keys_and_redaction() -> None:
    assert lock_key("sess_a") != lock_key("sess_b")
    assert -(2**63) <= lock_key("sess_a") < 2**63
    assert redacted("postgresql://u:s3cret@db.example/runner") == (
        "postgresql://u:***@db.example/runner"
    )
    assert redacted("postgresql://u@/runner?host=/tmp") == "postgresql://u@/runner?host=/tmp"


# --- servers ---------------------------------------------------------------


def test_a_second_server_takes_over_a_killed_servers_session(two_servers, tmp_path) -> None:
    a, b = two_servers
    a.start()
    b.start()
    with a.client() as client:
        created = client.post("/v1/sessions", json={"agent": "shared"})
        assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    workspace = wait_for(lambda: a.workspaces(), what="the workspace")[0]
    wait_for(lambda: (workspace / "creating").exists(), what="step 2 of on_create to start")
    pid_file = workspace / "creating.pid"  # written just after "creating": wait for it too
    first_run = int(
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="pid")
    )

    with b.client() as client:
        # Any server reads any session; only its owner runs it.
        seen = client.get(f"/v1/sessions/{session_id}").json()
        assert seen["status"] == "starting"
        assert [s["id"] for s in client.get("/v1/sessions").json()["sessions"]] == [session_id]
        refused = client.delete(f"/v1/sessions/{session_id}")
        assert refused.status_code == 409
        assert refused.json()["error"] == "owned_elsewhere"
        assert a.url in refused.json()["message"]

    a.kill()
    with b.client() as client:
        # b takes it over: step 2 (cut off) runs again; step 1 does not.
        wait_for(lambda: lines(workspace / "create-2.count") == 2, what="step 2 to run again")
        assert "taking over 1 session(s)" in b.stderr()
        # a's cut-off run was killed before the step ran again
        assert first_run not in processes_with_home(workspace.parent / "home")
        (tmp_path / "GO_CREATE").touch()
        session = wait_status(client, session_id, "waiting", "failed")
        assert session["status"] == "waiting", session["error"]
        assert a.workspaces() == [workspace]  # re-attached, not a new sandbox
        assert (lines(workspace / "create-1.count"), lines(workspace / "create-3.count")) == (1, 1)
        closed = client.delete(f"/v1/sessions/{session_id}").json()
    assert closed["status"] == "closed", closed["error"]
    assert not workspace.exists()
    assert lines(b.output_dir / session_id / "create-2.count") == 2  # saved by b
    assert processes_with_home(workspace.parent / "home") == []


def test_each_server_runs_its_own_sessions_and_streams_the_others(two_servers) -> None:
    a, b = two_servers
    a.start()
    b.start()
    (a.workdir.parent / "GO_CREATE").touch()  # on_create runs through
    with a.client() as ca, b.client() as cb:
        on_a = ca.post("/v1/sessions", json={"agent": "shared"}).json()["id"]
        on_b = cb.post("/v1/sessions", json={"agent": "shared"}).json()["id"]
        # b follows a's session from the database: the same events a stores.
        streamed: list[str] = []

        def follow() -> None:
            with (
                httpx.Client(base_url=b.url, headers=cb.headers, timeout=30) as client,
                client.stream("GET", f"/v1/sessions/{on_a}/events") as response,
            ):
                streamed.extend(x for x in response.iter_lines() if x.startswith("data: "))

        follower = threading.Thread(target=follow)
        follower.start()
        assert wait_status(ca, on_a, "waiting")["status"] == "waiting"
        # Polled, not woken: within a second, not at the 15 s keep-alive.
        wait_for(
            lambda: any('"session_started"' in line for line in streamed),
            what="b's stream to carry a's session_started",
            timeout=5,
        )
        assert wait_status(cb, on_b, "waiting")["status"] == "waiting"
        # Both alive for ten of their looks for sessions to take over: neither
        # takes the other's (a negative: nothing to wait for but time).
        time.sleep(1.0)
        owners = {s["id"]: s["owner"] for s in ca.get("/v1/sessions").json()["sessions"]}
        assert owners == {on_a: a.url, on_b: b.url}
        assert cb.delete(f"/v1/sessions/{on_a}").status_code == 409
        assert ca.delete(f"/v1/sessions/{on_b}").status_code == 409
        assert ca.delete(f"/v1/sessions/{on_a}").json()["status"] == "closed"
        assert cb.delete(f"/v1/sessions/{on_b}").json()["status"] == "closed"
        # b reads a's events from the database every half second: its stream
        # ends soon after the close (not at the 15 s keep-alive).
        follower.join(timeout=5)
        assert not follower.is_alive()
        assert streamed and '"session_closed"' in streamed[-1]
    # Neither took the other's session over while both were alive.
    assert "taking over" not in a.stderr() + b.stderr()


def test_a_restarted_server_resumes_its_sessions_from_postgres(
    tmp_path: Path, postgres_dsn: str
) -> None:
    server = Server([shared_file(tmp_path)], tmp_path / "a", db=postgres_dsn)  # type: ignore[arg-type]
    try:
        server.start()
        with server.client() as client:
            session_id = client.post("/v1/sessions", json={}).json()["id"]
        workspace = wait_for(lambda: server.workspaces(), what="the workspace")[0]
        wait_for(lambda: (workspace / "creating").exists(), what="step 2 to start")
        server.kill()
        server.start()
        assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
        (tmp_path / "GO_CREATE").touch()
        with server.client() as client:
            assert wait_status(client, session_id, "waiting", "failed")["status"] == "waiting"
            assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
        assert [lines(server.output_dir / session_id / "create-2.count")] == [2]
    finally:
        (tmp_path / "GO_CREATE").touch()
        server.stop()


def test_a_server_that_loses_its_claims_stops_at_once_and_another_takes_over(
    two_servers, tmp_path: Path, postgres_dsn: str
) -> None:
    a, b = two_servers
    a.start()
    b.start()
    with a.client() as client:
        session_id = client.post("/v1/sessions", json={}).json()["id"]
    workspace = wait_for(lambda: a.workspaces(), what="the workspace")[0]
    wait_for(lambda: (workspace / "creating").exists(), what="step 2 of on_create to start")
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        # a's claims connection ends (a restart of PostgreSQL, a broken network):
        # only a's, found by the process id in its name.
        terminated = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (f"runner serve {a.process.pid} claims",),
        ).fetchall()
    assert terminated == [(True,)]
    a.process.wait(timeout=30)
    assert a.process.returncode == 2
    assert "another server may take them over, so this one stops" in a.stderr()
    # a stopped as if killed: it did not unwind the session (no failed status,
    # no sandbox deleted), and b takes it over and finishes it.
    with b.client() as client:
        wait_for(lambda: lines(workspace / "create-2.count") == 2, what="b to run step 2 again")
        (tmp_path / "GO_CREATE").touch()
        session = wait_status(client, session_id, "waiting", "failed")
        assert session["status"] == "waiting", session["error"]
        assert session["owner"] == b.url
        assert lines(workspace / "create-1.count") == 1
        assert client.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"


def test_an_unreachable_database_stops_the_server_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql://runner:pa55word@/runner?host={tmp_path}/no-such-dir"
    server = Server([shared_file(tmp_path)], tmp_path / "a", db=url)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="exited 2"):
        server.start()
    log = server.stderr()
    assert "cannot open the database postgresql://runner:***@/runner" in log
    assert "pa55word" not in log
    assert not (server.output_dir / "runner-serve.db").exists()


def test_the_database_url_can_come_from_the_environment(tmp_path: Path, postgres_dsn: str) -> None:
    server = Server([shared_file(tmp_path)], tmp_path / "a", env={"RUNNER_SERVE_DB": postgres_dsn})
    try:
        server.start()
        assert "(database postgresql://runner@/" in server.stderr()
        assert not (server.output_dir / "runner-serve.db").exists()
    finally:
        server.stop()


# --- Docker: the container goes with the session to the server taking it over


@pytest.mark.docker
def test_a_docker_session_is_taken_over_in_its_container_and_nothing_else_is_swept(
    tmp_path: Path, postgres_dsn: str, docker_client
) -> None:
    from test_serve_docker import count, docker_file, durable_containers, exists, in_container

    agent = docker_file(tmp_path)
    a, c = (
        Server([agent], tmp_path / name, db=postgres_dsn, args=["--claim-interval", "0.1"])  # type: ignore[arg-type]
        for name in ("a", "c")
    )
    owner = ""
    try:
        a.start()
        c.start()
        with psycopg.connect(postgres_dsn) as db:
            ((owner,),) = db.execute("SELECT value FROM meta WHERE key = 'id'").fetchall()

        def container_of(server: Server, session_id: str):
            def recorded() -> str | None:
                with psycopg.connect(postgres_dsn) as db:
                    ((record,),) = db.execute(
                        "SELECT sandbox FROM sessions WHERE id = %s", (session_id,)
                    ).fetchall()
                return record and json.loads(record).get("container_id")

            return docker_client.containers.get(wait_for(recorded, what="the container"))

        with a.client() as ca, c.client() as cc:
            # On a: a session let through to waiting.  On c: one cut off mid-on_create.
            on_a = ca.post("/v1/sessions", json={}).json()["id"]
            kept = container_of(a, on_a)
            wait_for(lambda: "creating" in in_container(kept, "ls"), what="a's step 2")
            in_container(kept, "touch GO_CREATE")
            assert wait_status(ca, on_a, "waiting")["status"] == "waiting"
            on_c = cc.post("/v1/sessions", json={}).json()["id"]
            moved = container_of(c, on_c)
            wait_for(lambda: "creating" in in_container(moved, "ls"), what="c's step 2")
        c.kill()
        moved.reload()
        assert moved.status == "running"  # durable: the server's death did not take it

        with a.client() as ca:
            wait_for(lambda: count(moved, "create-2.count") == 2, what="a to run step 2 again")
            assert "taking over 1 session(s)" in a.stderr()
            in_container(moved, "touch GO_CREATE")
            taken = wait_status(ca, on_c, "waiting", "failed")
            assert taken["status"] == "waiting", taken["error"]
            assert taken["owner"] == a.url
            assert [count(moved, f"create-{n}.count") for n in (1, 2, 3)] == [1, 2, 1]
            # Taking c's session over swept only c's session's containers: a's own stays.
            assert exists(docker_client, kept.id)
            assert sorted(x.id for x in durable_containers(docker_client, owner)) == sorted(
                [kept.id, moved.id]
            )
            for session_id, container in ((on_a, kept), (on_c, moved)):
                in_container(container, "touch GO_DESTROY")
                closed = ca.delete(f"/v1/sessions/{session_id}").json()
                assert closed["status"] == "closed", closed["error"]
        assert durable_containers(docker_client, owner) == []
    finally:
        for server in (a, c):
            server.stop()
        for container in durable_containers(docker_client, owner) if owner else []:
            container.remove(force=True, v=True)


def test_a_take_over_stops_at_max_sessions_and_leaves_the_rest(tmp_path, postgres_dsn) -> None:
    """A server takes over no more sessions than ``--max-sessions`` lets it
    hold; the rest wait for another server (here: the dead one, restarted)."""
    agent = shared_file(tmp_path)
    (tmp_path / "GO_CREATE").touch()  # on_create runs through: sessions wait
    a = Server([agent], tmp_path / "a", db=postgres_dsn, args=["--claim-interval", "0.1"])
    b = Server(
        [agent],
        tmp_path / "b",
        db=postgres_dsn,
        args=["--claim-interval", "0.1", "--max-sessions", "2"],
    )
    try:
        a.start()
        b.start()
        with a.client() as client:
            ids = [
                client.post("/v1/sessions", json={"agent": "shared"}).json()["id"] for _ in "abc"
            ]
            for session_id in ids:
                assert wait_status(client, session_id, "waiting", "failed")["status"] == "waiting"
        a.kill()
        wait_for(lambda: "taking over 2 session(s)" in b.stderr(), what="b to take two")
        with b.client() as client:
            owners = [client.get(f"/v1/sessions/{i}").json()["owner"] for i in ids]
        assert owners.count(b.url) == 2 and owners.count(a.url) == 1, owners
        a.start()  # the one b had no room for
        assert "resuming 1 session(s) left open" in a.stderr()
    finally:
        a.stop()
        b.stop()


def survivors_take_over(tmp_path: Path, postgres_dsn: str, *, a_max: int) -> list[str]:
    """Three servers; ``c`` opens six sessions and is killed; the owners of
    the six once ``a`` (``--max-sessions a_max``) and ``b`` took them all."""
    agent = shared_file(tmp_path)
    (tmp_path / "GO_CREATE").touch()  # on_create runs through: sessions wait
    a = Server([agent], tmp_path / "a", db=postgres_dsn, args=["--max-sessions", str(a_max)])
    b, c = (Server([agent], tmp_path / name, db=postgres_dsn) for name in "bc")
    try:
        for server in (a, b, c):
            server.start()
        with c.client() as client:
            ids = [
                client.post("/v1/sessions", json={"agent": "shared"}).json()["id"] for _ in "123456"
            ]
            for session_id in ids:
                assert wait_status(client, session_id, "waiting", "failed")["status"] == "waiting"
        c.kill()
        with b.client() as client:

            def owners() -> list[str] | None:
                found = [client.get(f"/v1/sessions/{i}").json()["owner"] for i in ids]
                return found if c.url not in found else None

            taken = wait_for(owners, what="a and b to take every session over", timeout=60)
            for session_id in ids:
                assert wait_status(client, session_id, "waiting", "failed")["status"] == "waiting"
        return [{a.url: "a", b.url: "b"}[owner] for owner in taken]
    finally:
        for server in (a, b, c):
            server.stop()


def test_the_survivors_split_a_dead_servers_sessions(tmp_path, postgres_dsn) -> None:
    """Whichever looks first takes its even share only (3 of 6), not all."""
    owners = survivors_take_over(tmp_path, postgres_dsn, a_max=100)
    assert (owners.count("a"), owners.count("b")) == (3, 3), owners


def test_a_survivor_takes_over_no_more_than_its_max_sessions(tmp_path, postgres_dsn) -> None:
    """``a`` holds at most 2; ``b`` takes its share (3), then, as no other
    server takes the last one, that one too."""
    owners = survivors_take_over(tmp_path, postgres_dsn, a_max=2)
    assert (owners.count("a"), owners.count("b")) == (2, 4), owners
