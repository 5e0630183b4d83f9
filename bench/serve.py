"""``runner serve``: sessions through the HTTP API against the same sessions in-process.

    .venv/bin/python bench/serve.py [--rounds N | --quick] [--no-docker] [--no-postgres]

Everything runs in one invocation, on one machine: a real ``runner serve``
process (this checkout's CLI, loopback, a throwaway database and output
folder) and, in this process, ``agent.start_session()`` on the same YAML
file.  Numbers are ratios of the two, taken side by side (API and in-process
rounds interleaved, so drift hits both alike); absolute times depend on the
machine.  The agent has one hook whose ``on_create`` is one ``run:`` step.

1. create to first hook step: from just before ``POST /v1/sessions`` (API) or
   ``agent.start_session()`` (in-process) to the ``time`` of the session's
   ``step_started`` event (read from the session's SSE stream; in-process from
   an event listener): both clocks are this machine's.  Median, p50/p99 over N
   sequential sessions (default 20; ``--quick``: 8), each closed
   (``DELETE``/``close()``) outside the timed part.  On the local sandbox, on
   Docker cold (``pool: 0``) and on Docker with a warm pool (``pool: 2``; the
   pool is refilled, outside the timed part, before each timed session: the
   server's by counting its idle pool containers, in-process by
   ``wait_pool_ready``); and with a seeded pool (``seeded_pool: 2``, a
   cached hook before the measured one: after an untimed first session
   saved the snapshot, each session starts from a container of it, the
   pools refilled the same way, in-process by ``wait_seeded_pool_ready``).
2. sessions per second: K sessions run whole (create, ``on_create``, close),
   C at a time, wall time from the first create to the last close (local:
   K=40, C=10; Docker cold: K=8, C=4).
3. 100 concurrent sessions on the local sandbox through the API: 100 POSTs at
   once, every session ``waiting``, then 100 DELETEs at once; failures (a
   non-201, a session not ``waiting``, a close not ``closed``) must be 0.
4. resume after SIGKILL with 50 sessions in flight (local sandbox): 50 sessions
   blocked in their second ``on_create`` step; the server is killed
   (SIGKILL) and started again.  Measured from the new process's start: until
   it listens, until all 50 are back in their cut-off step (it runs again;
   the finished first step does not, checked by its counter), and until all
   50 are ``waiting`` once unblocked.
5. PostgreSQL (``--db postgresql://``; a throwaway cluster started by
   ``tests/support/postgres_server.py``, unix socket, ``fsync`` on as a deployment
   would have it): row 1 on the local sandbox with the server on
   PostgreSQL instead of SQLite; and take-over: two servers on one database,
   50 sessions blocked in their second step on the first, which is
   SIGKILLed; measured from the kill, until the second server has all 50
   back in their cut-off step (``--claim-interval`` 1 s, the default), and
   until all 50 are ``waiting`` once unblocked.
6. the stores side by side (``--stores-only``; local sandbox): one server on
   SQLite and one on PostgreSQL (``fsync`` on), the same agent, rounds
   interleaved: sessions per second with 10 clients (each session created,
   ``waiting``, closed), as PostgreSQL / SQLite; and with 50 clients, each
   ``POST /v1/sessions``' own time, p50 and p99, on each store.

Containers: the server's are durable, labelled ``sandbox-runner.durable=<id
of the bench's database>``; this process's carry
``sandbox-runner.owner-pid=<this pid>``.  Both sets are removed at the end,
even on Ctrl-C, and the count removed is printed.  Not a test and not a gate:
the test suite never runs it; it prints a markdown table and exits 0 (130 if
interrupted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.sandboxes.docker.environment import LABEL_DURABLE, LABEL_OWNER_PID  # noqa: E402
from runner.sandboxes.docker.snapshots import LABEL_SNAPSHOT  # noqa: E402

IMAGE = os.environ.get("RUNNER_DOCKER_IMAGE", "sandbox-runner-test:latest")
TOKEN = "bench-token-0123456789abcdef"
LABEL_SESSION = "sandbox-runner.session-id"
PID = os.getpid()


# --- the agent ------------------------------------------------------------------


def agent_file(
    folder: Path, *, sandbox: str, pool: int = 0, block: Path | None = None, seeded: int = 0
) -> Path:
    """One hook: ``on_create`` is one quick step (plus, with ``block``, a step
    that waits for that file, counting its runs).  With ``seeded``, a cached
    hook comes first (its snapshot seeds the pool, ``seeded_pool: N``), so
    the measured step is still the first hook's."""
    environment = [f"sandbox: {sandbox}"]
    if sandbox == "docker":
        environment += [f"image: {IMAGE}", f"pool: {pool}"]
    cached = []
    if seeded:
        environment.append(f"seeded_pool: {seeded}")
        cached = [
            "      - name: seed",
            "        cache: true",
            "        on_create:",
            f"          - run: echo {os.getpid()} > seed.txt",
        ]
    steps = ["- run: echo ran >> first.count"]
    if block is not None:
        steps.append(
            f"- run: echo ran >> blocked.count; while [ ! -f {block} ]; do sleep 0.05; done"
        )
    text = "\n".join(
        [
            "version: 1",
            "agent:",
            "  name: bench",
            "  model: local-model",
            "  environment:",
            *(f"    {line}" for line in environment),
            "    default_exec_timeout_seconds: 600",
            "    hooks:",
            *cached,
            "      - name: first",
            "        on_create:",
            *(f"          {line}" for line in steps),
            "",
        ]
    )
    folder.mkdir(parents=True, exist_ok=True)
    kind = "block" if block else f"seeded{seeded}" if seeded else "plain"
    path = folder / f"bench-{sandbox}-{pool}-{kind}.yaml"
    path.write_text(text)
    return path


