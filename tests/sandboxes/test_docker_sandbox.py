"""What only the Docker sandbox does: hardening, labels, images, setup, failures."""

from __future__ import annotations

import contextlib
import os
import socket
import time

import anyio
import pytest
from conftest import SCOPE_LABELS, TEST_IMAGE, lifecycle_until_it_dies

import runner as agents
from runner.sandboxes.docker.environment import (
    EXPIRY_GRACE_SECONDS,
    LABEL_EXPIRES,
    LABEL_OWNER_PID,
    LABEL_SESSION,
    collect_garbage,
)

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def test_containers_are_hardened_and_labelled(docker_backend, docker_client) -> None:
    env = docker_backend.environment(memory="256m", cpus=0.5, pids_limit=64)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = docker_client.api.inspect_container(session.sandbox.container_id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert any(opt.startswith("no-new-privileges") for opt in host["SecurityOpt"])
    assert host["Init"] is True
    assert host["PidsLimit"] == 64
    assert host["Memory"] == 256 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["CapDrop"] == ["ALL"]
    assert set(host["CapAdd"]) == {
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "SETUID",
        "SETGID",
        "KILL",
    }
    assert host["Privileged"] is False
    assert attrs["Mounts"] == []  # no Docker socket, no host path
    assert not host.get("Binds")
    assert host["ReadonlyRootfs"] is False  # package installs in setup_script still work
    labels = attrs["Config"]["Labels"]
    assert labels[LABEL_SESSION] == session.id
    assert labels[LABEL_OWNER_PID] == str(os.getpid())
    assert abs(int(labels[LABEL_EXPIRES]) - (time.time() + 86400)) < 60
    assert attrs["Config"]["WorkingDir"] == "/workspace"


async def test_default_options_limit_cpu_memory_processes_and_capabilities(
    docker_backend, docker_client
) -> None:
    """What a container gets when the file says nothing, read back from the engine
    and from inside: the kernel's view of the capabilities of a command (none:
    it runs as the sandbox user) and of root (the setup script's)."""
    env = docker_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = docker_client.api.inspect_container(session.sandbox.container_id)
        status = await session.sandbox.execute(
            "id -u; id -g; grep -E '^Cap(Eff|Prm)' /proc/self/status"
        )
        root = await session.sandbox.execute_as_root("grep CapEff /proc/self/status")
        mknod = await session.sandbox.execute_as_root("mknod /tmp/dev c 1 3")
    host = attrs["HostConfig"]
    assert host["NanoCpus"] == 2_000_000_000
    assert host["Memory"] == 2 * 1024**3
    assert host["PidsLimit"] == 512
    uid, gid, *caps = status.stdout.split()
    assert (uid, gid) == ("1000", "1000")
    assert dict(zip(caps[::2], caps[1::2], strict=True)) == {
        "CapPrm:": "0" * 16,
        "CapEff:": "0" * 16,
    }
    effective = int(root.stdout.split()[1], 16)
    granted = {
        0: "CHOWN",
        1: "DAC_OVERRIDE",
        3: "FOWNER",
        4: "FSETID",
        5: "KILL",
        6: "SETGID",
        7: "SETUID",
    }
    assert effective == sum(1 << bit for bit in granted)
    assert mknod.exit_code != 0  # MKNOD is not among root's


async def test_no_network_means_no_interface_but_loopback(docker_backend) -> None:
    env = docker_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute("ls /sys/class/net")
    assert result.stdout.split() == ["lo"]


async def test_network_all_uses_the_default_network(docker_backend, docker_client) -> None:
    env = docker_backend.environment(network=agents.Network.all())
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = docker_client.api.inspect_container(session.sandbox.container_id)
    assert attrs["HostConfig"]["NetworkMode"] != "none"


async def test_the_setup_script_runs_before_the_hooks(docker_backend) -> None:
    seen: list[str] = []

    class Reads(agents.SandboxHook):
        async def on_create(self, ctx) -> None:
            seen.append((await ctx.sandbox.read_file("/opt/ready")).decode())

    env = docker_backend.environment(setup_script="echo set-up > /opt/ready", hooks=[Reads()])
    async with await agents.Agent(model="m", environment=env).start_session():
        pass
    assert seen == ["set-up\n"]


async def test_a_failing_setup_script_deletes_the_container_and_fails_the_session(
    docker_backend,
) -> None:
    journal: list[str] = []

    class Hook(agents.SandboxHook):
        async def on_create(self, ctx) -> None:
            journal.append("on_create")

    env = docker_backend.environment(setup_script="echo broken >&2; exit 7", hooks=[Hook()])
    with pytest.raises(agents.SandboxSetupError, match="setup_script exited 7.*broken") as info:
        await agents.Agent(model="m", environment=env).start_session()
    assert info.value.exit_code == 7
    assert journal == []
    assert docker_backend.leftovers() == []


async def test_a_setup_script_timeout_fails_the_session(docker_backend) -> None:
    env = docker_backend.environment(setup_script="sleep 60", setup_script_timeout_seconds=1)
    with pytest.raises(agents.SandboxSetupError, match="setup_script timed out"):
        await agents.Agent(model="m", environment=env).start_session()
    assert docker_backend.leftovers() == []


async def test_a_missing_image_that_cannot_be_pulled_names_the_image(docker_backend) -> None:
    # A registry on a closed loopback port: the pull fails at once, sending nothing out.
    image = "127.0.0.1:9/sandbox-runner/missing:latest"
    env = docker_backend.environment(image=image)
    with pytest.raises(agents.SandboxUnavailableError) as info:
        await agents.Agent(model="m", environment=env).start_session()
    assert repr(image) in str(info.value)
    assert "RUNNER_DOCKER_IMAGE" in str(info.value)
    assert docker_backend.leftovers() == []


async def test_a_container_that_fails_to_start_is_removed(docker_backend, docker_client) -> None:
    """The engine creates the container, then refuses to start it (a tmpfs size
    the kernel rejects): the error names the image and the container is gone."""
    since = int(time.time()) - 1
    env = docker_backend.environment(workspace_size="bogus")
    with pytest.raises(agents.SandboxUnavailableError) as info:
        await agents.Agent(model="m", environment=env).start_session()
    assert f"could not start a container from {TEST_IMAGE!r}" in str(info.value)
    assert docker_backend.leftovers() == []
    events = docker_client.events(
        since=since,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "label": f"{LABEL_OWNER_PID}={os.getpid()}"},
    )
    actions = [e["Action"] for e in events]
    # It was created (the start really failed) and destroyed, not just never made.
    assert "create" in actions and "destroy" in actions, actions


