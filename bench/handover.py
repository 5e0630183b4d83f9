"""What handing the workspace between the hooks and the agent costs (issue 26).

    .venv/bin/python bench/handover.py [--rounds N] [--files N] [--image TAG]

On Docker, root hands the workspace to the agent's uid after the last
``on_create`` and back to the hooks' uid before ``on_destroy``
(``runner/sandboxes/docker/owners.py``: ``find -user ... -exec chown -h``).
For a workspace of ``--files`` files (100 directories of files) and for an
empty one, interleaved round by round in one sandbox, it prints medians of:

- handover: one hand-over (agent to hooks, then hooks to agent: every file
  changes owner each time);
- walk: root's ``find`` over the same tree, printing nothing: the floor of
  any hand-over that must look at every file;
- exec: ``execute_as_root("true")``, a command's fixed cost;

and the hand-over's ratio to each.  Not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import anyio

import runner as agents
from runner.sandboxes.docker.environment import LocalDockerSandbox

#: ``$1`` directories of ``$2`` files each, under /workspace/tree.
MAKE_TREE = (
    'i=0; while [ $i -lt "$1" ]; do mkdir -p tree/$i && (cd tree/$i && touch $(seq 1 "$2"))'
    " || exit 1; i=$((i + 1)); done"
)


async def timed(action) -> float:
    began = time.perf_counter()
    await action()
    return time.perf_counter() - began


async def measure(image: str, rounds: int, files: int) -> dict[str, list[float]]:
    agent = agents.Agent(model="m", environment=LocalDockerSandbox(image=image))
    times: dict[str, list[float]] = {}
    async with await agent.start_session() as session:
        box = session.sandbox
        for label, count in (("empty", 0), (f"{files} files", files)):
            if count:
                dirs = 100
                made = await box.execute(
                    f"set -- {dirs} {count // dirs}; {MAKE_TREE}", timeout_seconds=600
                )
                assert made.exit_code == 0, made.stderr

            async def walk() -> None:
                result = await box.execute_as_root("find /workspace -depth >/dev/null")
                assert result.exit_code == 0, result.stderr

            async def exec_true() -> None:
                result = await box.execute_as_root("true")
                assert result.exit_code == 0, result.stderr

            for _ in range(rounds):
                times.setdefault(f"handover, {label}", []).append(await timed(box.hand_to_hooks))
                times[f"handover, {label}"].append(await timed(box.hand_to_agent))
                times.setdefault(f"walk, {label}", []).append(await timed(walk))
                times.setdefault(f"exec, {label}", []).append(await timed(exec_true))
        owner = await box.execute("stat -c %u tree/0/1")
        assert owner.stdout.strip() == "1000", owner
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument(
        "--image", default=os.environ.get("RUNNER_DOCKER_IMAGE", "sandbox-runner-test:latest")
    )
    args = parser.parse_args()
    times = await measure(args.image, args.rounds, args.files)
    median = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"image {args.image}, {args.rounds} rounds (handover: {2 * args.rounds} hand-overs)")
    print(f"{'row':<28}{'median ms':>12}{'handover / this':>18}")
    for name, value in median.items():
        label = name.split(", ", 1)[1]
        ratio = median[f"handover, {label}"] / value if value else float("nan")
        print(f"{name:<28}{value:>12.1f}{ratio:>17.2f}x")


if __name__ == "__main__":
    anyio.run(main)
