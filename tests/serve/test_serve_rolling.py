"""A rolling restart on PostgreSQL: ``kill -TERM`` one of two servers while
its sessions are in the middle of ``on_create``; no session fails, and every
step ran exactly once (issue 28's promise).

The stopping server lets each running step finish and be journaled, stops
its sessions before their next step (``SessionWork.between_steps``) and
exits; the other server takes them over and runs the rest.  Each step run
appends its ``RUNNER_STEP_ID`` to one marker file on the host, so the file
says how often each step of each session ran, on whichever server.  The
third step blocks until the stopped server has exited: a drain that waited
for it, or a step cut off and run again, fails the test.

``RUNNER_TEST_ROLLING_SESSIONS`` sets how many sessions (default 20, the
issue's number).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import httpx
from agent_files import agent_yaml
from serve_process import Server, wait_for, wait_status

SESSIONS = int(os.environ.get("RUNNER_TEST_ROLLING_SESSIONS", "20"))
#: A step that blocks until ``{go}`` exists, after it has marked its run.
GATED = "echo $RUNNER_STEP_ID >> {runs}; touch {marks}/{name}.$RUNNER_STEP_ID; " + (
    "while [ ! -f {go} ]; do sleep 0.05; done"
)


def rolling_file(tmp_path: Path, marks: Path) -> Path:
    runs = marks / "runs"

    def gated(name: str, go: str) -> str:
        return GATED.format(runs=runs, marks=marks, name=name, go=tmp_path / go)

    return agent_yaml(
        tmp_path,
        "rolling.yaml",
        f"""\
            version: 1
            agent:
              name: rolling
              model: local-model
              environment:
                sandbox: local
                default_exec_timeout_seconds: 600
                hooks:
                  - name: steps
                    on_create:
                      - run: echo $RUNNER_STEP_ID >> {runs}
                      - run: {gated("second", "GO_SECOND")}
                      - run: {gated("third", "GO_THIRD")}
            """,
    )


def test_sigterm_on_one_of_two_servers_mid_on_create_fails_nothing_and_runs_each_step_once(
    tmp_path: Path, postgres_dsn: str
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    agent = rolling_file(tmp_path, marks)
    a, b = (
        Server(
            [agent],
            tmp_path / name,
            db=postgres_dsn,  # type: ignore[arg-type]
            args=["--claim-interval", "0.1", "--drain-timeout", "300"],
        )
        for name in "ab"
    )
    try:
        a.start()
        b.start()
        with a.client() as client:
            ids = [client.post("/v1/sessions", json={}).json()["id"] for _ in range(SESSIONS)]
        # Every session is in its second step, on a.
        wait_for(
            lambda: len(list(marks.glob("second.*"))) == SESSIONS,
            what="every session's second step",
            timeout=120,
        )
        stopping = a.drain_in_background()
        (tmp_path / "GO_SECOND").touch()  # the running steps finish, on a
        assert stopping.join(timeout=300) == [0], a.stderr()
        assert list(marks.glob("third.*")) == []  # a started no step after the signal
        assert f"{SESSIONS} session(s) stopped between two steps" in a.stderr()

        (tmp_path / "GO_THIRD").touch()
        with b.client() as client:
            for session_id in ids:
                session = wait_status(client, session_id, "waiting", "failed")
                assert session["status"] == "waiting", session["error"]
                assert session["owner"] == b.url
                resumed = [
                    e for e in _events(client, session_id) if e["event"] == "session_resumed"
                ]
                assert [(e["server"], e["status"]) for e in resumed] == [(b.url, "starting")]
        assert "taking over" in b.stderr()
        runs = Counter((marks / "runs").read_text().split())
        expected = {f"{i}.steps.on_create.{n}" for i in ids for n in (1, 2, 3)}
        assert set(runs) == expected
        assert [step for step, count in runs.items() if count != 1] == []
    finally:
        (tmp_path / "GO_SECOND").touch()
        (tmp_path / "GO_THIRD").touch()
        a.stop()
        b.stop()


def _events(client: httpx.Client, session_id: str) -> list[dict]:
    """The session's events up to ``session_started`` (a waiting session's
    stream stays open: it is left there)."""
    events = []
    with client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
                if events[-1]["event"] == "session_started":
                    break
    return events
