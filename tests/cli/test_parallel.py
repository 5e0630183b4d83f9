"""Many sessions at once: run_many in Python, runner run --input-sets --parallel in the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Annotated

import pytest

import runner as agents
from runner.cli.running import run_many

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def channel_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("exec-channel-")]


@pytest.mark.docker
async def test_32_concurrent_docker_sessions_leak_nothing(docker_backend) -> None:
    class Works(agents.SandboxHook):
        async def on_create(self, ctx) -> None:
            for index in range(5):
                result = await ctx.sandbox.execute(f"echo {index}")
                assert result.stdout == f"{index}\n"

    agent = agents.Agent(model="m", environment=docker_backend.environment(hooks=[Works()]))
    sets = [{} for _ in range(32)]
    first = await run_many(lambda _: agent, sets, concurrency=32)
    fds_after_first = open_fds()
    second = await run_many(lambda _: agent, sets, concurrency=32)
    assert [o.exit_code for o in first + second] == [0] * 64
    assert docker_backend.leftovers() == []
    assert channel_threads() == []
    # A leak of one descriptor per session would add 32; the Engine client's
    # connection pool (10 connections) may grow or shrink by a few.
    assert open_fds() <= fds_after_first + 10


class Task(agents.SessionInput):
    input_id = "t.task"
    n: int


class Fails(agents.SandboxHook):
    async def on_create(self, ctx, *, task: Annotated[Task, agents.Depends()]) -> None:
        if task.n == 2:
            raise RuntimeError("two is bad")


async def test_run_many_keeps_input_order_and_reports_each_outcome(local_backend) -> None:
    agent = agents.Agent(model="m", environment=local_backend.environment(hooks=[Fails()]))
    sets = [{"t.task": {"n": n}} for n in range(4)] + [{"t.task": {"n": "x"}}]
    outcomes = await run_many(lambda _: agent, sets, concurrency=2)
    assert [o.exit_code for o in outcomes] == [0, 0, 1, 0, 2]
    assert outcomes[2].messages == ["hook Fails.on_create failed: RuntimeError: two is bad"]
    assert "is not of type 'integer'" in outcomes[4].messages[0]


def test_cli_runs_one_session_per_input_set(tmp_path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            inputs:
              demo.task:
                as: task
                schema: {type: object, properties: {title: {type: string, minLength: 1}}, required: [title]}
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: note
                    on_create: [{run: "echo {{ task.title }} > TASK.md"}]
                    on_destroy: [{save: TASK.md, to: task.md}]
            """
        )
    )
    sets = tmp_path / "sets.yaml"
    sets.write_text(
        "- {demo.task: {title: one}}\n- {demo.task: {title: two}}\n- {demo.task: {title: ''}}\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "run",
            str(config),
            "--input-sets",
            str(sets),
            "--parallel",
            "2",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "runner: 3 session(s), 2 ok, 1 failed (parallel 2," in result.stderr
    assert (tmp_path / "out" / "1" / "task.md").read_text() == "one\n"
    assert (tmp_path / "out" / "2" / "task.md").read_text() == "two\n"
    assert not (tmp_path / "out" / "3").exists()
    rows = [line.split() for line in result.stderr.splitlines() if line.strip()[:1].isdigit()]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("1", "ok", "0"),
        ("2", "ok", "0"),
        ("3", "failed", "2"),
    ]