async def _derived_image(docker_client, tag: str, command: str) -> str:
    container = docker_client.containers.run(TEST_IMAGE, command=["sh", "-c", command], detach=True)
    try:
        container.wait()
        repository, _, version = tag.partition(":")
        container.commit(repository=repository, tag=version)
    finally:
        container.remove(force=True)
    return tag


async def test_an_image_without_timeout_is_refused_clearly(docker_backend, docker_client) -> None:
    tag = await _derived_image(
        docker_client, "sandbox-runner-test:no-timeout", "rm /usr/bin/timeout"
    )
    try:
        env = docker_backend.environment(image=tag)
        with pytest.raises(agents.SandboxUnavailableError, match="no 'timeout' command"):
            await agents.Agent(model="m", environment=env).start_session()
    finally:
        docker_client.images.remove(tag, force=True)
    assert docker_backend.leftovers() == []


async def test_a_container_that_exits_at_once_is_a_clear_error(
    docker_backend, docker_client
) -> None:
    tag = await _derived_image(docker_client, "sandbox-runner-test:no-sleep", "rm /usr/bin/sleep")
    try:
        env = docker_backend.environment(image=tag)
        with pytest.raises(agents.SandboxUnavailableError, match="exited right after it started"):
            await agents.Agent(model="m", environment=env).start_session()
    finally:
        docker_client.images.remove(tag, force=True)
    assert docker_backend.leftovers() == []


async def test_concurrent_sessions_each_get_their_own_container(docker_backend) -> None:
    env = docker_backend.environment()
    agent = agents.Agent(model="m", environment=env)
    outputs: dict[int, str] = {}

    async def one(index: int) -> None:
        async with await agent.start_session() as session:
            await session.sandbox.write_file("id.txt", str(index))
            await anyio.sleep(0.1)
            outputs[index] = (await session.sandbox.execute("cat id.txt")).stdout

    async with anyio.create_task_group() as tg:
        for index in range(4):
            tg.start_soon(one, index)
    assert outputs == {i: str(i) for i in range(4)}


