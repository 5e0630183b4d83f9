"""Session start and command round-trip latency, per backend, against a baseline.

    .venv/bin/python bench/core_latency.py [--rounds N]

For each backend it measures, as medians over N rounds:

- start: ``agent.start_session()`` until the first ``execute("true")`` returns;
- exec:  one ``execute("true")`` round trip in an open session;

and, side by side in the same process, the same work done without the
runner: ``bash -c true`` via ``subprocess`` for the local sandbox, and the
docker CLI (``docker run -d`` + ``docker exec``, then ``docker exec``) for
Docker.  The ratio column is runner / baseline.  Not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import warnings

import anyio

import runner as agents
from runner.sandboxes.local import DangerousLocalWarning

IMAGE = os.environ.get("RUNNER_DOCKER_IMAGE", "sandbox-runner-test:latest")


async def runner_start(environment: agents.SandboxEnvironment) -> float:
    agent = agents.Agent(model="bench", environment=environment)
    started = time.perf_counter()
    session = await agent.start_session()
    await session.sandbox.execute("true")
    elapsed = time.perf_counter() - started
    await session.cancel()
    return elapsed


async def runner_exec(environment: agents.SandboxEnvironment, rounds: int) -> list[float]:
    agent = agents.Agent(model="bench", environment=environment)
    times = []
    async with await agent.start_session() as session:
        await session.sandbox.execute("true")  # warm the connection
        for _ in range(rounds):
            started = time.perf_counter()
            await session.sandbox.execute("true")
            times.append(time.perf_counter() - started)
    return times


def local_baseline_start() -> float:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workspace:
        subprocess.run(["bash", "-c", "true"], cwd=workspace, check=True)
        return time.perf_counter() - started


def local_baseline_exec() -> float:
    started = time.perf_counter()
    subprocess.run(["bash", "-c", "true"], check=True)
    return time.perf_counter() - started


def docker_cli(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def docker_baseline_start() -> float:
    started = time.perf_counter()
    container = docker_cli(
        "run", "-d", "--init", "--network", "none", "-w", "/workspace", IMAGE, "sleep", "600"
    ).strip()
    docker_cli("exec", container, "bash", "-c", "true")
    elapsed = time.perf_counter() - started
    docker_cli("rm", "-f", container)
    return elapsed


def docker_baseline_exec(rounds: int) -> list[float]:
    container = docker_cli(
        "run", "-d", "--init", "--network", "none", IMAGE, "sleep", "600"
    ).strip()
    try:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            docker_cli("exec", container, "bash", "-c", "true")
            times.append(time.perf_counter() - started)
        return times
    finally:
        docker_cli("rm", "-f", container)


def row(name: str, ours: list[float], baseline: list[float], label: str) -> str:
    a, b = statistics.median(ours), statistics.median(baseline)
    return f"| {name:<28} | {a * 1000:9.1f} ms | {b * 1000:9.1f} ms | {a / b:6.2f}x | {label}"


async def main(rounds: int, backends: list[str]) -> None:
    print(f"rounds: {rounds}; image: {IMAGE}")
    print(f"| {'measure':<28} | {'runner':>12} | {'baseline':>12} | {'ratio':>7} | baseline is")
    print(f"|{'-' * 30}|{'-' * 14}|{'-' * 14}|{'-' * 9}|------------")
    if "local" in backends:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DangerousLocalWarning)
            local = agents.DangerousLocalSandbox()
        starts = [await runner_start(local) for _ in range(rounds)]
        base = [local_baseline_start() for _ in range(rounds)]
        print(row("local: start to 1st command", starts, base, "mkdtemp + subprocess bash"))
        execs = await runner_exec(local, rounds)
        base = [local_baseline_exec() for _ in range(rounds)]
        print(row("local: execute('true')", execs, base, "subprocess bash -c true"))
    if "docker" in backends:
        docker = agents.LocalDockerSandbox(image=IMAGE)
        await runner_start(docker)  # first session: client connect + leftover sweep
        starts, base = [], []
        for _ in range(rounds):  # interleaved, so drift hits both alike
            starts.append(await runner_start(docker))
            base.append(docker_baseline_start())
        print(row("docker: start to 1st command", starts, base, "docker run -d + docker exec"))
        execs = await runner_exec(docker, rounds)
        base = docker_baseline_exec(rounds)
        print(row("docker: execute('true')", execs, base, "docker exec (CLI)"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--backend", action="append", choices=["local", "docker"])
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.backend or ["local", "docker"])
