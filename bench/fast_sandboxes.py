"""Fast sandboxes: the Docker sandbox's exec channel and warm pool against plain docker.

    .venv/bin/python bench/fast_sandboxes.py [--rounds N | --quick] [--peer-python PATH]

Everything is measured in one run, in this process, on one image
(``$RUNNER_DOCKER_IMAGE``, else ``sandbox-runner-test:latest``), every container
with ``--network none``.  Each measure is the median (min-max) of N rounds
(default 15; ``--quick``: 5), the runner and its baselines interleaved round by
round so drift hits all alike, each sample after a 20 ms pause
(``SETTLE_SECONDS``) so that one's after-work is not billed to the next.  It
prints one markdown table, whose target column says PASS or MISS (and by how
much) with the ratio, then a second table for concurrency:

1. exec round trip: ``await sandbox.execute("true")`` in an open session (exec
   channel on, the default; ``exec_channel=False`` as an extra row) against
   ``docker exec C true`` (CLI, in a subprocess), the docker SDK's
   ``container.exec_run("true")`` and a local ``subprocess.run(["true"])``.
   Targets (issue 13): runner at least 20x faster than ``docker exec``;
   (issue 30) at most 1.5x the local sandbox's ``execute("true")``, the same
   shell started on this machine (a bare ``subprocess.run(["true"])``, which
   starts no shell, is shown for information).
1b. the same round trip on each test image, against ``docker exec`` on a
   container of that image: the full image and ``python3-minimal`` (the
   Python helper; and, for information, ``exec_channel="shell"`` on each),
   and busybox (the shell helper).  Targets: >= 20x (full), >= 10x (the
   other two).
   ``--exec-only`` runs sections 1 and 1b alone.
2. session start to first command: ``agent.start_session()`` until the first
   ``execute("true")`` returns, cold (``pool_size=0``) and pooled
   (``pool_size=2``; the pool is refilled outside the timed region between
   rounds), against ``docker run --rm IMAGE true`` and ``docker create`` +
   ``docker start`` + ``docker exec C true``.  Targets: pooled at most 0.3x of
   ``docker run --rm``; cold at most 1.1x of create+start+exec.  Session close
   times are shown for information.
3. a hook of 20 small commands (``echo $i > f$i; cat f$i``) through
   ``execute`` in an open session, against a bash script of 20 ``docker exec``
   calls on a running container.  Target: runner at least 5x faster.
4. file copy of 1 MB and 100 MB: ``write_file`` then ``read_file`` against
   ``docker cp`` host->container then container->host (temp files); contents
   are checked outside the timed region.  Target: runner no slower (<= 1.0x).
   ``exec_channel=False`` (`cat` run as the sandbox user) is an extra row, and a
   row gives the peak RSS growth of one 100 MB ``read_file`` over the channel
   (VmHWM, reset through ``/proc/self/clear_refs``; target <= 1.1x the file),
   a footnote the same for the other sizes and ``exec_channel=False``.
   ``--files-only`` runs this section alone.
5. concurrency: 1, 8 and 32 sessions at once (cold; each runs 5 ``execute``
   calls, then closes) on one environment: wall time, failures, containers
   left behind (label ``sandbox-runner.owner-pid=<this pid>``), and this
   process's RSS (before/after, and ``ru_maxrss``), threads and open fds
   before/after.  Run before the file copies, so the 100 MB buffers do not
   inflate ``ru_maxrss``.
6. a peer, llm-sandbox (its Docker backend), measured in a subprocess with its
   own venv's python on the same image: ``execute_command("true")`` round
   trip, ``open()`` until the first ``execute_command("true")`` returns, and
   ``close()``.  It gets ``network_mode="none"``, ``init=True`` and
   ``sleep infinity`` as the main process (as the runner's containers have;
   with the image's own ``bash`` its ``close()`` waits out Docker's 10 s stop
   timeout), ``skip_environment_setup=True`` (else it makes a venv and
   pip-upgrades in the container, which needs the network), and the image is
   checked to be local first so it never pulls.  It runs after the runner's
   sections, not interleaved with them.  Set it up once, outside this script::

       python3 -m venv /tmp/llm-sandbox-venv
       /tmp/llm-sandbox-venv/bin/pip install 'llm-sandbox[docker]'

   (``--peer-python`` or ``$LLM_SANDBOX_PYTHON`` points elsewhere;
   ``--setup-peer`` runs these two commands first, where that venv is
   missing, through pip's ordinary configuration.)  Without
   it, the peer rows say so and everything else still runs.  ``--peer-only``
   runs sections 1, 2 and this one.

7. snapshot: a cached hook (``cache = True``) whose ``on_create`` does a few
   seconds of real, offline work (generates ~6 MB of Python modules, runs
   ``python3 -m compileall`` on them, ``git init`` + commits them).  The first
   session of a definition runs it and commits the snapshot; the second starts
   from the snapshot.  Each round uses a fresh definition (a nonce), so every
   first session is cold.  Measured: ``start_session()`` until the first
   ``execute("true")`` returns.  Target: second <= 0.1x of first.  Twice:
   with the workspace on the container's disk, and on a tmpfs
   (``workspace_size``), which the snapshot saves with ``tar`` and the second
   session unpacks.  At most 5
   rounds (each costs seconds); the snapshot images are removed at the end.
   With a seeded pool (``seeded_pool_size``): the same hooks in an
   environment that keeps containers of the snapshot started; after one
   untimed session has started that pool and it has filled, a session's
   start to first command.  Targets (issue 30): <= 0.01x the first session
   and <= 2x an unseeded pooled start (``pool_size``, no hooks), measured in
   the same rounds.
   ``--snapshot-only`` runs just this section.

Every container this script starts carries the label
``sandbox-runner-bench=<pid>`` and is removed at the end, even on Ctrl-C, as
is any runner container of this process.  Numbers are only as quiet as the
engine: the header reports other running containers and the load average.

Not a test and not a gate: it prints tables, flags missed targets, and exits 0
(130 if interrupted).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

import runner as agents
from runner.sandboxes.docker.environment import LABEL_OWNER_PID, LABEL_SESSION
from runner.sandboxes.local import DangerousLocalWarning

IMAGE = os.environ.get("RUNNER_DOCKER_IMAGE", "sandbox-runner-test:latest")
#: (name, tag, exec_channel, target speed-up over docker exec) of section 1b.
IMAGES = (
    ("full", IMAGE, "auto", 20.0),
    ("full, exec_channel='shell'", IMAGE, "shell", None),
    (
        "python3-minimal",
        os.environ.get("RUNNER_TEST_IMAGE_MINIMAL", "sandbox-runner-test-minimal:latest"),
        "auto",
        10.0,
    ),
    (
        "python3-minimal, exec_channel='shell'",
        os.environ.get("RUNNER_TEST_IMAGE_MINIMAL", "sandbox-runner-test-minimal:latest"),
        "shell",
        None,
    ),
    (
        "busybox",
        os.environ.get("RUNNER_TEST_IMAGE_BUSYBOX", "sandbox-runner-test-busybox:latest"),
        "auto",
        10.0,
    ),
)
PID = str(os.getpid())
BENCH_LABEL = "sandbox-runner-bench"
OWN = f"{BENCH_LABEL}={PID}"
DASH = "\u2013"  # en dash, for "median (min-max)"
HOOK_STEPS = 20
CONCURRENCY = (1, 8, 32)
EXECS_PER_SESSION = 5
POOL_SIZE = 2
SIZES = ((1 << 20, "1 MB"), (100 << 20, "100 MB"))
PEER = "llm-sandbox"
PEER_PYTHON = os.environ.get("LLM_SANDBOX_PYTHON", "/tmp/llm-sandbox-venv/bin/python")
PEER_SETUP = (
    "python3 -m venv /tmp/llm-sandbox-venv && "
    "/tmp/llm-sandbox-venv/bin/pip install 'llm-sandbox[docker]'"
)
#: Environments whose warm pool must be closed even if the run is interrupted.
OPEN_POOLS: list[agents.LocalDockerSandbox] = []


# --- helpers -----------------------------------------------------------------


def docker_cli(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def start_container(image: str = IMAGE, *extra: str) -> str:
    """A running container of our own, as the runner's are: init, sleep, no network."""
    return docker_cli(
        "run", "-d", "--init", "--network", "none", "--label", OWN, "-w", "/workspace",
        *extra, image, "sleep", "3600",
    ).strip()  # fmt: skip


