"""What the stronger isolation options cost: start and exec under each, against the defaults.

    .venv/bin/python bench/isolation.py [--rounds N] [--image TAG] [--userns-host URL]

For each setup (the defaults: runc with Docker's seccomp profile, on the
main engine; ``seccomp="strict"``; ``runtime="runsc"`` where the engine has
it; the defaults on the engine with user-namespace remapping that
``scripts/docker-userns-up`` starts, where it answers), in the same process
and interleaved round by round, it prints medians of:

- start: ``start_session()`` to a sandbox ready for commands (container
  created and started, exec channel up, workspace handed over);
- exec: ``execute("true")`` over the exec channel, the median of 20;
- close: the session's close (the container removed);

and each one's ratio to the defaults' figure.  Not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import anyio

import runner as agents
from runner.sandboxes.docker.environment import DockerClient, LocalDockerSandbox

SETUPS: dict[str, dict[str, str]] = {
    "default": {},
    "seccomp=strict": {"seccomp": "strict"},
    "runtime=runsc": {"runtime": "runsc"},
    "userns-remap": {},  # docker_host: the remapped engine (--userns-host)
}


def remapped(url: str) -> bool:
    """Whether an engine answers at ``url`` and remaps user namespaces."""
    try:
        info = DockerClient(url)._connect().info()
    except Exception:
        return False
    return "name=userns" in " ".join(info.get("SecurityOptions") or [])


async def one_round(image: str, options: dict) -> tuple[float, float, float]:
    environment = LocalDockerSandbox(image=image, **options)
    agent = agents.Agent(model="m", environment=environment)
    started = time.perf_counter()
    session = await agent.start_session()
    start = time.perf_counter() - started
    execs = []
    for _ in range(20):
        began = time.perf_counter()
        result = await session.sandbox.execute("true")
        execs.append(time.perf_counter() - began)
        assert result.exit_code == 0, result.stderr
    began = time.perf_counter()
    await session.close()
    return start, statistics.median(execs), time.perf_counter() - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--image", default=os.environ.get("RUNNER_DOCKER_IMAGE", "sandbox-runner-test:latest")
    )
    parser.add_argument(
        "--userns-host",
        default=os.environ.get(
            "RUNNER_TEST_USERNS_HOST", "unix:///run/sandbox-runner-userns/docker.sock"
        ),
        help="the engine with --userns-remap (scripts/docker-userns-up starts one)",
    )
    args = parser.parse_args()
    runtimes = DockerClient()._connect().info().get("Runtimes") or {}
    setups = {k: v for k, v in SETUPS.items() if v.get("runtime", "runc") in runtimes}
    if remapped(args.userns_host):
        setups["userns-remap"] = {"docker_host": args.userns_host}
    else:
        del setups["userns-remap"]
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in setups}
    for _ in range(args.rounds):
        for name, options in setups.items():
            figures[name].append(await one_round(args.image, options))
    base = [statistics.median(f[i] for f in figures["default"]) for i in range(3)]
    print(f"image {args.image}, {args.rounds} rounds (medians; ratio to the defaults)")
    print(f"{'setup':<16} {'start ms':>10} {'exec ms':>14} {'close ms':>14}")
    for name, rows in figures.items():
        start, execute, close = (statistics.median(r[i] for r in rows) for i in range(3))
        print(
            f"{name:<16} {start * 1e3:7.0f} {start / base[0]:4.2f}x"
            f" {execute * 1e3:8.2f} {execute / base[1]:4.2f}x"
            f" {close * 1e3:8.0f} {close / base[2]:4.2f}x"
        )
    if "runtime=runsc" not in setups:
        print("(no runsc runtime on this engine: scripts/docker-up registers it)")
    if "userns-remap" not in setups:
        print(f"(no remapped engine at {args.userns_host}: scripts/docker-userns-up starts one)")


if __name__ == "__main__":
    anyio.run(main)