# --- a server process -----------------------------------------------------------


class Server:
    def __init__(self, file: Path, folder: Path, db: str | None = None) -> None:
        self.file = file
        self.db = db
        self.folder = folder
        self.out = folder / "out"
        self.tmp = folder / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.log = folder / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.started_at = 0.0
        self.listening_after = 0.0

    def start(self) -> Server:
        self.log.write_bytes(b"")
        env = {**os.environ, "RUNNER_SERVE_TOKEN": TOKEN, "TMPDIR": str(self.tmp)}
        self.started_at = time.perf_counter()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "runner", "serve", str(self.file)),
                    *("--port", "0", "--output-dir", str(self.out)),
                    *(("--db", self.db) if self.db else ()),
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.folder,
            )
        deadline = time.monotonic() + 60
        while True:
            text = self.log.read_text(errors="replace")
            found = re.search(r"on (http://127\.0\.0\.1:\d+) ", text)
            if found:
                self.url = found.group(1)
                self.listening_after = time.perf_counter() - self.started_at
                return self
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"runner serve did not start: {text}")
            time.sleep(0.01)

    def owner(self) -> str | None:
        if self.db:  # the bench's PostgreSQL rows run on the local sandbox only
            return None
        db = self.out / "runner-serve.db"
        if not db.exists():
            return None
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT value FROM meta WHERE key = 'id'").fetchall()
        return rows[0][0] if rows else None

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=600,
            limits=httpx.Limits(max_connections=300, max_keepalive_connections=300),
        )

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


SERVERS: list[Server] = []
POOLS: list[Any] = []


async def wait_until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def first_step_time(client: httpx.AsyncClient, session_id: str) -> float:
    """The ``time`` of the session's first ``step_started`` event, from its SSE stream."""
    async with client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["event"] == "step_started":
                    return event["time"]
                if event["event"] in ("session_failed", "hook_failed"):
                    raise RuntimeError(f"session {session_id} failed: {event}")
    raise RuntimeError(f"session {session_id} ended without a step")