def own_containers() -> list[str]:
    """Ids of every container this process made, ours or the runner's."""
    ids = docker_cli("ps", "-aq", "--filter", f"label={OWN}").split()
    ids += docker_cli("ps", "-aq", "--filter", f"label={LABEL_OWNER_PID}={PID}").split()
    return sorted(set(ids))


def runner_leftovers() -> int:
    return len(docker_cli("ps", "-aq", "--filter", f"label={LABEL_OWNER_PID}={PID}").split())


def cleanup(*, interrupted: bool = False) -> None:
    """Close warm pools and remove every container of this run.

    After an interruption a worker thread may still be creating a container,
    so it sweeps until two looks a second apart find nothing (30 s at most).
    """
    for environment in OPEN_POOLS:
        try:
            environment.close_pool()
        except Exception as exc:
            print(f"closing a warm pool failed: {exc}", file=sys.stderr)
    OPEN_POOLS.clear()
    deadline = time.monotonic() + 30
    quiet = 0
    try:
        while True:
            ids = own_containers()
            if ids:
                docker_cli("rm", "-f", "-v", *ids)
                quiet = 0
            else:
                quiet += 1
            if not interrupted or quiet >= 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
    except Exception as exc:
        print(
            f"cleanup failed: {exc}; run: docker rm -f $(docker ps -aq --filter label={OWN}) "
            f"$(docker ps -aq --filter label={LABEL_OWNER_PID}={PID})",
            file=sys.stderr,
        )


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


#: Every sample starts after this pause, the same for the runner and its
#: baselines: a ``docker exec`` CLI returns before dockerd and containerd
#: have finished tearing its exec down, and on 2 cores that after-work would
#: otherwise be billed to whatever is measured next (a few-ms runner sample
#: most of all).
SETTLE_SECONDS = 0.02


def timed_sync(function: Callable[[], Any]) -> float:
    time.sleep(SETTLE_SECONDS)
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


async def timed(function: Callable[[], Awaitable[Any]]) -> float:
    await anyio.sleep(SETTLE_SECONDS)
    started = time.perf_counter()
    await function()
    return time.perf_counter() - started


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def ms(seconds: float) -> str:
    value = seconds * 1000
    if value < 10:
        return f"{value:.2f}"
    if value < 1000:
        return f"{value:.1f}"
    return f"{value:.0f}"


def spread(samples: list[float]) -> str:
    return f"{ms(median(samples))} ms ({ms(min(samples))}{DASH}{ms(max(samples))})"


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def max_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB"


# --- the table ---------------------------------------------------------------


