"""Faults: a killed runner, runaway commands, signals at every stage (real Docker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import RUNNER_CLI, TEST_IMAGE

import runner as agents
from runner.sandboxes.docker.environment import LABEL_OWNER_PID

pytestmark = [pytest.mark.docker]


def containers_of(docker_client, pid: int) -> list[str]:
    return [
        c.id
        # ignore_removed: docker-py lists, then inspects each; one removed in
        # between (the runner's own probe, another process's sweep) is not an error.
        for c in docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"}, ignore_removed=True
        )
    ]


def start_runner(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*RUNNER_CLI, "run", str(config), *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUNNER_DOCKER_IMAGE": TEST_IMAGE},
    )


def wait_for(process: subprocess.Popen[str], text: str, timeout: float = 60) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            break
        seen += line
    assert text in seen, seen
    return seen


def docker_config(tmp_path: Path, hooks: str, **extra: str) -> Path:
    path = tmp_path / "agent.yaml"
    lines = "".join(f"    {k}: {v}\n" for k, v in extra.items())
    path.write_text(
        "version: 1\nagent:\n  model: m\n"
        + "  environment:\n    sandbox: docker\n"
        + lines
        + "    hooks:\n"
        + textwrap.indent(textwrap.dedent(hooks), "      ")
    )
    return path


SLOW_CREATE = "- name: slow\n  on_create: [{run: sleep 120, timeout_seconds: 300}]\n"


def kill_holding_one_container(process: subprocess.Popen[str], docker_client) -> None:
    """SIGKILL the runner once its one container is seen, while its owner lives.

    Counted before the kill, not after: under pytest -n 2 the other worker's
    runner sweeps a container whose owner is dead, so a count taken after the
    kill races it (CI saw that race in each of these tests).
    """
    assert len(containers_of(docker_client, process.pid)) == 1
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def test_a_killed_runner_leaves_a_container_that_gc_removes(tmp_path, docker_client) -> None:
    process = start_runner(docker_config(tmp_path, SLOW_CREATE))
    wait_for(process, "slow.on_create")
    kill_holding_one_container(process, docker_client)
    gc = subprocess.run([*RUNNER_CLI, "gc"], capture_output=True, text=True, timeout=60)
    assert gc.returncode == 0, gc.stderr
    # Judged by what is left: under pytest -n 2 the other worker's runner may
    # sweep the orphan first (its owner is dead), and then gc cannot name it
    # (the same race as the gc test in test_docker_sandbox; CI saw both).
    assert containers_of(docker_client, process.pid) == []


def test_the_next_run_sweeps_what_a_killed_runner_left(tmp_path, docker_client) -> None:
    process = start_runner(docker_config(tmp_path, SLOW_CREATE))
    wait_for(process, "slow.on_create")
    kill_holding_one_container(process, docker_client)
    quick = docker_config(tmp_path, "- name: quick\n  on_create: [{run: 'true'}]\n")
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(quick)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RUNNER_DOCKER_IMAGE": TEST_IMAGE},
    )
    assert result.returncode == 0, result.stderr
    assert containers_of(docker_client, process.pid) == []


def test_a_runner_killed_mid_turn_is_swept_too(tmp_path, docker_client) -> None:
    from chat_server import ChatServer, assistant

    slow = assistant("late")
    slow.delay_seconds = 60
    with ChatServer([slow]) as server:
        path = tmp_path / "agent.yaml"
        path.write_text(
            f"version: 1\nagent:\n  model: m\n  base_url: {server.url}\n"
            "  environment: {sandbox: docker}\n"
        )
        process = start_runner(path, "--prompt", "hello")
        deadline = time.monotonic() + 30
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.requests, "the turn never reached the model"
        kill_holding_one_container(process, docker_client)
    subprocess.run([*RUNNER_CLI, "gc"], capture_output=True, timeout=60)
    assert containers_of(docker_client, process.pid) == []


@pytest.mark.parametrize(
    ("hooks", "marker"),
    [
        (SLOW_CREATE, "slow.on_create"),
        ("- name: slow\n  on_destroy: [{run: sleep 5}]\n", "slow.on_destroy"),
    ],
    ids=["during-on-create", "during-close"],
)
def test_ctrl_c_still_deletes_the_container(tmp_path, docker_client, hooks, marker) -> None:
    process = start_runner(docker_config(tmp_path, hooks))
    if marker.endswith("on_destroy"):
        wait_for(process, "sandbox docker ready")
        # no on_create steps: the session closes at once, on_destroy starts
    wait_for(process, marker)
    (container,) = containers_of(docker_client, process.pid)
    wait_until_running(docker_client, container, "sleep")  # the hook's step has started
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[1]
    assert process.returncode == 130, rest
    assert "sandbox deleted" in rest
    assert containers_of(docker_client, process.pid) == []


def wait_until_running(docker_client, container_id: str, command: str, timeout: float = 60):
    """Wait until a process whose command line starts with ``command`` runs in the
    container, apart from its main process (the TTL clock, ``sleep <ttl>``)."""
    container = docker_client.containers.get(container_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        titles = container.top(ps_args="-eo pid,args")["Processes"] or []
        commands = [args for _, args in titles]
        if any(c.startswith(command) and not c.startswith("sleep 86") for c in commands):
            return
        time.sleep(0.05)
    raise AssertionError(f"no {command!r} ever ran in {container_id[:12]}: {commands}")


def test_ctrl_c_during_create_deletes_the_container(tmp_path, docker_client) -> None:
    process = start_runner(docker_config(tmp_path, SLOW_CREATE, setup_script="'sleep 30'"))
    wait_for(process, "runner: session")
    # The container exists and its setup script runs (no hook has started yet).
    deadline = time.monotonic() + 60
    while not containers_of(docker_client, process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    (container,) = containers_of(docker_client, process.pid)
    wait_until_running(docker_client, container, "sleep 30")
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[1]
    assert process.returncode == 130, rest
    assert "slow.on_create" not in rest
    assert containers_of(docker_client, process.pid) == []


@pytest.fixture
async def small_box(docker_backend):
    env = docker_backend.environment(memory="64m", pids_limit=64)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        yield session.sandbox


@pytest.mark.anyio
async def test_a_fork_bomb_hits_the_pids_limit_and_the_sandbox_survives(small_box) -> None:
    import anyio

    bomb = await small_box.execute("bomb() { bomb | bomb & }; bomb", timeout_seconds=5)
    assert bomb.exit_code != 0 or bomb.timed_out
    for _ in range(20):  # the killed processes may take a moment to be reaped
        after = await small_box.execute("echo alive")
        if after.exit_code == 0:
            break
        assert after.exit_code == 126  # could not start yet: reported, not raised
        await anyio.sleep(0.5)
    assert after.stdout == "alive\n"


@pytest.mark.anyio
async def test_a_memory_hog_is_killed_and_reported(small_box) -> None:
    result = await small_box.execute("python3 -c 'b = bytearray(512 << 20); print(len(b))'")
    assert result.exit_code == 137
    assert "most likely out of memory (memory limit 64m)" in result.stderr


@pytest.mark.anyio
async def test_a_gigabyte_of_output_costs_bounded_memory(small_box) -> None:
    result = await small_box.execute("head -c 1000000000 /dev/zero", timeout_seconds=120)
    assert result.exit_code == 0
    assert result.output_truncated
    assert "[... 99" in result.stdout  # ~991 MB omitted, said so
    assert len(result.stdout) < (8 << 20) + 200


@pytest.mark.anyio
async def test_a_full_workspace_is_an_error_inside_the_sandbox_only(docker_backend) -> None:
    env = docker_backend.environment(workspace_size="16m")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        filled = await box.execute("head -c 40000000 /dev/zero > big.bin")
        assert filled.exit_code != 0
        assert "No space left on device" in filled.stderr
        with pytest.raises(OSError):
            await box.write_file("more.bin", b"x" * (20 << 20))
        await box.execute("rm -f big.bin")
        await box.write_file("small.txt", "fits")
        assert await box.read_file("small.txt") == b"fits"


def test_a_gigabyte_of_output_keeps_the_runner_small() -> None:
    code = textwrap.dedent(
        f"""\
        import resource, anyio, runner
        async def main():
            env = runner.LocalDockerSandbox(image={TEST_IMAGE!r})
            async with await runner.Agent(model="m", environment=env).start_session() as s:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                r = await s.sandbox.execute("head -c 1000000000 /dev/zero", timeout_seconds=120)
                after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                print(r.output_truncated, after - before)
        anyio.run(main)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    truncated, growth_kib = result.stdout.split()
    assert truncated == "True", result.stderr
    assert int(growth_kib) < 100_000  # a copy of the output would be ~1 GB