async def status_of(client: httpx.AsyncClient, session_id: str) -> str:
    return (await client.get(f"/v1/sessions/{session_id}")).json()["status"]


async def api_session(client: httpx.AsyncClient) -> float:
    """One session through the API: create to first step (s); closed afterwards."""
    started = time.time()
    created = await client.post("/v1/sessions", json={"agent": "bench"})
    created.raise_for_status()
    session_id = created.json()["id"]
    latency = await first_step_time(client, session_id) - started
    await wait_until(lambda: _in(status_of(client, session_id), ("waiting", "failed")), "waiting")
    closed = (await client.delete(f"/v1/sessions/{session_id}")).json()
    if closed["status"] != "closed":
        raise RuntimeError(f"session {session_id} did not close: {closed}")
    return latency


async def _in(value: Awaitable[str], allowed: tuple[str, ...]) -> bool:
    return (await value) in allowed


async def local_session(agent: Any) -> float:
    """The same in this process: ``start_session()`` to first step (s); closed afterwards."""
    from runner.core.events import listen

    seen: list[float] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "step_started" and not seen:
            seen.append(event["time"])

    started = time.time()
    with listen(on_event):
        session = await agent.start_session()
    await session.close()
    return seen[0] - started


def compile_agent(path: Path, out: Path) -> Any:
    from runner.config import compile_file

    return compile_file(path, output_dir=out).agent


# --- docker helpers -------------------------------------------------------------


def docker_ids(*filters: str) -> list[str]:
    args = ["docker", "ps", "-aq", "--no-trunc"]
    for f in filters:
        args += ["--filter", f"label={f}"]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    return result.stdout.split()


def docker_labels(container_id: str) -> dict[str, str]:
    result = subprocess.run(
        ["docker", "inspect", "--format", "{{json .Config.Labels}}", container_id],
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(result.stdout or "{}") or {}


async def server_pool_ready(server: Server, size: int) -> None:
    """Wait until the server's pool holds ``size`` idle containers."""
    owner = server.owner()
    assert owner

    async def full() -> bool:
        idle = [
            c
            for c in docker_ids(f"{LABEL_DURABLE}={owner}")
            if docker_labels(c).get(LABEL_SESSION, "").startswith("pool-")
            and not _claimed(server, c)
        ]
        return len(idle) >= size

    await wait_until(full, "the server's pool to fill", timeout=300)


def _claimed(server: Server, container_id: str) -> bool:
    db = server.out / "runner-serve.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT sandbox FROM sessions WHERE sandbox IS NOT NULL").fetchall()
    return any(json.loads(r[0]).get("container_id") == container_id for r in rows)


def cleanup() -> int:
    """Stop every server, close every in-process pool, remove every container of this run."""
    for server in SERVERS:
        server.stop()
    for environment in POOLS:
        environment.close_pool()
    ids = docker_ids(f"{LABEL_OWNER_PID}={PID}")
    for server in SERVERS:
        owner = server.owner()
        if owner:
            ids += docker_ids(f"{LABEL_DURABLE}={owner}")
    if ids:
        subprocess.run(["docker", "rm", "-f", *sorted(set(ids))], capture_output=True, check=False)
    made = set(docker_images(f"label={LABEL_SNAPSHOT}")) - SNAPSHOTS_BEFORE
    if made:  # the seeded row's snapshot
        subprocess.run(["docker", "rmi", "-f", *sorted(made)], capture_output=True, check=False)
    return len(set(ids))


def docker_images(*filters: str) -> list[str]:
    argv = ["docker", "images", "-q", "--no-trunc"]
    for item in filters:
        argv += ["--filter", item]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    return result.stdout.split()


#: The snapshot images present before this run (``cleanup`` removes the others).
SNAPSHOTS_BEFORE: set[str] = set()


# --- measures -------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