@dataclass
class Table:
    sections: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    def add(
        self,
        measure: str,
        samples: list[float] | str,
        target: str = "",
        *,
        section: str | None = None,
    ) -> None:
        """A row, in the section its measure's number names unless ``section`` is given."""
        value = samples if isinstance(samples, str) else spread(samples)
        key = section or measure.split(".", 1)[0]
        self.sections.setdefault(key, []).append((measure, value, target))

    def faster(self, name: str, ours: list[float], theirs: list[float], at_least: float) -> str:
        """Target: ours at least ``at_least`` times faster than theirs."""
        speedup = median(theirs) / median(ours)
        if speedup >= at_least:
            return f"runner >= {at_least:g}x faster: {speedup:.1f}x faster, PASS"
        missed = at_least / speedup
        self.misses.append(f"{name}: {speedup:.2f}x faster, wanted {at_least:g}x")
        return (
            f"runner >= {at_least:g}x faster: {speedup:.2f}x faster, MISS (missed by {missed:.2f}x)"
        )

    def at_most(
        self, name: str, who: str, ours: list[float], theirs: list[float], ratio: float
    ) -> str:
        """Target: median(ours) / median(theirs) <= ratio."""
        actual = median(ours) / median(theirs)
        if actual <= ratio:
            return f"{who} <= {ratio:g}x this: {actual:.3g}x, PASS"
        self.misses.append(f"{name}: {who} is {actual:.3g}x, wanted <= {ratio:g}x")
        return f"{who} <= {ratio:g}x this: {actual:.3g}x, MISS (missed by {actual / ratio:.2f}x)"

    def at_most_value(self, name: str, actual: float, ratio: float) -> str:
        """Target: a ratio measured once (not from samples) <= ratio."""
        if actual <= ratio:
            return f"<= {ratio:.1f}x the file: {actual:.2f}x, PASS"
        self.misses.append(f"{name}: {actual:.2f}x, wanted <= {ratio:g}x")
        return f"<= {ratio:.1f}x the file: {actual:.2f}x, MISS (missed by {actual / ratio:.2f}x)"

    @staticmethod
    def info(ours: list[float], theirs: list[float], who: str = "runner") -> str:
        ratio = median(theirs) / median(ours)
        if ratio >= 1:
            return f"info: {who} is {ratio:.1f}x faster than this"
        return f"info: {who} is {1 / ratio:.1f}x slower than this"

    def print(self) -> None:
        rows = [row for key in sorted(self.sections) for row in self.sections[key]]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)]
        print("| " + " | ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in rows:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


HEADERS = ("measure", f"median (min{DASH}max)", "target")


# --- 1. exec round trip ------------------------------------------------------

#: The shell a local command would run with, as the Docker sandbox's does.
LOCAL_SHELL = shutil.which("bash") or "/bin/sh"


async def exec_round_trip(table: Table, rounds: int, container: str) -> None:
    import docker

    progress("1. exec round trip")
    client = docker.from_env()
    sdk_container = client.containers.get(container)
    channel_agent = agents.Agent(model="bench", environment=agents.LocalDockerSandbox(image=IMAGE))
    plain_agent = agents.Agent(
        model="bench", environment=agents.LocalDockerSandbox(image=IMAGE, exec_channel=False)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DangerousLocalWarning)
        local_agent = agents.Agent(model="bench", environment=agents.DangerousLocalSandbox())
    try:
        async with (
            await channel_agent.start_session() as session,
            await plain_agent.start_session() as plain,
            await local_agent.start_session() as local_session,
        ):
            sandbox = session.sandbox
            channel_on = getattr(sandbox, "channel", None) is not None

            async def runner_true() -> None:
                result = await sandbox.execute("true")
                assert result.exit_code == 0, result

            async def plain_true() -> None:
                result = await plain.sandbox.execute("true")
                assert result.exit_code == 0, result

            def cli_true() -> None:
                subprocess.run(["docker", "exec", container, "true"], check=True)

            def sdk_true() -> None:
                result = sdk_container.exec_run("true")
                assert result.exit_code == 0, result

            def local_true() -> None:
                subprocess.run(["true"], check=True)

            def local_shell_true() -> None:
                subprocess.run([LOCAL_SHELL, "-c", "true"], check=True)

            async def local_sandbox_true() -> None:
                result = await local_session.sandbox.execute("true")
                assert result.exit_code == 0, result

            for _ in range(2):  # warm every path
                await runner_true()
                await plain_true()
                cli_true()
                sdk_true()
                local_true()
                local_shell_true()
                await local_sandbox_true()
            ours, plain_samples, cli, sdk, local = [], [], [], [], []
            local_shell, local_sandbox = [], []
            for _ in range(rounds):
                ours.append(await timed(runner_true))
                cli.append(timed_sync(cli_true))
                sdk.append(timed_sync(sdk_true))
                local.append(timed_sync(local_true))
                plain_samples.append(await timed(plain_true))
                local_shell.append(timed_sync(local_shell_true))
                local_sandbox.append(await timed(local_sandbox_true))
    finally:
        client.close()
    label = "channel on" if channel_on else "CHANNEL OFF: helper did not start"
    table.add(f"1. runner `execute('true')` ({label})", ours)
    table.add(
        "1. runner `execute('true')`, exec_channel=False",
        plain_samples,
        Table.info(ours, plain_samples),
    )
    table.add(
        "1. `docker exec C true` (CLI)",
        cli,
        table.faster("exec vs docker exec CLI", ours, cli, 20),
    )
    table.add("1. docker SDK `exec_run('true')`", sdk, Table.info(ours, sdk))
    table.add(
        "1. local `subprocess.run(['true'])`",
        local,
        Table.info(ours, local),
    )
    # The same work on this machine: a command runs with the sandbox's shell
    # (DESIGN.md), and `true` is one of bash's builtins, so the Docker
    # sandbox starts a bash where subprocess.run(['true']) starts no shell.
    table.add(
        f"1. local `subprocess.run(['{os.path.basename(LOCAL_SHELL)}', '-c', 'true'])`",
        local_shell,
        f"info: runner is {median(ours) / median(local_shell):.2f}x this",
    )
    table.add(
        "1. DangerousLocalSandbox `execute('true')` (bash on this machine)",
        local_sandbox,
        table.at_most("exec vs the local sandbox's", "runner", ours, local_sandbox, 1.5),
    )
    PEER_ROWS["anchor-exec"] = ours


async def exec_per_image(table: Table, rounds: int) -> None:
    """Section 1b: the round trip on each image, against docker exec on it."""
    for name, tag, helper, target in IMAGES:
        progress(f"1b. exec round trip, {name}")
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode:
            table.add(f"1b. {name}: image {tag} missing (scripts/docker-up)", "-", section="1b")
            continue
        kind, ours, cli = await exec_on_image(tag, helper, rounds)
        table.add(f"1b. {name}: runner `execute('true')` ({kind} helper)", ours, section="1b")
        verdict = (
            table.faster(f"exec on {name} vs docker exec", ours, cli, target)
            if target
            else Table.info(ours, cli)
        )
        table.add(f"1b. {name}: `docker exec C true` (CLI)", cli, verdict, section="1b")


async def exec_on_image(tag: str, helper: str, rounds: int) -> tuple[str, list[float], list[float]]:
    """(the helper the sandbox got, runner samples, docker exec samples) on ``tag``."""
    container = start_container(tag)
    environment = agents.LocalDockerSandbox(image=tag, exec_channel=helper)
    try:
        agent = agents.Agent(model="bench", environment=environment)
        async with await agent.start_session() as session:
            sandbox = session.sandbox
            channel = getattr(sandbox, "channel", None)
            kind = channel.kind if channel is not None else "per-command"

            async def runner_true() -> None:
                result = await sandbox.execute("true")
                assert result.exit_code == 0, result

            def cli_true() -> None:
                subprocess.run(["docker", "exec", container, "true"], check=True)

            for _ in range(3):
                await runner_true()
                cli_true()
            ours, cli = [], []
            for _ in range(rounds):
                ours.append(await timed(runner_true))
                cli.append(timed_sync(cli_true))
    finally:
        docker_cli("rm", "-f", "-v", container)
    return kind, ours, cli


# --- 2. session start to first command -----------------------------------------


async def runner_start(agent: agents.Agent) -> tuple[float, float, bool]:
    """(start to first command, close, came from the warm pool)."""
    started = time.perf_counter()
    session = await agent.start_session()
    try:
        result = await session.sandbox.execute("true")
        elapsed = time.perf_counter() - started
        assert result.exit_code == 0, result
        container = getattr(session.sandbox, "container", None)
        labels = getattr(container, "labels", None) or {}
        pooled = str(labels.get(LABEL_SESSION, "")).startswith("pool-")
    finally:
        closing = time.perf_counter()
        await session.cancel()
        closed = time.perf_counter() - closing
    return elapsed, closed, pooled


async def refill(environment: agents.LocalDockerSandbox) -> None:
    """Wait, outside any timed region, until the warm pool is full again."""
    deadline = time.monotonic() + 120
    while True:
        ready = await environment.wait_pool_ready(timeout=120)
        pool = environment._pool
        if ready and pool is not None and len(pool) >= POOL_SIZE:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the warm pool did not refill within 120 s")
        await anyio.sleep(0.05)


def docker_run_rm() -> None:
    docker_cli("run", "--rm", "--network", "none", "--label", OWN, IMAGE, "true")


def create_start_exec() -> tuple[float, str]:
    started = time.perf_counter()
    container = docker_cli(
        "create", "--init", "--network", "none", "--label", OWN, IMAGE, "sleep", "600"
    ).strip()
    docker_cli("start", container)
    docker_cli("exec", container, "true")
    return time.perf_counter() - started, container


async def session_start(table: Table, rounds: int) -> None:
    progress("2. session start to first command")
    cold_env = agents.LocalDockerSandbox(image=IMAGE, pool_size=0)
    pool_env = agents.LocalDockerSandbox(image=IMAGE, pool_size=POOL_SIZE)
    OPEN_POOLS.append(pool_env)
    cold_agent = agents.Agent(model="bench", environment=cold_env)
    pool_agent = agents.Agent(model="bench", environment=pool_env)
    try:
        await runner_start(cold_agent)  # first session: client connect + leftover sweep
        await refill(pool_env)
        await runner_start(pool_agent)
        docker_run_rm()
        _, warm = create_start_exec()
        docker_cli("rm", "-f", warm)
        cold, cold_close, pooled, pooled_close, run_rm, cse = [], [], [], [], [], []
        hits = 0
        for _ in range(rounds):
            await refill(pool_env)
            elapsed, closed, hit = await runner_start(pool_agent)
            pooled.append(elapsed)
            pooled_close.append(closed)
            hits += hit
            await refill(pool_env)  # not refilling while the others are timed
            elapsed, closed, _ = await runner_start(cold_agent)
            cold.append(elapsed)
            cold_close.append(closed)
            run_rm.append(timed_sync(docker_run_rm))
            elapsed, container = create_start_exec()
            cse.append(elapsed)
            docker_cli("rm", "-f", container)
    finally:
        pool_env.close_pool()
        OPEN_POOLS.remove(pool_env)
    table.add(f"2. runner pooled (pool_size={POOL_SIZE}), {hits}/{rounds} from pool", pooled)
    table.add("2. runner cold (pool_size=0)", cold)
    table.add(
        "2. `docker run --rm --network none IMAGE true`",
        run_rm,
        table.at_most("pooled start vs docker run --rm", "pooled", pooled, run_rm, 0.3),
    )
    table.add(
        "2. `docker create` + `start` + `exec C true`",
        cse,
        table.at_most("cold start vs create+start+exec", "cold", cold, cse, 1.1),
    )
    table.add("2. runner close, cold session (`session.cancel()`)", cold_close)
    table.add("2. runner close, pooled session", pooled_close)
    PEER_ROWS["anchor-start"] = cold
    PEER_ROWS["anchor-close"] = cold_close


# --- 7. snapshot of a seeded workspace ------------------------------------------

SNAPSHOT_ROUNDS = 5
SEED_SCRIPT = r"""
set -e
mkdir -p project && cd project
python3 - <<'PY'
import os, random
random.seed(7)
for package in range(30):
    os.makedirs(f"pkg{package}", exist_ok=True)
    open(f"pkg{package}/__init__.py", "w").close()
    for module in range(100):
        with open(f"pkg{package}/m{module}.py", "w") as out:
            for function in range(20):
                value = random.random()
                out.write(f"def f{function}(x):\n    return x * {value!r} + {function}\n\n")
PY
python3 -m compileall -q .
git init -q
git add -A
git -c user.name=bench -c user.email=bench@example.com commit -qm seed
"""


class SeedProject(agents.SandboxHook):
    """A slow, offline on_create: the kind of work a snapshot saves."""

    cache = True

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        result = await ctx.sandbox.execute(SEED_SCRIPT, timeout_seconds=300)
        if result.exit_code != 0:
            raise RuntimeError(f"seeding failed: {result.stderr[-500:]}")


async def snapshot_start(table: Table, rounds: int) -> None:
    from runner.sandboxes.docker.snapshots import LABEL_SNAPSHOT

    progress("7. snapshot: first session vs second session")
    rounds = min(rounds, SNAPSHOT_ROUNDS)
    before = set(
        docker_cli("images", "-q", "--no-trunc", "--filter", f"label={LABEL_SNAPSHOT}").split()
    )
    # Per layout: the workspace on the container's disk (a commit holds it),
    # and on a tmpfs (``workspace_size``: saved explicitly, by tar, and
    # unpacked into the next session's tmpfs).
    layouts: dict[str, dict[str, Any]] = {"": {}, "tmpfs workspace, ": {"workspace_size": "512m"}}
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in layouts}
    seeded: dict[str, list[float]] = {name: [] for name in layouts}
    hits = dict.fromkeys(layouts, 0)
    unseeded: list[float] = []
    plain_env = agents.LocalDockerSandbox(image=IMAGE, pool_size=POOL_SIZE)
    OPEN_POOLS.append(plain_env)
    plain_agent = agents.Agent(model="bench", environment=plain_env)
    try:
        await refill(plain_env)
        await runner_start(plain_agent)  # warms the client
        for _ in range(rounds):
            for name, options in layouts.items():
                hooks = [SeedProject(os.urandom(8).hex())]
                environment = agents.LocalDockerSandbox(image=IMAGE, hooks=hooks, **options)
                agent = agents.Agent(model="bench", environment=environment)
                for kept in samples[name]:
                    elapsed, _, _ = await runner_start(agent)
                    kept.append(elapsed)
                # The same hooks (so the same key) with a seeded pool: one
                # untimed session starts the pool, which is let fill, then
                # a session starts from one of its containers.
                warm_env = agents.LocalDockerSandbox(
                    image=IMAGE, hooks=hooks, seeded_pool_size=POOL_SIZE, **options
                )
                OPEN_POOLS.append(warm_env)
                warm_agent = agents.Agent(model="bench", environment=warm_env)
                try:
                    await runner_start(warm_agent)
                    (key,) = warm_env.seeded_keys()
                    if not await warm_env.wait_seeded_pool_ready(key, timeout=300):
                        raise RuntimeError("the seeded pool did not fill within 300 s")
                    elapsed, _, hit = await runner_start(warm_agent)
                    seeded[name].append(elapsed)
                    hits[name] += hit
                finally:
                    warm_env.close_pool()
                    OPEN_POOLS.remove(warm_env)
            await refill(plain_env)
            elapsed, _, _ = await runner_start(plain_agent)
            unseeded.append(elapsed)
    finally:
        plain_env.close_pool()
        OPEN_POOLS.remove(plain_env)
        made = (
            set(
                docker_cli(
                    "images", "-q", "--no-trunc", "--filter", f"label={LABEL_SNAPSHOT}"
                ).split()
            )
            - before
        )
        if made:
            docker_cli("rmi", "-f", *made)
    for name, (first, second) in samples.items():
        table.add(f"7. {name}first session (runs the cached hook, commits), {rounds} rounds", first)
        table.add(
            f"7. {name}second session (from the snapshot)",
            second,
            table.at_most(f"{name}snapshot second vs first session", "second", second, first, 0.1),
        )
        table.add(
            f"7. {name}seeded pooled start (seeded_pool_size={POOL_SIZE}), "
            f"{hits[name]}/{rounds} from the pool, vs the first session",
            seeded[name],
            table.at_most(
                f"{name}seeded start vs first session", "seeded", seeded[name], first, 0.01
            ),
        )
        table.add(
            f"7. {name}seeded pooled start vs an unseeded pooled start",
            seeded[name],
            table.at_most(
                f"{name}seeded vs unseeded pooled start", "seeded", seeded[name], unseeded, 2.0
            ),
        )
    table.add(f"7. unseeded pooled start (pool_size={POOL_SIZE}, no hooks)", unseeded)


