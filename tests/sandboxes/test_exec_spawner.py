"""The Python helper's spawner: one child per sandbox user that starts that
user's commands (see ``Spawner`` in ``runner/sandboxes/helpers/exec_helper.py``).

It exists for speed (a command started by a process that already is the
user costs a vfork, not a fork of the whole helper), so these tests check
what it must not change: every command gets the same result as when the
helper forks it, on the full image and on ``python3-minimal``; and what an
agent can do to it, having the same uid: not read, trace or use it (it is
not dumpable and holds nothing of the channel), only stop or kill it, which
costs the command in flight and nothing else.
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
import pytest
from helper_parity import observed, open_session
from test_hostile_channel import PROBE, patch_python_helper
from test_shell_channel import COMMANDS

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

#: The helper with its spawner turned off: it forks every command, as before.
NO_SPAWNER = ("def spawner_for(user):\n", "def spawner_for(user):\n    return None\n")


async def results_of(backend: Any, tag: str) -> list[tuple[Any, ...]]:
    async with await open_session(backend, image=tag, output_cap_bytes=1 << 20) as session:
        box = session.sandbox
        assert box.channel is not None and box.channel.kind == "python"
        results = [observed(await box.execute(c, env={"X": "a b\n'c'"})) for c in COMMANDS]
        results.append(observed(await box.execute("pwd", cwd="/no/such/dir")))
        results.append(observed(await box.execute("pwd", cwd="/tmp")))
        results.append(observed(await box.execute("exec /no/such/program")))
        parent = await box.execute("stat -c %u /proc/$PPID")
        results.append(("parent", parent.stdout.strip()))
        return results


@pytest.mark.parametrize("kind", ["full", "minimal"])
async def test_the_spawner_changes_no_result(docker_backend, image_tags, monkeypatch, kind):
    tag = image_tags[kind]
    through_spawner = await results_of(docker_backend, tag)
    patch_python_helper(monkeypatch, *NO_SPAWNER)
    forked = await results_of(docker_backend, tag)
    # The parent of a command is the spawner (the sandbox user) or the helper (root):
    # proof that the two runs took the two paths.
    assert through_spawner.pop() == ("parent", "1000")
    assert forked.pop() == ("parent", "0")
    for command, spawned, plain in zip(
        [*COMMANDS, "cwd missing", "cwd /tmp", "no such program"],
        through_spawner,
        forked,
        strict=True,
    ):
        assert spawned == plain, command
    ids = through_spawner[COMMANDS.index("id -u; id -g; grep ^Groups /proc/self/status")][1]
    assert ids.split() == ["1000", "1000", "Groups:"]


async def test_the_agent_cannot_read_trace_or_use_the_spawner(docker_backend) -> None:
    """As the sandbox user, against its own parent (the spawner, same uid):
    no descriptor, no memory, no ptrace."""
    async with await open_session(docker_backend) as session:
        box = session.sandbox
        await box.write_file("probe.py", PROBE)
        with anyio.fail_after(30):
            probe = await box.execute("python3 probe.py $PPID; stat -c %u /proc/$PPID")
    assert probe.stdout.splitlines() == [
        "fd/0 Permission denied",
        "fd/1 Permission denied",
        "mem Permission denied",
        "ptrace Operation not permitted",
        "1000",
    ]


def host_fds(container: Any, pid_in_container: int) -> dict[int, str]:
    """What the container's process ``pid_in_container`` holds open, seen
    from the host's /proc (the process is not dumpable: inside the
    container not even root may look)."""
    for row in container.top()["Processes"]:
        host_pid = int(row[1])
        with open(f"/proc/{host_pid}/status") as status:
            nspid = next(line.split()[1:] for line in status if line.startswith("NSpid:"))
        if int(nspid[-1]) == pid_in_container:
            fd_dir = f"/proc/{host_pid}/fd"
            return {int(fd): os.readlink(f"{fd_dir}/{fd}") for fd in os.listdir(fd_dir)}
    raise AssertionError(f"no process {pid_in_container} in the container")


async def test_the_spawner_holds_nothing_of_the_channel(docker_backend, docker_client) -> None:
    """Not the helper's stdin (the runner's requests) nor its stdout: /dev/null
    in their place, and no other descriptor of the helper's but its stderr
    (a command's pipes kept open would hold back that command's end)."""
    if os.geteuid() != 0:
        pytest.fail("reading another user's /proc/<pid>/fd takes root on the host")
    async with await open_session(docker_backend) as session, anyio.create_task_group() as tg:
        box = session.sandbox
        # A root command in flight when the spawner is forked: the helper
        # then holds that command's pipes, which the spawner must not keep.
        tg.start_soon(box.execute_as_root, "sleep 4")
        await anyio.sleep(1)
        spawner = int((await box.execute("echo $PPID")).stdout)
        stat = await box.execute_as_root(f"cat /proc/{spawner}/stat")
        helper = int(stat.stdout.split()[3])
        container = docker_client.containers.get(box.container_id)
        theirs, helpers = host_fds(container, spawner), host_fds(container, helper)
        assert sum(target.startswith("pipe:") for target in helpers.values()) >= 4
    assert theirs[0] == theirs[1] == "/dev/null"
    assert helpers[0] != helpers[1] and "/dev/null" not in (helpers[0], helpers[1])
    shared = set(theirs.values()) & set(helpers.values()) - {"/dev/null", helpers[2]}
    # The one shared: the socket pair between them (the helper's end differs).
    assert not shared, (theirs, helpers)


async def test_a_killed_spawner_costs_only_the_command_in_flight(docker_backend) -> None:
    async with await open_session(docker_backend) as session:
        box = session.sandbox
        first = (await box.execute("echo $PPID")).stdout.strip()
        started = time.monotonic()
        with anyio.fail_after(20):
            killed = await box.execute("kill -KILL $PPID; sleep 3; echo not-seen")
        assert time.monotonic() - started < 3  # answered when the spawner died
        assert killed.exit_code == 126
        assert "may or may not have run" in killed.stderr
        assert "not-seen" not in killed.stdout
        # A new spawner for the next command, and the channel is still up.
        after = await box.execute("echo $PPID; id -u")
        assert after.exit_code == 0
        second, uid = after.stdout.split()
        assert (second != first, uid) == (True, "1000")
        assert box.channel is not None and box.channel.alive


async def test_a_spawner_killed_before_it_took_a_command_costs_nothing(docker_backend) -> None:
    """The sweep after a turn kills every process of the agent's uid, the
    spawner too, and the next command may reach it as it dies (a flake
    under load: "stopped answering").  Here the spawner is stopped, a
    command queued to it, then it is killed: the command runs once, in
    the helper (its parent is root: the path was taken), and succeeds."""
    async with await open_session(docker_backend) as session:
        box = session.sandbox
        spawner = (await box.execute("echo $PPID")).stdout.strip()
        assert (await box.execute_as_root(f"kill -STOP {spawner}")).exit_code == 0
        results = []

        async def queued() -> None:
            command = "echo ran >> /tmp/count; stat -c %u /proc/$PPID"
            results.append(await box.execute(command, timeout_seconds=60))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(queued)
                await anyio.sleep(2)  # the request reaches the stopped spawner
                assert (await box.execute_as_root(f"kill -KILL {spawner}")).exit_code == 0
        [result] = results
        assert (result.exit_code, result.stdout) == (0, "0\n"), result
        assert (await box.execute("wc -l < /tmp/count")).stdout.strip() == "1"
        assert box.channel is not None and box.channel.alive


async def test_a_stopped_spawner_is_answered_after_the_timeout(docker_backend) -> None:
    """SIGSTOP holds the spawner's answer; the helper gives up on it at the
    command's timeout plus its grace (4 s), kills it, and goes on."""
    async with await open_session(docker_backend) as session:
        box = session.sandbox
        started = time.monotonic()
        with anyio.fail_after(30):
            stopped = await box.execute("kill -STOP $PPID; echo ran", timeout_seconds=2)
        took = time.monotonic() - started
        assert 5 < took < 15, (took, stopped)
        assert stopped.exit_code == 126
        assert "stopped answering" in stopped.stderr
        after = await box.execute("echo fine")
        assert (after.exit_code, after.stdout) == (0, "fine\n")
        assert box.channel is not None and box.channel.alive