class Table:
    def __init__(self) -> None:
        self.rows: list[str] = [
            "| measure | API (`runner serve`) | in-process | API / in-process |",
            "|---|---|---|---|",
        ]

    def latency(self, name: str, api: list[float], local: list[float]) -> None:
        self.rows.append(
            f"| {name}: create to first hook step, p50 / p99 (n={len(api)}) "
            f"| {ms(pct(api, 50))} / {ms(pct(api, 99))} "
            f"| {ms(pct(local, 50))} / {ms(pct(local, 99))} "
            f"| {pct(api, 50) / pct(local, 50):.2f}x / {pct(api, 99) / pct(local, 99):.2f}x |"
        )

    def rate(self, name: str, api: float, local: float) -> None:
        self.rows.append(
            f"| {name}: sessions per second | {api:.1f}/s | {local:.1f}/s | {local / api:.2f}x "
            "(time) |"
        )

    def line(self, name: str, api: str, local: str = "-", ratio: str = "-") -> None:
        self.rows.append(f"| {name} | {api} | {local} | {ratio} |")

    def print(self) -> None:
        print("\n".join(self.rows))


async def latencies(
    table: Table,
    name: str,
    folder: Path,
    file: Path,
    rounds: int,
    pool: int = 0,
    db: str | None = None,
    seeded: int = 0,
) -> None:
    server = Server(file, folder, db)
    SERVERS.append(server)
    server.start()
    agent = compile_agent(file, folder / "inproc")
    if pool or seeded:
        POOLS.append(agent.environment)
    api: list[float] = []
    local: list[float] = []
    async with server.client() as client:
        await api_session(client)  # warm-up, untimed: imports, image, first pool fill
        await local_session(agent)
        for _ in range(rounds):
            if pool or seeded:
                await server_pool_ready(server, pool + seeded)
            api.append(await api_session(client))
            if pool:
                await agent.environment.wait_pool_ready(300)
            if seeded:
                (key,) = agent.environment.seeded_keys()
                await agent.environment.wait_seeded_pool_ready(key, 300)
            local.append(await local_session(agent))
    table.latency(name, api, local)
    server.stop()


async def throughput(
    table: Table, name: str, folder: Path, file: Path, total: int, at_once: int
) -> None:
    server = Server(file, folder)
    SERVERS.append(server)
    server.start()
    agent = compile_agent(file, folder / "inproc")
    async with server.client() as client:
        await api_session(client)  # warm-up
        limit = asyncio.Semaphore(at_once)

        async def through_api() -> None:
            async with limit:
                await api_session(client)

        async def in_process() -> None:
            async with limit:
                await local_session(agent)

        started = time.perf_counter()
        await asyncio.gather(*(through_api() for _ in range(total)))
        api_rate = total / (time.perf_counter() - started)
        await local_session(agent)  # warm-up
        started = time.perf_counter()
        await asyncio.gather(*(in_process() for _ in range(total)))
        local_rate = total / (time.perf_counter() - started)
    table.rate(f"{name}, {total} sessions, {at_once} at a time", api_rate, local_rate)
    server.stop()


async def api_rate(
    client: httpx.AsyncClient, total: int, at_once: int
) -> tuple[float, list[float]]:
    """``total`` whole sessions through the API, ``at_once`` at a time: the
    sessions per second, and each ``POST /v1/sessions``' own time (create)."""
    limit = asyncio.Semaphore(at_once)
    creates: list[float] = []

    async def one() -> None:
        async with limit:
            started = time.perf_counter()
            created = await client.post("/v1/sessions", json={"agent": "bench"})
            creates.append(time.perf_counter() - started)
            created.raise_for_status()
            session_id = created.json()["id"]
            while await status_of(client, session_id) not in ("waiting", "failed"):
                await asyncio.sleep(0.05)  # light polling: the server serves the sessions
            closed = (await client.delete(f"/v1/sessions/{session_id}")).json()
            if closed["status"] != "closed":
                raise RuntimeError(f"session {session_id} did not close: {closed}")

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(total)))
    return total / (time.perf_counter() - started), creates