# --- 3. a hook of 20 small commands --------------------------------------------


def hook_step(i: int) -> str:
    return f"echo {i} > f{i}; cat f{i}"


async def hook(table: Table, rounds: int, container: str) -> None:
    progress(f"3. a hook of {HOOK_STEPS} commands")
    expected = "".join(f"{i}\n" for i in range(HOOK_STEPS))
    agent = agents.Agent(model="bench", environment=agents.LocalDockerSandbox(image=IMAGE))
    with tempfile.TemporaryDirectory() as directory:
        script = Path(directory) / "hook.sh"
        script.write_text(
            "set -e\n"
            + "".join(
                f"docker exec -w /workspace {container} bash -c '{hook_step(i)}'\n"
                for i in range(HOOK_STEPS)
            )
        )
        async with await agent.start_session() as session:
            sandbox = session.sandbox

            async def runner_hook() -> str:
                out = []
                for i in range(HOOK_STEPS):
                    result = await sandbox.execute(hook_step(i))
                    if result.exit_code != 0:
                        raise RuntimeError(f"hook step {i} failed: {result}")
                    out.append(result.stdout)
                return "".join(out)

            def script_hook() -> str:
                return subprocess.run(
                    ["bash", str(script)], check=True, capture_output=True, text=True
                ).stdout

            assert await runner_hook() == expected
            assert script_hook() == expected
            ours, theirs = [], []
            for _ in range(rounds):
                started = time.perf_counter()
                output = await runner_hook()
                ours.append(time.perf_counter() - started)
                assert output == expected, output
                started = time.perf_counter()
                output = script_hook()
                theirs.append(time.perf_counter() - started)
                assert output == expected, output
    table.add(f"3. runner hook: {HOOK_STEPS} x `execute`", ours)
    table.add(
        f"3. bash script of {HOOK_STEPS} x `docker exec`",
        theirs,
        table.faster("20-step hook vs docker exec script", ours, theirs, 5),
    )


