"""How ``runner serve`` writes to its database, and how a server learns of
another server's writes (PostgreSQL).

- A session's writes share transactions: its events are not committed one
  by one but with the step's record that follows them (group commit by the
  store's writer thread), at most two transactions per step however slow
  the step; and an event is never visible before it is committed.
- A server whose clients follow a session that another server runs is woken
  by that server's commits (``LISTEN``/``NOTIFY``), not by reading the
  database twice a second per stream.

Real parts: a throwaway PostgreSQL server (the ``postgres_dsn`` fixture),
real ``runner serve`` processes, local sandboxes.  Counts come from the
database itself: the ``xmin`` of each row (the transaction that wrote it)
and ``pg_stat_activity`` (when each connection last ran a query).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import psycopg
from agent_files import agent_yaml
from serve_process import Server, wait_for, wait_status

from runner.serve.store.sqlite import SqliteStore

STEPS = 12


def steps_file(tmp_path: Path, steps: int = STEPS) -> Path:
    run = [f"                      - run: echo {n} >> steps.count" for n in range(steps)]
    return agent_yaml(
        tmp_path,
        "steps.yaml",
        """\
            version: 1
            agent:
              name: steps
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: many
                    on_create:
            """,
        "\n".join(run) + "\n",
    )


def transactions_of(dsn: str, session_id: str) -> tuple[int, int, int]:
    """The rows a session's events and journal hold, how many transactions
    wrote them (distinct ``xmin``), and how many of its ``step_finished``
    events share a transaction with a step record."""
    with psycopg.connect(dsn, autocommit=True) as db:
        events = db.execute(
            "SELECT xmin::text, event FROM events WHERE session_id = %s", (session_id,)
        ).fetchall()
        steps = db.execute(
            "SELECT xmin::text FROM steps WHERE session_id = %s", (session_id,)
        ).fetchall()
    writers = {xmin for xmin, _ in events} | {xmin for (xmin,) in steps}
    step_xmins = {xmin for (xmin,) in steps}
    shared = sum(
        1
        for xmin, text in events
        if json.loads(text)["event"] == "step_finished" and xmin in step_xmins
    )
    return len(events) + len(steps), len(writers), shared


def test_a_sessions_events_commit_with_its_step_records_not_one_by_one(
    tmp_path: Path, postgres_dsn: str
) -> None:
    server = Server([steps_file(tmp_path)], tmp_path / "a", db=postgres_dsn)  # type: ignore[arg-type]
    with server.start(), server.client() as client:
        session_id = client.post("/v1/sessions", json={"agent": "steps"}).json()["id"]
        assert wait_status(client, session_id, "waiting")["status"] == "waiting"
        events = [e["event"] for e in sse_events_until(client, session_id, "session_started")]
    assert events.count("step_finished") == STEPS
    rows, transactions, shared = transactions_of(postgres_dsn, session_id)
    # One commit per row before (each event, then each record, on its own):
    # rows >= 3 per step.  Now a step's record commits with the events queued
    # before it (the previous step's step_finished, its own step_started), and
    # events wait up to 50 ms for it: at most two transactions per step even
    # when a step outlasts that wait, plus the start's and the end's.
    assert rows >= 3 * STEPS
    assert transactions <= 2 * STEPS + 8, (rows, transactions, shared)


def sse_events_until(client: httpx.Client, session_id: str, last: str) -> list[dict]:
    """The session's events up to and including the first ``last`` one."""
    events: list[dict] = []
    with client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
                if events[-1]["event"] == last:
                    break
    return events


def test_a_step_record_commits_the_events_queued_before_it_and_wakes_followers(
    tmp_path: Path,
) -> None:
    """The store's own order: an event is queued (``add_event`` does not
    wait); the next durable write commits it too, and the commit is what
    wakes the clients following the session (``on_commit``)."""
    store = SqliteStore(tmp_path / "journal.db")
    try:
        committed: list[set[str]] = []
        store.on_commit = committed.append
        store.add_event("sess_1", {"event": "step_started"})
        store.finish_step("sess_1", 0, "on_create", 0, {"exit_code": 0})
        # Durable when finish_step returned, with the event queued before it.
        assert [seq for seq, _ in store.events("sess_1")] == [1]
        assert store.finished_step("sess_1", 0, "on_create", 0) == {"exit_code": 0}
        assert {"sess_1"} in committed
    finally:
        store.close()


def idle_since(dsn: str) -> dict[int, float]:
    """For each server's read connection (``application_name`` "runner serve
    PID"), when it last began or ended a query (epoch seconds)."""
    with psycopg.connect(dsn, autocommit=True) as db:
        rows = db.execute(
            "SELECT pid, extract(epoch FROM state_change)::float8 FROM pg_stat_activity"
            " WHERE application_name ~ '^runner serve [0-9]+$' AND datname = current_database()"
        ).fetchall()
    return dict(rows)


def test_streams_following_another_servers_session_are_woken_by_its_commits(
    tmp_path: Path, postgres_dsn: str
) -> None:
    agent = steps_file(tmp_path, steps=1)
    # Rare looks for sessions to take over: the read connections stay idle
    # unless a stream reads.
    a, b = (
        Server([agent], tmp_path / name, db=postgres_dsn, args=["--claim-interval", "30"])  # type: ignore[arg-type]
        for name in ("a", "b")
    )
    streams = 10
    followed: list[list[dict]] = [[] for _ in range(streams)]
    threads: list[threading.Thread] = []
    try:
        a.start()
        b.start()
        with a.client() as on_a, b.client() as on_b:
            session_id = on_a.post("/v1/sessions", json={"agent": "steps"}).json()["id"]
            assert wait_status(on_a, session_id, "waiting")["status"] == "waiting"

            def follow(index: int) -> None:
                with (
                    httpx.Client(base_url=b.url, headers=on_b.headers, timeout=60) as client,
                    client.stream("GET", f"/v1/sessions/{session_id}/events") as response,
                ):
                    for line in response.iter_lines():
                        if line.startswith("data: "):
                            followed[index].append(json.loads(line[len("data: ") :]))

            threads = [threading.Thread(target=follow, args=(n,)) for n in range(streams)]
            for thread in threads:
                thread.start()
            wait_for(
                lambda: all(any(e["event"] == "session_started" for e in f) for f in followed),
                what="every stream on b to carry a's session so far",
            )
            time.sleep(0.5)  # the streams' last reads are done: they wait now
            before = idle_since(postgres_dsn)
            # Ten streams polling twice a second would each read the database
            # four times in these two seconds (80 queries); woken by commits,
            # they read nothing while nothing is committed.  (A negative:
            # nothing to wait for but time.)
            time.sleep(2.0)
            after = idle_since(postgres_dsn)
            assert len(after) == 2, after  # both servers' read connections
            assert after == before, "a read connection ran queries while nothing changed"
            # The close on a commits; b's streams wake, read it and end.
            assert on_a.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
            for thread in threads:
                thread.join(timeout=60)
            assert not any(thread.is_alive() for thread in threads)
            assert all(f[-1]["event"] == "session_closed" for f in followed)
    finally:
        for thread in threads:
            thread.join(timeout=1)
        a.stop()
        b.stop()