async def stores(table: Table, folder: Path, file: Path, db: str, quick: bool) -> None:
    """The same sessions on SQLite and on PostgreSQL (``fsync`` on), rounds
    interleaved: sessions per second at 10 clients (PostgreSQL / SQLite), and
    the create (``POST``) p50 / p99 at 50 clients on each store."""
    sqlite_server = Server(file, folder / "sqlite")
    postgres_server = Server(file, folder / "postgres", db)
    SERVERS.extend([sqlite_server, postgres_server])
    sqlite_server.start()
    postgres_server.start()
    total10, total50, rounds = (40, 100, 1) if quick else (60, 150, 3)
    rates: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    creates: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    async with sqlite_server.client() as on_sqlite, postgres_server.client() as on_postgres:
        clients = {"sqlite": on_sqlite, "postgres": on_postgres}
        for client in clients.values():
            await api_session(client)  # warm-up
        for _ in range(rounds):
            for name, client in clients.items():
                rate, _ = await api_rate(client, total10, 10)
                rates[name].append(rate)
            for name, client in clients.items():
                _, times = await api_rate(client, total50, 50)
                creates[name].extend(times)
    sqlite_rate = pct(rates["sqlite"], 50)
    postgres_rate = pct(rates["postgres"], 50)
    ratios = [p / q for p, q in zip(rates["postgres"], rates["sqlite"], strict=True)]
    table.line(
        f"stores, {total10} sessions, 10 at a time: sessions per second (median of {rounds});"
        " columns: PostgreSQL (fsync on), SQLite",
        f"{postgres_rate:.1f}/s",
        f"{sqlite_rate:.1f}/s",
        f"{postgres_rate / sqlite_rate:.2f}x (PostgreSQL / SQLite; each round: "
        + ", ".join(f"{r:.2f}x" for r in ratios)
        + ")",
    )
    for name in ("postgres", "sqlite"):
        p50, p99 = pct(creates[name], 50), pct(creates[name], 99)
        table.line(
            f"stores, {total50} sessions, 50 at a time: create (POST) p50 / p99 on {name}"
            f" (n={len(creates[name])})",
            f"{ms(p50)} / {ms(p99)}",
            "-",
            f"p99 = {p99 / p50:.1f}x p50",
        )
    sqlite_server.stop()
    postgres_server.stop()


async def hundred(table: Table, folder: Path, file: Path, count: int = 100) -> None:
    server = Server(file, folder)
    SERVERS.append(server)
    server.start()
    failures = 0
    async with server.client() as client:
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(client.post("/v1/sessions", json={"agent": "bench"}) for _ in range(count)),
            return_exceptions=True,
        )
        ids = []
        for answer in answers:
            if isinstance(answer, BaseException) or answer.status_code != 201:
                failures += 1
            else:
                ids.append(answer.json()["id"])

        async def all_settled() -> list[dict[str, Any]] | None:
            listed = (await client.get("/v1/sessions")).json()["sessions"]
            mine = [s for s in listed if s["id"] in ids]
            return mine if all(s["status"] in ("waiting", "failed") for s in mine) else None

        settled = await wait_until(all_settled, "100 sessions to start")
        failures += sum(s["status"] != "waiting" for s in settled)
        started_after = time.perf_counter() - started
        closes = await asyncio.gather(
            *(client.delete(f"/v1/sessions/{i}") for i in ids), return_exceptions=True
        )
        failures += sum(
            isinstance(c, BaseException) or c.json().get("status") != "closed" for c in closes
        )
        total = time.perf_counter() - started
    leftovers = len(list(server.tmp.glob("sandbox-runner-local-*")))
    table.line(
        f"{count} concurrent sessions (local), through the API",
        f"{failures} failures; all waiting after {started_after:.2f} s, all closed after "
        f"{total:.2f} s; {leftovers} workspaces left",
    )
    server.stop()