# --- 4. file copy --------------------------------------------------------------


async def copy_through(sandbox: Any, data: bytes) -> float:
    """``write_file`` then ``read_file`` of ``data``; the check is not timed."""
    started = time.perf_counter()
    await sandbox.write_file("blob.bin", data)
    read = await sandbox.read_file("blob.bin")
    elapsed = time.perf_counter() - started
    if read != data:
        raise RuntimeError(f"read_file returned {len(read)} bytes, not the data written")
    return elapsed


def copy_with_cli(container: str, source: Path, back: Path, data: bytes) -> float:
    """``docker cp`` host->container then container->host; the check is not timed."""
    started = time.perf_counter()
    docker_cli("cp", str(source), f"{container}:/workspace/blob.bin")
    docker_cli("cp", f"{container}:/workspace/blob.bin", str(back))
    elapsed = time.perf_counter() - started
    if back.read_bytes() != data:
        raise RuntimeError("docker cp returned other bytes")
    back.unlink()
    return elapsed


def reset_peak_rss() -> bool:
    """Reset the kernel's VmHWM (peak RSS) of this process, where allowed,
    after giving freed memory back (else a read can reuse pages the rounds
    before it left resident, and its growth looks smaller than it is)."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def peak_rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


async def file_copy(table: Table, rounds: int, container: str) -> None:
    channel_agent = agents.Agent(model="bench", environment=agents.LocalDockerSandbox(image=IMAGE))
    plain_agent = agents.Agent(
        model="bench", environment=agents.LocalDockerSandbox(image=IMAGE, exec_channel=False)
    )
    async with (
        await channel_agent.start_session() as session,
        await plain_agent.start_session() as plain,
    ):
        for size, name in SIZES:
            progress(f"4. file copy {name}")
            data = os.urandom(size)
            with tempfile.TemporaryDirectory() as directory:
                source = Path(directory) / "in.bin"
                back = Path(directory) / "out.bin"
                source.write_bytes(data)
                ours, plain_samples, theirs = [], [], []
                for round_ in range(rounds + 1):  # round 0 warms, untimed
                    samples = (
                        await copy_through(session.sandbox, data),
                        copy_with_cli(container, source, back, data),
                        await copy_through(plain.sandbox, data),
                    )
                    if round_:
                        ours.append(samples[0])
                        theirs.append(samples[1])
                        plain_samples.append(samples[2])
            for label, sandbox in (
                ("channel", session.sandbox),
                ("exec_channel=False", plain.sandbox),
            ):
                await sandbox.write_file("blob.bin", data)
                if reset_peak_rss():  # untimed: what one read_file adds to peak RSS
                    before = rss_kib()
                    read = await sandbox.read_file("blob.bin")
                    grew = peak_rss_kib() - before
                    del read
                    FOOTNOTES.append(
                        f"peak RSS growth during one {name} `read_file` ({label}): {mib(grew)}"
                    )
                    if label == "channel" and size >= 100 << 20:
                        table.add(
                            f"4. peak RSS growth of one {name} `read_file` (channel)",
                            f"{mib(grew)} ({grew * 1024 / size:.2f}x the file)",
                            table.at_most_value(
                                f"{name} read_file peak memory", grew * 1024 / size, 1.1
                            ),
                        )
            del data
            table.add(f"4. runner `write_file` + `read_file`, {name}", ours)
            table.add(
                f"4. runner `write_file` + `read_file`, {name}, exec_channel=False",
                plain_samples,
                Table.info(ours, plain_samples),
            )
            table.add(
                f"4. `docker cp` in + out, {name}",
                theirs,
                table.at_most(f"file copy {name} vs docker cp", "runner", ours, theirs, 1.0),
            )
    FOOTNOTES.append(f"ru_maxrss after the file copies: {mib(max_rss_kib())}")


# --- 5. concurrency --------------------------------------------------------------


@dataclass
class Level:
    sessions: int
    walls: list[float]
    failures: list[str]
    leaked: int
    rss: tuple[int, int]
    max_rss: int
    threads: tuple[int, int]
    fds: tuple[int, int]
    channel_threads: int


def snapshot() -> tuple[int, int, int]:
    return rss_kib(), threading.active_count(), open_fds()


async def one_session(agent: agents.Agent, failures: list[str]) -> None:
    try:
        session = await agent.start_session()
    except Exception as exc:
        failures.append(f"start: {type(exc).__name__}: {exc}")
        return
    try:
        for _ in range(EXECS_PER_SESSION):
            result = await session.sandbox.execute("true")
            if result.exit_code != 0:
                failures.append(f"execute exited {result.exit_code}: {result.stderr[-200:]}")
    except Exception as exc:
        failures.append(f"execute: {type(exc).__name__}: {exc}")
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await session.cancel()
            except Exception as exc:
                failures.append(f"close: {type(exc).__name__}: {exc}")


async def concurrency(rounds: int) -> list[Level]:
    environment = agents.LocalDockerSandbox(image=IMAGE)
    agent = agents.Agent(model="bench", environment=environment)
    await one_session(agent, [])  # client connect + leftover sweep, outside the numbers
    levels = []
    for count in CONCURRENCY:
        progress(f"5. concurrency: {count} session(s)")
        rss_before, threads_before, fds_before = snapshot()
        walls: list[float] = []
        failures: list[str] = []
        for _ in range(rounds):
            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(count):
                    group.start_soon(one_session, agent, failures)
            walls.append(time.perf_counter() - started)
        rss_after, threads_after, fds_after = snapshot()
        channel_threads = sum(
            1 for t in threading.enumerate() if t.name.startswith("exec-channel-")
        )
        levels.append(
            Level(
                sessions=count,
                walls=walls,
                failures=failures,
                leaked=runner_leftovers(),
                rss=(rss_before, rss_after),
                max_rss=max_rss_kib(),
                threads=(threads_before, threads_after),
                fds=(fds_before, fds_after),
                channel_threads=channel_threads,
            )
        )
    return levels


def print_concurrency(levels: list[Level], rounds: int) -> None:
    print()
    print(
        f"5. concurrency: N cold sessions at once, each {EXECS_PER_SESSION} x `execute('true')` "
        f"then close; {rounds} rounds per N; before/after are around all rounds of one N"
    )
    print(
        f"| sessions | wall median (min{DASH}max) | per session | failures | leaked containers "
        "| RSS before -> after | peak RSS (ru_maxrss) | threads before -> after "
        "| channel threads left | fds before -> after |"
    )
    print("|---:|---|---:|---:|---:|---|---:|---|---:|---|")
    for level in levels:
        leaked = f"{level.leaked}" + (" LEAK" if level.leaked else "")
        failed = f"{len(level.failures)}" + (" FAIL" if level.failures else "")
        print(
            f"| {level.sessions} | {spread(level.walls)} "
            f"| {ms(median(level.walls) / level.sessions)} ms | {failed} | {leaked} "
            f"| {mib(level.rss[0])} -> {mib(level.rss[1])} | {mib(level.max_rss)} "
            f"| {level.threads[0]} -> {level.threads[1]} | {level.channel_threads} "
            f"| {level.fds[0]} -> {level.fds[1]} |"
        )
    for level in levels:
        for failure in sorted(set(level.failures))[:5]:
            print(f"  failure at N={level.sessions}: {failure}")


# --- 6. the peer -----------------------------------------------------------------

PEER_ROWS: dict[str, list[float]] = {}
PEER_PYTHON_USED: list[str] = [PEER_PYTHON]

#: Run with the peer venv's python: argv = image, rounds, label.  Prints one JSON line.
PEER_SCRIPT = r"""
import importlib.metadata, json, sys, time
import docker
from llm_sandbox import SandboxSession

