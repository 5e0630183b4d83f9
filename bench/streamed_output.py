"""Streamed output on Docker: what the live progress costs a command (issue 31).

    .venv/bin/python bench/streamed_output.py [--rounds N]

One process, three sandboxes per image, their commands interleaved round by
round (so drift hits all alike), each sample after a 20 ms pause:

- **before**: the exec helpers as they are on ``main`` (``git show
  main:...``), nobody listening: the baseline;
- **now**: this tree's helpers, nobody listening (a plain exec: the request
  does not ask for its output as it comes, so nothing is streamed);
- **now, streamed**: this tree's helpers with an output listener, as under
  the CLI's progress (the request asks; the helper sends output frames and
  the runner cuts and scrubs lines).

Commands: ``true``; ``echo`` of three lines; 20,000 lines (~0.6 MB).  On
the full image (the Python helper) and busybox (the shell helper).  Prints
one markdown table of medians (min-max) and two ratios to *before*: the
median of each round's own ratio (the three samples of a round are
neighbours in time, so load hits them alike) and the ratio of the minima
(the cost with the least interference; on a loaded machine the steadier
one).  Target: *now* within a few percent of *before* (<= 1.05).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from typing import Any

import anyio

import runner as agents
from runner.core.output import listen_output
from runner.sandboxes.docker import channel as channel_module
from runner.sandboxes.docker.environment import LocalDockerSandbox

IMAGES = {
    "full (Python helper)": os.environ.get("RUNNER_DOCKER_IMAGE", "sandbox-runner-test:latest"),
    "busybox (shell helper)": "sandbox-runner-test-busybox:latest",
}
COMMANDS = {
    "true": "true",
    "3 lines": "echo one; echo two; echo three",
    "20,000 lines": "seq 1 20000 | sed 's/^/compiling unit /'",
}
SETTLE_SECONDS = 0.02


def main_helpers() -> dict[str, str]:
    """The helpers' sources on ``main``: the baseline."""
    return {
        name: subprocess.run(
            ["git", "show", f"main:runner/sandboxes/helpers/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for name in ("exec_helper.py", "exec_helper.sh")
    }


async def start(image: str, sources: dict[str, str] | None) -> Any:
    """An open session on ``image``; its helper started from ``sources`` if given."""
    original = channel_module.helper_source
    if sources is not None:
        channel_module.helper_source = lambda name="exec_helper.py": sources[name]  # type: ignore[assignment]
    try:
        env = LocalDockerSandbox(image=image)
        session = await agents.Agent(model="m", environment=env).start_session()
        await session.__aenter__()
        await session.sandbox.execute("true")  # the channel is up
    finally:
        channel_module.helper_source = original  # type: ignore[assignment]
    return session


async def sample(session: Any, command: str, *, listen: bool) -> float:
    await anyio.sleep(SETTLE_SECONDS)
    lines: list[str] = []
    started = time.perf_counter()
    if listen:
        with listen_output(lambda _stream, line: lines.append(line), every_line=False):
            result = await session.sandbox.execute(command)
    else:
        result = await session.sandbox.execute(command)
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result
    assert not listen or command == "true" or lines, command  # it did stream
    return elapsed


def cell(samples: list[float]) -> str:
    low, high = min(samples) * 1000, max(samples) * 1000
    return f"{statistics.median(samples) * 1000:.2f} ms ({low:.2f}\u2013{high:.2f})"


def ratios(samples: list[float], base: list[float]) -> str:
    """The median of the rounds' own ratios; the ratio of the minima."""
    rounds = statistics.median(a / b for a, b in zip(samples, base, strict=True))
    return f"{rounds:.2f}x; {min(samples) / min(base):.2f}x"


async def run(rounds: int) -> None:
    sources = main_helpers()
    print(
        "| image | command | before (main) | now | ratio (rounds; minima) "
        "| now, streamed | ratio (rounds; minima) |"
    )
    print("|---|---|---|---|---|---|---|")
    for image_name, image in IMAGES.items():
        before = await start(image, sources)
        now = await start(image, None)
        try:
            for command_name, command in COMMANDS.items():
                times: dict[str, list[float]] = {"before": [], "now": [], "streamed": []}
                for _ in range(rounds):
                    times["before"].append(await sample(before, command, listen=False))
                    times["now"].append(await sample(now, command, listen=False))
                    times["streamed"].append(await sample(now, command, listen=True))
                ratio_now = ratios(times["now"], times["before"])
                ratio_streamed = ratios(times["streamed"], times["before"])
                print(
                    f"| {image_name} | {command_name} | {cell(times['before'])} "
                    f"| {cell(times['now'])} | {ratio_now} "
                    f"| {cell(times['streamed'])} | {ratio_streamed} |",
                    flush=True,
                )
        finally:
            for session in (before, now):
                await session.__aexit__(None, None, None)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    anyio.run(run, args.rounds)


if __name__ == "__main__":
    cli()