async def resume(table: Table, folder: Path, count: int = 50) -> None:
    go = folder / "GO"
    file = agent_file(folder, sandbox="local", block=go)
    server = Server(file, folder)
    SERVERS.append(server)
    server.start()
    workspaces = server.tmp

    def counts(name: str) -> list[int]:
        return [
            len(p.read_text().splitlines())
            for p in workspaces.glob(f"sandbox-runner-local-*/workspace/{name}")
        ]

    async with server.client() as client:
        answers = await asyncio.gather(
            *(client.post("/v1/sessions", json={"agent": "bench"}) for _ in range(count))
        )
        ids = [a.json()["id"] for a in answers]

    async def all_blocked(runs: int) -> bool:
        found = counts("blocked.count")
        return len(found) == count and all(n == runs for n in found)

    await wait_until(lambda: all_blocked(1), f"{count} sessions to block")
    server.kill()
    server.start()
    listening = server.listening_after
    await wait_until(lambda: all_blocked(2), f"{count} sessions to resume")
    back = time.perf_counter() - server.started_at
    go.touch()
    async with server.client() as client:

        async def all_waiting() -> bool:
            listed = (await client.get("/v1/sessions")).json()["sessions"]
            mine = [s for s in listed if s["id"] in ids]
            return all(s["status"] in ("waiting", "failed") for s in mine) and mine

        await wait_until(all_waiting, "the resumed sessions to start")
        waiting = time.perf_counter() - server.started_at
        listed = (await client.get("/v1/sessions")).json()["sessions"]
        failed = sum(s["status"] != "waiting" for s in listed if s["id"] in ids)
        rerun_first = sum(n != 1 for n in counts("first.count"))
        await asyncio.gather(*(client.delete(f"/v1/sessions/{i}") for i in ids))
    table.line(
        f"resume after SIGKILL, {count} sessions in flight (local)",
        f"listening {listening:.2f} s; all {count} back in their step {back:.2f} s; "
        f"all waiting {waiting:.2f} s after the restart; {failed} failed; "
        f"{rerun_first} finished steps run again",
    )
    server.stop()


async def take_over(table: Table, folder: Path, db: str, count: int = 50) -> None:
    go = folder / "GO"
    file = agent_file(folder, sandbox="local", block=go)
    first, second = Server(file, folder / "first", db), Server(file, folder / "second", db)
    SERVERS.extend([first, second])
    first.start()
    second.start()

    def counts(name: str) -> list[int]:
        return [
            len(p.read_text().splitlines())
            for p in first.tmp.glob(f"sandbox-runner-local-*/workspace/{name}")
        ]

    async def all_blocked(runs: int) -> bool:
        found = counts("blocked.count")
        return len(found) == count and all(n == runs for n in found)

    async with first.client() as client:
        answers = await asyncio.gather(
            *(client.post("/v1/sessions", json={"agent": "bench"}) for _ in range(count))
        )
        ids = [a.json()["id"] for a in answers]
    await wait_until(lambda: all_blocked(1), f"{count} sessions to block")
    killed = time.perf_counter()
    first.kill()
    await wait_until(lambda: all_blocked(2), f"{count} sessions to be taken over")
    back = time.perf_counter() - killed
    go.touch()
    async with second.client() as client:

        async def all_waiting() -> bool:
            listed = (await client.get("/v1/sessions")).json()["sessions"]
            mine = [s for s in listed if s["id"] in ids]
            return all(s["status"] in ("waiting", "failed") for s in mine) and mine

        await wait_until(all_waiting, "the taken-over sessions to start")
        waiting = time.perf_counter() - killed
        listed = (await client.get("/v1/sessions")).json()["sessions"]
        failed = sum(s["status"] != "waiting" for s in listed if s["id"] in ids)
        moved = sum(s["owner"] == second.url for s in listed if s["id"] in ids)
        rerun_first = sum(n != 1 for n in counts("first.count"))
        await asyncio.gather(*(client.delete(f"/v1/sessions/{i}") for i in ids))
    table.line(
        f"take-over after SIGKILL, {count} sessions in flight (local, PostgreSQL, 2 servers)",
        f"all {count} back in their step on the other server {back:.2f} s after the kill; "
        f"all waiting {waiting:.2f} s; {moved} moved, {failed} failed; "
        f"{rerun_first} finished steps run again",
    )
    second.stop()