image, rounds, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
key, _, value = label.partition("=")
client = docker.from_env()
client.images.get(image)  # raises ImageNotFound rather than let the peer pull it

def session():
    return SandboxSession(
        backend="docker", client=client, image=image, lang="python",
        skip_environment_setup=True,
        runtime_configs={"network_mode": "none", "init": True, "labels": {key: value},
                         "command": ["sleep", "infinity"]},
    )

def true(s):
    result = s.execute_command("true")
    assert result.exit_code == 0, result

starts, closes, execs = [], [], []
for round_ in range(rounds + 1):
    s = session()
    started = time.perf_counter()
    s.open()
    try:
        true(s)
        elapsed = time.perf_counter() - started
    finally:
        closing = time.perf_counter()
        s.close()
        closed = time.perf_counter() - closing
    if round_:
        starts.append(elapsed)
        closes.append(closed)
s = session()
s.open()
try:
    true(s); true(s)
    for _ in range(rounds):
        started = time.perf_counter()
        true(s)
        execs.append(time.perf_counter() - started)
finally:
    s.close()
print(json.dumps({"peer": importlib.metadata.version("llm-sandbox"),
                  "start": starts, "close": closes, "exec": execs}))
"""


async def run_peer(peer_python: str, rounds: int) -> dict[str, Any] | str:
    """The peer's samples, or why it could not run."""
    PEER_PYTHON_USED[:] = [peer_python]
    if not Path(peer_python).exists():
        return f"not installed ({peer_python} not found); set it up with: {PEER_SETUP}"
    progress(f"6. peer {PEER}")
    # anyio's run_process: a Ctrl-C kills the peer instead of waiting for it.
    with anyio.move_on_after(900) as scope:
        done = await anyio.run_process(
            [peer_python, "-c", PEER_SCRIPT, IMAGE, str(rounds), OWN], check=False
        )
    if scope.cancelled_caught:
        return "timed out after 900 s"
    stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"peer"'):
            return json.loads(line)
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return f"exited {done.returncode}: {lines[-1] if lines else '(no output)'}"