async def test_the_container_stops_by_itself_at_its_ttl(docker_backend, docker_client) -> None:
    since = int(time.time()) - 1
    env = docker_backend.environment(ttl_seconds=2)
    session = await agents.Agent(model="m", environment=env).start_session()
    try:
        actions = lifecycle_until_it_dies(
            docker_client, session.sandbox.container_id, since=since, seconds=20
        )
    finally:
        await session.cancel()
    assert "die" in actions, f"still running 20 s after a 2 s TTL: {actions}"
    assert "kill" not in actions, f"it was killed, not stopped by itself: {actions}"


def test_gc_removes_expired_and_orphaned_containers_only(docker_client) -> None:
    base = {
        "sandbox-runner": "1",
        "sandbox-runner.owner-host": socket.gethostname(),
        **SCOPE_LABELS,
    }
    expired = {**base, LABEL_EXPIRES: str(int(time.time()) - 10), LABEL_OWNER_PID: "1"}
    orphan = {**base, LABEL_OWNER_PID: "999999999"}
    alive = {
        **base,
        LABEL_EXPIRES: str(int(time.time()) + 3600),
        LABEL_OWNER_PID: str(os.getpid()),
    }
    created = {
        name: docker_client.containers.create(TEST_IMAGE, command=["true"], labels=labels)
        for name, labels in (("expired", expired), ("orphan", orphan), ("alive", alive))
    }
    try:
        removed = collect_garbage(docker_client)
        assert created["alive"].id not in removed
        # Judged by what is left: another worker's sweep may remove the
        # expired and the orphaned one before this sweep lists them.
        remaining = {c.id for c in docker_client.containers.list(all=True)}
        assert {name for name, c in created.items() if c.id in remaining} == {"alive"}
    finally:
        for container in created.values():
            with contextlib.suppress(Exception):
                container.remove(force=True)


def test_gc_leaves_a_running_container_to_its_own_clock_for_a_grace(docker_client) -> None:
    """A sweep of another runner process must not race a container's clock:
    one that still runs just past its expiry is left to stop by itself (the
    TTL tests saw the race as a ``kill`` under ``pytest -n 2``)."""
    base = {
        "sandbox-runner": "1",
        "sandbox-runner.owner-host": socket.gethostname(),
        LABEL_OWNER_PID: str(os.getpid()),
        **SCOPE_LABELS,
    }
    just_expired = {**base, LABEL_EXPIRES: str(int(time.time()) - 2)}
    long_expired = {**base, LABEL_EXPIRES: str(int(time.time() - EXPIRY_GRACE_SECONDS) - 2)}
    created = {
        "running, just expired": docker_client.containers.run(
            TEST_IMAGE, command=["sleep", "60"], labels=just_expired, detach=True
        ),
        "running, past the grace": docker_client.containers.run(
            TEST_IMAGE, command=["sleep", "60"], labels=long_expired, detach=True
        ),
        "stopped, just expired": docker_client.containers.create(
            TEST_IMAGE, command=["true"], labels=just_expired
        ),
    }
    try:
        collect_garbage(docker_client)
        # Judged by what is left, not by what this sweep returned: under
        # ``pytest -n 2`` the other worker's sweep may remove an expired
        # container first (CI saw exactly that).
        left = {c.id for c in docker_client.containers.list(all=True)}
        assert {name for name, c in created.items() if c.id in left} == {"running, just expired"}
    finally:
        for container in created.values():
            with contextlib.suppress(Exception):
                container.remove(force=True)


async def test_concurrent_deletes_of_one_container_both_succeed(docker_backend) -> None:
    env = docker_backend.environment()
    session = await agents.Agent(model="m", environment=env).start_session()
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(session.sandbox.delete)
    await session.cancel()
    assert docker_backend.leftovers() == []


@pytest.mark.parametrize("channel", [True, False], ids=["channel", "archives"])
async def test_long_names_and_symlinks_through_either_file_path(docker_backend, channel) -> None:
    env = docker_backend.environment(exec_channel=channel)
    name = "deep/" + "n" * 150 + ".txt"
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        await box.write_file(name, "long name")
        await box.execute(f"ln -s {name} link && ln -s /etc/hostname absolute && mkdir adir")
        assert await box.read_file(name) == b"long name"
        assert await box.read_file("link") == b"long name"
        assert (
            await box.read_file("absolute")
            == (await box.execute("cat /etc/hostname")).stdout.encode()
        )
        with pytest.raises(IsADirectoryError):
            await box.read_file("adir")