def start_postgres() -> Any:
    """A throwaway PostgreSQL cluster (tests/support/postgres_server.py), or None."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from postgres_server import PostgresServer, find_bindir

    if find_bindir() is None:
        print("PostgreSQL is not installed (scripts/postgres-install): its rows are left out\n")
        return None
    server = PostgresServer(durable=True)
    server.start()
    return server


async def main(
    rounds: int,
    docker: bool,
    quick: bool,
    postgres: bool,
    pools_only: bool = False,
    stores_only: bool = False,
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    if docker:
        SNAPSHOTS_BEFORE.update(docker_images(f"label={LABEL_SNAPSHOT}"))
    table = Table()
    load = os.getloadavg()
    print(f"bench/serve.py: {rounds} rounds, load average {load[0]:.2f}, image {IMAGE}\n")
    try:
        local = agent_file(folder, sandbox="local")
        if stores_only:
            if (cluster := start_postgres()) is not None:
                try:
                    await stores(table, folder / "stores", local, cluster.new_database(), quick)
                finally:
                    cluster.stop()
            return
        if not pools_only:
            await latencies(table, "local", folder / "lat-local", local, rounds)
            await throughput(table, "local", folder / "rate-local", local, 20 if quick else 40, 10)
            await hundred(table, folder / "hundred", local)
            await resume(table, folder / "resume")
        if postgres and not pools_only and (cluster := start_postgres()) is not None:
            try:
                await latencies(
                    table,
                    "local, PostgreSQL",
                    folder / "lat-pg",
                    local,
                    rounds,
                    db=cluster.new_database(),
                )
                await take_over(table, folder / "take-over", cluster.new_database())
            finally:
                cluster.stop()
        if docker:
            cold = agent_file(folder, sandbox="docker")
            if not pools_only:
                await latencies(table, "docker, cold", folder / "lat-docker", cold, rounds)
            pooled = agent_file(folder, sandbox="docker", pool=2)
            await latencies(table, "docker, pool: 2", folder / "lat-pool", pooled, rounds, pool=2)
            seeded = agent_file(folder, sandbox="docker", seeded=2)
            await latencies(
                table, "docker, seeded_pool: 2", folder / "lat-seeded", seeded, rounds, seeded=2
            )
            if not pools_only:
                await throughput(table, "docker, cold", folder / "rate-docker", cold, 8, 4)
    finally:
        removed = cleanup()
        shutil.rmtree(folder, ignore_errors=True)
        print()
        table.print()
        print(f"\n{removed} container(s) removed at the end.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="8 rounds, fewer sessions")
    parser.add_argument("--no-docker", action="store_true", help="the local sandbox only")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument(
        "--pools-only", action="store_true", help="only the Docker pool rows of measure 1"
    )
    parser.add_argument(
        "--stores-only", action="store_true", help="only SQLite against PostgreSQL (measure 6)"
    )
    args = parser.parse_args()
    try:
        asyncio.run(
            main(
                args.rounds or (8 if args.quick else 20),
                not args.no_docker,
                args.quick,
                not args.no_postgres,
                args.pools_only,
                args.stores_only,
            )
        )
    except KeyboardInterrupt:
        cleanup()
        sys.exit(130)