def peer_rows(table: Table, peer: dict[str, Any] | str) -> None:
    """The peer's rows, beside ours: its exec in section 1, its start and close in 2."""
    if isinstance(peer, str):
        table.add(f"6. peer {PEER}", "not run", f"skipped: {peer}", section="1")
        return
    FOOTNOTES.append(
        f"peer: {PEER} {peer['peer']} (Docker backend, {PEER_PYTHON_USED[0]}), run after the "
        "runner's sections in a subprocess; network_mode=none, init, `sleep infinity`, "
        "skip_environment_setup=True; its exec is the SDK's exec_run, one Engine exec per command"
    )
    name = f"{PEER} {peer['peer']}"
    table.add(
        f"6. peer {name}: `execute_command('true')`",
        peer["exec"],
        Table.info(PEER_ROWS["anchor-exec"], peer["exec"]),
        section="1",
    )
    table.add(
        f"6. peer {name}: `open()` to 1st command",
        peer["start"],
        Table.info(PEER_ROWS["anchor-start"], peer["start"], "runner cold"),
        section="2",
    )
    table.add(
        f"6. peer {name}: `close()`",
        peer["close"],
        Table.info(PEER_ROWS["anchor-close"], peer["close"], "runner close"),
        section="2",
    )


# --- main ----------------------------------------------------------------------

