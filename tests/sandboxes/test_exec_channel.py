"""The Docker sandbox's persistent exec channel: one helper process per container.

Most tests run on the three test images (``docker_on_every_image``: full,
python3-minimal, busybox): the Python helper serves the first two, the shell
helper the third."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from typing import Any

import anyio
import pytest
from conftest import TEST_IMAGE

import runner as agents

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def test_commands_run_under_the_helper(docker_on_every_image) -> None:
    env = docker_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        channel = session.sandbox.channel
        assert channel is not None
        result = await session.sandbox.execute(
            "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; grep ^Uid /proc/$PPID/status; id -u"
        )
    lines = result.stdout.splitlines()  # the helper's source spans lines
    started_by, uid, own_uid = lines[0], lines[-2], lines[-1]
    # Out of the commands' reach: the helper (or what starts them) is root,
    # or has the commands' uid and is sealed (not dumpable).
    if channel.kind == "python":
        assert channel.sealed
        assert started_by.startswith("python3 -u -c")
    else:  # a shell cannot seal itself: it stays root, and commands do not
        assert started_by.startswith("sh -c # The exec helper for images without")
        assert uid.split() == ["Uid:", "0", "0", "0", "0"]
    assert own_uid == "1000"


async def test_concurrent_commands_on_one_sandbox_do_not_wait_for_each_other(
    docker_on_every_image,
) -> None:
    env = docker_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        results: dict[str, agents.SandboxExecutionResult] = {}

        async def waiter() -> None:
            results["waiter"] = await box.execute(
                "while [ ! -f go ]; do sleep 0.05; done; echo released", timeout_seconds=20
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.3)
            results["releaser"] = await box.execute("touch go; echo touched")
    assert results["releaser"].stdout == "touched\n"
    assert (results["waiter"].exit_code, results["waiter"].stdout) == (0, "released\n")


async def test_huge_output_is_capped_and_the_cap_reported(docker_on_every_image) -> None:
    env = docker_on_every_image.environment(output_cap_bytes=1 << 20)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute(
            "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo END"
        )
    assert result.exit_code == 0
    assert result.output_truncated is True
    assert len(result.stdout) < (1 << 20) + 100
    assert result.stdout.startswith("aaaa")
    assert result.stdout.endswith("\nEND\n")
    assert "bytes omitted ...]" in result.stdout


async def test_without_python3_the_shell_helper_serves_commands(
    docker_backend, docker_client
) -> None:
    """No python3: the shell helper; without setpriv and nsenter as well, it
    cannot become the sandbox user, so one docker exec per command, and the
    event says why."""
    container = docker_client.containers.run(
        TEST_IMAGE, ["sh", "-c", "rm -f /usr/bin/python3*"], detach=True
    )
    container.wait()
    container.commit(repository="sandbox-runner-test", tag="no-python")
    container.remove(force=True)
    container = docker_client.containers.run(
        "sandbox-runner-test:no-python",
        ["sh", "-c", "rm -f /usr/bin/setpriv /usr/bin/nsenter"],
        detach=True,
    )
    container.wait()
    container.commit(repository="sandbox-runner-test", tag="no-python-no-setpriv")
    container.remove(force=True)
    results: dict[str, Any] = {}
    events: dict[str, list[dict]] = {"no-python": [], "no-python-no-setpriv": []}
    try:
        for tag, seen in events.items():
            env = docker_backend.environment(image=f"sandbox-runner-test:{tag}")
            with agents.listen(seen.append):
                async with await agents.Agent(model="m", environment=env).start_session() as s:
                    results[tag] = (
                        s.sandbox.channel and s.sandbox.channel.kind,
                        (await s.sandbox.execute("id -u; echo still works")).stdout,
                    )
                    await s.sandbox.write_file("f.txt", "x")
                    assert await s.sandbox.read_file("f.txt") == b"x"
    finally:
        for tag in events:
            docker_client.images.remove(f"sandbox-runner-test:{tag}", force=True)
    assert results == {
        "no-python": ("shell", "1000\nstill works\n"),
        "no-python-no-setpriv": (None, "1000\nstill works\n"),
    }
    started = [e for e in events["no-python"] if e["event"].startswith("exec_channel")]
    assert [(e["event"], e["channel"]) for e in started] == [("exec_channel_started", "shell")]
    fallback = [e for e in events["no-python-no-setpriv"] if e["event"].startswith("exec_channel")]
    assert [e["event"] for e in fallback] == ["exec_channel_unavailable"]
    assert "neither setpriv nor nsenter" in fallback[0]["reason"]


async def test_a_dead_helper_is_reported_and_later_commands_still_run(
    docker_on_every_image, monkeypatch
) -> None:
    """Only root can kill the helper (a ``user: root`` sandbox's commands, or
    the setup script); whatever kills it, the sandbox carries on.

    The Python helper is the command's parent: its stream ends at once.  The
    shell helper runs each request in a subshell of its own: killed, it
    never answers, and the request is declared lost once its timeout and
    the grace for an answer have passed (the grace is cut here to 2 s)."""
    from runner.sandboxes.docker import commands

    monkeypatch.setattr(commands, "ANSWER_GRACE_SECONDS", 2.0)
    events: list[dict] = []
    env = docker_on_every_image.environment(user="root")
    with agents.listen(events.append):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            with anyio.fail_after(30):
                lost = await box.execute("kill -9 $PPID; sleep 5", timeout_seconds=3)
            assert lost.exit_code == 255
            assert "exec channel was lost during this command" in lost.stderr
            assert box.channel is None
            after = await box.execute("echo after")
            await box.write_file("g.txt", "y")
            assert await box.read_file("g.txt") == b"y"
    assert after.stdout == "after\n"
    assert [e["event"] for e in events].count("exec_channel_lost") == 1


async def test_the_channel_can_be_turned_off(docker_on_every_image) -> None:
    env = docker_on_every_image.environment(exec_channel=False)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        assert session.sandbox.channel is None
        result = await session.sandbox.execute("tr '\\0' ' ' < /proc/$PPID/cmdline")
    assert "python3" not in result.stdout


async def test_a_warm_pool_hands_each_container_to_one_session(
    docker_on_every_image, docker_client
) -> None:
    env = docker_on_every_image.environment(pool_size=2)
    try:
        assert await env.wait_pool_ready(timeout=60)
        pooled = set(docker_on_every_image.leftovers())
        assert len(pooled) == 2
        agent = agents.Agent(model="m", environment=env)
        used = []
        for _ in range(3):
            async with await agent.start_session() as session:
                used.append(session.sandbox.container_id)
                assert session.sandbox.channel is not None
                assert (await session.sandbox.execute("echo ok")).stdout == "ok\n"
            assert docker_client.containers.list(all=True, filters={"id": used[-1]}) == []
        assert len(set(used)) == 3
        assert set(used[:1]) <= pooled  # the first session took a waiting container
        labels = docker_client.api.inspect_container(
            sorted(set(docker_on_every_image.leftovers()))[0]
        )
        assert labels["Config"]["Labels"]["sandbox-runner"] == "1"
        assert labels["HostConfig"]["NetworkMode"] == "none"
    finally:
        env.close_pool()
    assert docker_on_every_image.leftovers() == []


def test_yaml_pool_maps_to_pool_size(tmp_path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: docker\n    pool: 3\n"
    )
    assert agents.load(path).environment.pool_size == 3


async def test_big_files_round_trip_exactly(docker_on_every_image) -> None:
    payload = os.urandom(10 << 20)
    env = docker_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        await session.sandbox.write_file("big/blob.bin", payload)
        assert await session.sandbox.read_file("big/blob.bin") == payload
        size = await session.sandbox.execute("stat -c %s big/blob.bin")
    assert size.stdout.strip() == str(len(payload))


@pytest.mark.parametrize("channel", [True, False], ids=["channel", "per-command"])
async def test_reading_a_big_file_holds_it_once_and_saving_it_holds_a_piece(
    docker_backend, channel, tmp_path
) -> None:
    """Peak memory, traced (tracemalloc sees every bytes object of every
    thread): ``read_file`` of 48 MiB holds the file once, not its pieces and
    their join; ``save_file`` holds about one 16 MiB piece, not the file."""
    size = 48 << 20
    env = docker_backend.environment(exec_channel=channel)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        made = await box.execute(f"head -c {size} /dev/urandom > big.bin")
        assert made.exit_code == 0, made.stderr
        await box.read_file("big.bin")  # warm: the first read starts what later ones reuse
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            data = await box.read_file("big.bin")
            read_peak = tracemalloc.get_traced_memory()[1] - baseline
            digest = hashlib.sha256(data).hexdigest()
            del data
            tracemalloc.reset_peak()
            baseline = tracemalloc.get_traced_memory()[0]
            saved = await box.save_file("big.bin", tmp_path / "big.bin")
            save_peak = tracemalloc.get_traced_memory()[1] - baseline
        finally:
            tracemalloc.stop()
        remote = (await box.execute("sha256sum big.bin")).stdout.split()[0]
    assert digest == remote and saved == size
    assert hashlib.sha256((tmp_path / "big.bin").read_bytes()).hexdigest() == remote
    assert read_peak <= 1.1 * size, f"read_file peaked at {read_peak / size:.2f}x the file"
    assert save_peak <= 0.6 * size, f"save_file peaked at {save_peak / size:.2f}x the file"


async def test_a_process_that_keeps_the_pipes_open_cannot_hang_a_command(
    docker_on_every_image,
) -> None:
    env = docker_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        kind = session.sandbox.channel.kind
        with anyio.fail_after(20):
            result = await session.sandbox.execute("setsid sleep 60 & echo hi", timeout_seconds=2)
        assert result.timed_out  # it held our pipes past the timeout
        if kind == "python":
            assert result.stdout == "hi\n"  # what had arrived
        else:
            # Known gap (README, "Status"): the shell helper's dd holds up to
            # 64 KiB of output until its block is full, and that is lost
            # when the reader is killed because a process that left the
            # command's group still holds the pipe.
            assert result.stdout == ""
        with anyio.fail_after(20), pytest.raises(OSError, match="not a regular file"):
            await session.sandbox.execute("mkfifo pipe")
            await session.sandbox.read_file("pipe")


async def test_a_cancelled_command_leaves_the_channel_whole(docker_on_every_image) -> None:
    """Commands are awaited on the event loop (``request_async``; the shell
    helper's in a worker thread): a cancelled wait must not end the channel
    when its answer comes later (an answer to a request nobody waits for
    would otherwise look forged)."""
    env = docker_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        channel = box.channel
        assert channel is not None  # awaited in a worker thread for the shell helper
        with anyio.move_on_after(0.2) as scope:
            await box.execute("sleep 0.6; echo late > late.txt")
        assert scope.cancelled_caught
        # The answer arrives meanwhile, to nobody; the channel stays up.
        await anyio.sleep(1.0)
        assert (await box.read_file("late.txt")) == b"late\n"
        result = await box.execute("echo still here")
        assert result.stdout == "still here\n"
        assert box.channel is channel and channel.alive
        assert channel._pending == {}  # the abandoned request is forgotten


async def test_a_command_runs_while_a_large_file_is_being_written(docker_on_every_image) -> None:
    """A command sent while another request holds the helper's stream (a 64 MB
    upload) waits its turn in a worker thread, and both arrive whole."""
    env = docker_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        data = os.urandom(1 << 20) * 64
        results: dict[str, Any] = {}

        async def upload() -> None:
            await box.write_file("big.bin", data)
            results["size"] = (await box.execute("wc -c < big.bin")).stdout.strip()

        async with anyio.create_task_group() as tg:
            tg.start_soon(upload)
            await anyio.sleep(0.05)
            for n in range(5):
                results[n] = (await box.execute(f"echo {n}")).stdout
        assert box.channel is not None and box.channel.alive
    assert [results[n] for n in range(5)] == [f"{n}\n" for n in range(5)]
    assert results["size"] == str(len(data))