FOOTNOTES: list[str] = []


def engine_noise() -> str:
    running = docker_cli("ps", "-q").split()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"other running containers at start: {len(running)}; load average: {load}"


async def main(
    rounds: int,
    peer_python: str,
    *,
    snapshot_only: bool = False,
    exec_only: bool = False,
    files_only: bool = False,
    peer_only: bool = False,
) -> None:
    print(f"rounds: {rounds}; image: {IMAGE}; pid: {PID}; {engine_noise()}", flush=True)
    table = Table()
    if snapshot_only or exec_only or files_only or peer_only:
        if peer_only:  # its rows compare with sections 1 and 2
            container = start_container()
            try:
                await exec_round_trip(table, rounds, container)
            finally:
                docker_cli("rm", "-f", "-v", container)
            await session_start(table, rounds)
            peer_rows(table, await run_peer(peer_python, rounds))
            for note in FOOTNOTES:
                print(note)
        elif snapshot_only:
            await snapshot_start(table, rounds)
        elif files_only:
            container = start_container()
            try:
                await file_copy(table, rounds, container)
            finally:
                docker_cli("rm", "-f", "-v", container)
            for note in FOOTNOTES:
                print(note)
        else:
            container = start_container()
            try:
                await exec_round_trip(table, rounds, container)
            finally:
                docker_cli("rm", "-f", "-v", container)
            await exec_per_image(table, rounds)
        print()
        table.print()
        for miss in table.misses:
            print(f"  MISSED: {miss}")
        return
    container = start_container()
    try:
        # Run order differs from print order: concurrency goes before the pool
        # and the 100 MB copies, so its thread, fd and RSS numbers are its own.
        await exec_round_trip(table, rounds, container)
        await exec_per_image(table, rounds)
        await hook(table, rounds, container)
        levels = await concurrency(rounds)
        await session_start(table, rounds)
        await file_copy(table, rounds, container)
        await snapshot_start(table, rounds)
    finally:
        docker_cli("rm", "-f", "-v", container)
    peer_rows(table, await run_peer(peer_python, rounds))
    print()
    table.print()
    print_concurrency(levels, rounds)
    print()
    for note in FOOTNOTES:
        print(note)
    leftovers = own_containers()
    print(f"containers of this run still present before cleanup: {len(leftovers)}")
    if table.misses:
        print(f"MISSED {len(table.misses)} target(s):")
        for miss in table.misses:
            print(f"  - {miss}")
    else:
        print("all targets met")


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM does what Ctrl-C does: asyncio's SIGINT handler cancels the run,
    so open sessions close themselves; without one, raise KeyboardInterrupt."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds per measure (15)")
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--peer-python", default=PEER_PYTHON, help="python of the peer's venv")
    parser.add_argument(
        "--setup-peer",
        action="store_true",
        help=f"make the peer's venv first if it is missing: {PEER_SETUP}",
    )
    parser.add_argument(
        "--snapshot-only", action="store_true", help="run only section 7 (snapshots)"
    )
    parser.add_argument(
        "--exec-only", action="store_true", help="run only sections 1 and 1b (exec round trip)"
    )
    parser.add_argument(
        "--files-only", action="store_true", help="run only section 4 (file copies)"
    )
    parser.add_argument(
        "--peer-only", action="store_true", help="run only sections 1, 2 and 6 (the peer)"
    )
    args = parser.parse_args()
    if args.setup_peer and not Path(args.peer_python).exists():
        progress(f"setting up the peer: {PEER_SETUP}")
        subprocess.run(["sh", "-c", PEER_SETUP], check=True)
    signal.signal(signal.SIGTERM, _terminate)
    finished = False
    try:
        anyio.run(
            partial(
                main,
                snapshot_only=args.snapshot_only,
                exec_only=args.exec_only,
                files_only=args.files_only,
                peer_only=args.peer_only,
            ),
            args.rounds or (5 if args.quick else 15),
            args.peer_python,
        )
        finished = True
    except KeyboardInterrupt:
        print("interrupted; removing this run's containers", file=sys.stderr)
        sys.exit(130)
    finally:
        cleanup(interrupted=not finished)
