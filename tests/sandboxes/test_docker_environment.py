"""The Docker sandbox's defaults and clean-up (``scripts/mutate docker`` mutates them).

Real containers on the local engine: what each option gives a container is
read back from the engine (``inspect``) and from inside it, and every way a
container is removed (discard, durable leftovers, the warm pool's drain) is
checked against the containers that really remain.  A few arithmetic edges of
``container_options`` (the TTL clock's argument) are read from the options
themselves, where waiting for a clock would take seconds per case.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from typing import Any

import anyio
import pytest
from conftest import SCOPE_LABELS, TEST_IMAGE
from docker import errors as docker_errors

import runner as agents
from runner.sandboxes.docker import environment as docker_module
from runner.sandboxes.docker.engine import (
    LABEL,
    LABEL_DURABLE,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SESSION,
    process_start_time,
)
from runner.sandboxes.docker.environment import (
    CHANNEL_DIR,
    LocalDockerSandbox,
    remove_durable_containers,
)

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

CHANNEL_TMPFS = {CHANNEL_DIR: "size=512m,mode=0700"}
#: A tmpfs workspace or HOME is mounted as the hooks' (they run first), and
#: handed to the agent (uid 1000) after the last on_create (``owners``).
USER_OWNED = "uid=1001,gid=1001,mode=0755"


def inspect(docker_client: Any, sandbox: Any) -> dict[str, Any]:
    return docker_client.api.inspect_container(sandbox.container_id)


def ours(docker_client: Any) -> list[str]:
    """The ids of the containers this test process made (all states)."""
    containers = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_OWNER_PID}={os.getpid()}"}
    )
    return sorted(c.id for c in containers)


# --- what a container gets ------------------------------------------------------


async def test_a_default_container_is_root_owned_labelled_and_has_the_helper_tmpfs(
    docker_backend, docker_client
) -> None:
    env = docker_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = inspect(docker_client, session.sandbox)
        home = await session.sandbox.execute("echo $HOME; id -u")
        assert session.sandbox.session_id == session.id
    config, host = attrs["Config"], attrs["HostConfig"]
    assert config["User"] == "0:0"  # the TTL clock and the helper are root's
    assert config["Cmd"][0] == "sleep"
    assert abs(int(config["Cmd"][1]) - 86401) <= 5
    assert "HOME=/home/sandbox" in config["Env"]
    assert home.stdout.split() == ["/home/sandbox", "1000"]
    labels = config["Labels"]
    assert labels[LABEL] == "1"
    assert labels[LABEL_SESSION] == session.id
    assert labels[LABEL_OWNER_HOST] == socket.gethostname()
    start = process_start_time(os.getpid())
    assert start and labels[LABEL_OWNER_START] == start
    assert LABEL_DURABLE not in labels
    assert host["Tmpfs"] == CHANNEL_TMPFS
    assert host["ReadonlyRootfs"] is False


def test_the_ttl_clock_counts_whole_seconds_up_to_the_expiry() -> None:
    env = LocalDockerSandbox(image=TEST_IMAGE)

    def clock(expires_at: float | None) -> list[str]:
        return env.container_options(session_id="s", expires_at=expires_at)["command"]

    assert clock(time.time() + 100.5) == ["sleep", "101"]
    assert clock(time.time() - 30) == ["sleep", "1"]  # already due: the shortest clock
    assert clock(None) == ["sleep", "infinity"]
    assert LABEL_EXPIRES not in env.container_options(session_id="s", expires_at=None)["labels"]


async def test_a_session_without_a_ttl_gets_a_clock_that_never_rings(
    docker_backend, docker_client
) -> None:
    env = docker_backend.environment(ttl_seconds=None)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = inspect(docker_client, session.sandbox)
        alive = await session.sandbox.execute("echo alive")
    assert attrs["Config"]["Cmd"] == ["sleep", "infinity"]
    assert attrs["State"]["Running"] is True
    assert LABEL_EXPIRES not in attrs["Config"]["Labels"]
    assert alive.stdout == "alive\n"


async def test_user_root_gets_root_s_home_and_an_open_tmpfs_workspace(
    docker_backend, docker_client
) -> None:
    env = docker_backend.environment(user="root", workspace_size="64m")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = inspect(docker_client, session.sandbox)
        seen = await session.sandbox.execute("echo $HOME; id -u")
    assert "HOME=/root" in attrs["Config"]["Env"]
    assert attrs["HostConfig"]["Tmpfs"] == {
        **CHANNEL_TMPFS,
        "/workspace": "size=64m,mode=1777,exec",
    }
    assert seen.stdout.split() == ["/root", "0"]


async def test_the_sandbox_user_s_tmpfs_workspace_is_theirs(docker_backend, docker_client) -> None:
    env = docker_backend.environment(workspace_size="64m")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = inspect(docker_client, session.sandbox)
        seen = await session.sandbox.execute("stat -c '%u %g %a' /workspace")
    assert attrs["HostConfig"]["Tmpfs"] == {
        **CHANNEL_TMPFS,
        "/workspace": f"size=64m,{USER_OWNED},exec",
    }
    assert seen.stdout.split() == ["1000", "1000", "755"]


@pytest.mark.parametrize(
    ("options", "home", "workspace"),
    [
        ({}, f"size=256m,{USER_OWNED},exec", f"size=1g,{USER_OWNED},exec"),
        (
            {"workspace_size": "128m"},
            f"size=256m,{USER_OWNED},exec",
            f"size=128m,{USER_OWNED},exec",
        ),
        ({"user": "root"}, "size=256m,mode=1777,exec", "size=1g,mode=1777,exec"),
    ],
    ids=["sandbox", "workspace_size", "root"],
)
async def test_a_read_only_root_has_sized_tmpfs_mounts_where_writes_go(
    docker_backend, docker_client, options, home, workspace
) -> None:
    env = docker_backend.environment(read_only_root=True, **options)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = inspect(docker_client, session.sandbox)
        written = await session.sandbox.execute("echo w > /workspace/f && cat /workspace/f")
    home_dir = "/root" if options.get("user") == "root" else "/home/sandbox"
    assert attrs["HostConfig"]["ReadonlyRootfs"] is True
    assert attrs["HostConfig"]["Tmpfs"] == {
        **CHANNEL_TMPFS,
        "/tmp": "size=256m,mode=1777,exec",
        home_dir: home,
        "/workspace": workspace,
    }
    assert written.stdout == "w\n"


# --- setting the container up -------------------------------------------------------


async def test_the_setup_script_has_its_own_timeout_not_the_commands_one(docker_backend) -> None:
    env = docker_backend.environment(
        default_exec_timeout_seconds=1,
        setup_script="sleep 2 && echo ready > /opt/ready",
        setup_script_timeout_seconds=30,
    )
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        assert await session.sandbox.read_file("/opt/ready") == b"ready\n"


async def test_a_failed_setup_script_names_the_image(docker_backend) -> None:
    env = docker_backend.environment(setup_script="echo nope >&2; exit 3")
    with pytest.raises(agents.SandboxSetupError) as caught:
        await agents.Agent(model="m", environment=env).start_session()
    assert str(caught.value) == f"setup_script exited 3 in image {TEST_IMAGE!r}: nope"
    assert docker_backend.leftovers() == []


class CachedSeed(agents.SandboxHook):
    def __init__(self, key: str) -> None:
        self.key = key

    def cache_key(self) -> str:
        return self.key

    async def on_create(self, ctx) -> None:
        await ctx.sandbox.write_file("seed.txt", self.key)


async def test_a_session_from_a_snapshot_runs_the_snapshot_image(
    docker_backend, docker_client, snapshot_lock
) -> None:
    key = f"mh-{uuid.uuid4().hex}"  # a key no earlier run has a snapshot of
    env = docker_backend.environment(hooks=[CachedSeed(key)])
    agent = agents.Agent(model="m", environment=env)
    events: list[dict[str, Any]] = []
    images: list[str] = []
    try:
        with agents.listen(events.append):
            async with await agent.start_session():
                pass
            images = [e["image_id"] for e in events if e["event"] == "snapshot_saved"]
            assert len(images) == 1
            async with await agent.start_session() as session:
                attrs = inspect(docker_client, session.sandbox)
                seed = await session.sandbox.read_file("seed.txt")
        assert [e["image_id"] for e in events if e["event"] == "snapshot_used"] == images
        assert attrs["Image"] == images[0]
        assert seed == key.encode()
    finally:
        for image in images:
            docker_client.images.remove(image, force=True)


# --- removing containers --------------------------------------------------------------


async def test_discard_removes_only_this_session_s_container(docker_backend, docker_client) -> None:
    env = docker_backend.environment()
    mine = await env.create(session_id="sess-mine", expires_at=time.time() + 600)
    other = await env.create(session_id="sess-other", expires_at=time.time() + 600)
    stranger = docker_client.containers.create(
        TEST_IMAGE,
        command=["true"],
        labels={LABEL_SESSION: "sess-mine", LABEL_OWNER_PID: str(os.getpid())},
    )
    try:
        assert (
            await env.discard({"container_id": other.container_id}, session_id="sess-mine") is False
        )
        assert await env.discard({"container_id": stranger.id}, session_id="sess-mine") is False
        docker_client.api.stop(mine.container_id, timeout=0)  # in whatever state
        assert (
            await env.discard({"container_id": mine.container_id}, session_id="sess-mine") is True
        )
        assert (
            await env.discard({"container_id": mine.container_id}, session_id="sess-mine") is False
        )
        assert ours(docker_client) == sorted([other.container_id, stranger.id])
        # a record's own label (a pooled container's) is the one compared
        label = {"container_id": other.container_id, "label_session_id": "sess-other"}
        assert await env.discard(label, session_id="sess-mine") is True
        assert await env.discard({}, session_id="sess-mine") is False
    finally:
        for sandbox in (mine, other):
            await sandbox.delete()
        stranger.remove(force=True)


async def test_durable_leftovers_are_removed_but_the_kept_and_other_owners_ones(
    docker_backend, docker_client
) -> None:
    owner = f"mh-db-{uuid.uuid4().hex[:8]}"
    env = docker_backend.environment()
    env.durable_owner = owner
    other_env = docker_backend.environment()
    other_env.durable_owner = owner + "-other"
    kept = await env.create(session_id="sess-kept", expires_at=time.time() + 600)
    gone = [await env.create(session_id=f"sess-{n}", expires_at=None) for n in range(2)]
    other = await other_env.create(session_id="sess-x", expires_at=None)
    try:
        labels = inspect(docker_client, kept)["Config"]["Labels"]
        assert labels[LABEL_DURABLE] == owner
        docker_client.api.stop(gone[1].container_id, timeout=0)  # stopped ones go too
        removed = await remove_durable_containers(owner, keep=[kept.container_id])
        assert sorted(removed) == sorted(s.container_id for s in gone)
        assert ours(docker_client) == sorted([kept.container_id, other.container_id])
        assert await remove_durable_containers(owner, keep={kept.container_id}) == []
    finally:
        for sandbox in (kept, *gone, other):
            await sandbox.delete()


async def test_durable_leftovers_of_named_sessions_only_when_servers_share_a_database(
    docker_backend, docker_client
) -> None:
    """runner serve on PostgreSQL: a server taking sessions over removes only
    those sessions' unrecorded containers, never another server's."""
    owner = f"mh-db-{uuid.uuid4().hex[:8]}"
    env = docker_backend.environment()
    env.durable_owner = owner
    taken = [await env.create(session_id=f"sess-taken-{n}", expires_at=None) for n in range(2)]
    recorded = await env.create(session_id="sess-taken-2", expires_at=None)
    theirs = await env.create(session_id="sess-theirs", expires_at=None)
    try:
        removed = await remove_durable_containers(
            owner,
            keep=[recorded.container_id],
            sessions={"sess-taken-0", "sess-taken-1", "sess-taken-2"},
        )
        assert sorted(removed) == sorted(s.container_id for s in taken)
        assert ours(docker_client) == sorted([recorded.container_id, theirs.container_id])
        assert await remove_durable_containers(owner, keep=[], sessions=set()) == []
        assert len(ours(docker_client)) == 2
    finally:
        for sandbox in (*taken, recorded, theirs):
            await sandbox.delete()


async def test_durable_leftovers_on_an_unreachable_engine_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(agents.SandboxUnavailableError) as caught:
        await remove_durable_containers("db-1", docker_host=f"unix://{tmp_path}/no-docker.sock")
    assert str(caught.value).startswith("could not list the durable containers of db-1: ")
    assert "not reachable" in str(caught.value)


async def test_closing_the_pool_removes_its_idle_containers(
    docker_backend, docker_client, caplog
) -> None:
    env = docker_backend.environment(pool_size=1)
    with caplog.at_level("WARNING", logger="runner"):
        try:
            assert await env.wait_pool_ready(timeout=120) is True
            assert env._pool is not None
            ((_, pooled),) = list(env._pool._ready)
            assert pooled.channel is not None and pooled.channel.alive
            labels = inspect(docker_client, pooled)["Config"]["Labels"]
            assert labels[LABEL_SESSION].startswith("pool-")
            assert ours(docker_client) == [pooled.container_id]
        finally:
            env.close_pool()
    assert env._pool is None
    assert ours(docker_client) == []
    # Its exec channel was closed before the container went (not cut by the removal).
    assert pooled.channel is not None and pooled.channel._dead == "closed"
    assert caplog.records == []  # no discard failed
    env.close_pool()  # twice is fine


async def test_a_start_cancelled_during_setup_leaves_no_container(
    docker_backend, docker_client
) -> None:
    env = docker_backend.environment(setup_script="sleep 30")
    with anyio.move_on_after(3) as scope:
        await agents.Agent(model="m", environment=env).start_session()
    assert scope.cancelled_caught
    assert ours(docker_client) == []


async def test_the_first_session_of_an_environment_sweeps_garbage(
    docker_backend, docker_client, monkeypatch
) -> None:
    """Its own sweep, seen through a spy around the real ``collect_garbage``:
    the container being gone is not proof enough, since any other runner's
    first session (another mutant, when ``scripts/mutate`` runs two at once)
    sweeps the same garbage."""
    sweeps: list[list[str]] = []

    def spy(client: Any) -> list[str]:
        sweeps.append(real(client))
        return sweeps[-1]

    real = docker_module.collect_garbage
    monkeypatch.setattr(docker_module, "collect_garbage", spy)
    garbage = docker_client.containers.create(
        TEST_IMAGE,
        command=["true"],
        labels={
            LABEL: "1",
            LABEL_OWNER_HOST: socket.gethostname(),
            LABEL_OWNER_PID: "1",
            LABEL_EXPIRES: str(int(time.time()) - 60),
            **SCOPE_LABELS,
        },
    )
    try:
        env = docker_backend.environment()
        agent = agents.Agent(model="m", environment=env)
        async with await agent.start_session():
            remaining = {c.id for c in docker_client.containers.list(all=True)}
        assert garbage.id not in remaining
        assert len(sweeps) == 1, "the first session did not sweep"
        async with await agent.start_session():
            pass
        assert len(sweeps) == 1, "a later session of the same environment swept again"
    finally:
        with contextlib.suppress(docker_errors.NotFound):
            garbage.remove(force=True)


# --- the options themselves -----------------------------------------------------------------


def test_the_defaults_are_the_documented_ones(monkeypatch) -> None:
    monkeypatch.delenv("RUNNER_DOCKER_IMAGE", raising=False)
    env = LocalDockerSandbox()
    assert env.image == "python:3.12-bookworm"
    assert (env.network.mode, env.user, env.exec_channel) == ("none", "sandbox", "auto")
    assert env.default_exec_timeout_seconds == 30
    assert env.ttl_seconds == 86400
    assert env.setup_script_timeout_seconds == 300
    assert (env.memory, env.cpus, env.pids_limit) == ("2g", 2.0, 512)
    assert (env.output_cap_bytes, env.max_file_bytes) == (8 << 20, 1 << 30)
    assert (env.pool_size, env.workspace_size, env.read_only_root) == (0, None, False)
    assert (env.shell, env.env, env.setup_script, env.durable_owner) == (None, {}, None, None)


def test_options_given_are_kept() -> None:
    env = LocalDockerSandbox(
        image=TEST_IMAGE,
        default_exec_timeout_seconds=5,
        ttl_seconds=60,
        cpus=None,
        pids_limit=16,
        shell="sh",
        env={"FOO": "bar"},
        exec_channel="shell",
        pool_size=1,
    )
    assert env.default_exec_timeout_seconds == 5
    assert env.ttl_seconds == 60
    assert (env.cpus, env.pids_limit, env.shell) == (None, 16, "sh")
    assert env.env == {"FOO": "bar"}
    assert env.exec_channel == "shell"
    assert env.pool_size == 1
    assert LocalDockerSandbox(image=TEST_IMAGE, exec_channel=False).exec_channel is False
    options = env.container_options(session_id="s", expires_at=None)
    assert "nano_cpus" not in options
    assert options["pids_limit"] == 16
    assert options["environment"] == {"HOME": "/home/sandbox", "FOO": "bar"}


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"network": "none"}, TypeError, "network= takes a Network, got 'none'"),
        (
            {"network": agents.Network.allow(hosts=["pypi.org"])},
            ValueError,
            "LocalDockerSandbox cannot enforce Network.allow(['pypi.org']): Docker has no "
            "per-host egress filter; use Network.none() (the default) or Network.all()",
        ),
        (
            {"setup_script_timeout_seconds": 0},
            ValueError,
            "setup_script_timeout_seconds must be a positive number of seconds, got 0",
        ),
        ({"cpus": 0}, ValueError, "cpus must be a positive number, got 0"),
        ({"cpus": -1.5}, ValueError, "cpus must be a positive number, got -1.5"),
        ({"cpus": True}, ValueError, "cpus must be a positive number, got True"),
        ({"pids_limit": 15}, ValueError, "pids_limit must be an int of at least 16, got 15"),
        ({"pids_limit": "64"}, ValueError, "pids_limit must be an int of at least 16, got '64'"),
        ({"pids_limit": True}, ValueError, "pids_limit must be an int of at least 16, got True"),
        ({"max_file_bytes": "1g"}, ValueError, "max_file_bytes must be an int, got '1g'"),
        ({"max_file_bytes": True}, ValueError, "max_file_bytes must be an int, got True"),
        ({"pool_size": -1}, ValueError, "pool_size must be an int >= 0, got -1"),
        ({"pool_size": "2"}, ValueError, "pool_size must be an int >= 0, got '2'"),
        ({"pool_size": True}, ValueError, "pool_size must be an int >= 0, got True"),
        ({"user": "nobody"}, ValueError, "user must be one of sandbox, root, got 'nobody'"),
        ({"read_only_root": "yes"}, ValueError, "read_only_root must be a bool, got 'yes'"),
        (
            {"exec_channel": "sometimes"},
            ValueError,
            "exec_channel must be True, False, 'auto', 'python' or 'shell', got 'sometimes'",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 30 else None,
)
def test_wrong_options_are_refused_saying_why(options, error, message) -> None:
    with pytest.raises(error) as caught:
        LocalDockerSandbox(image=TEST_IMAGE, **options)
    assert str(caught.value) == message


async def test_the_shell_and_env_given_reach_the_commands(docker_backend, docker_client) -> None:
    env = docker_backend.environment(shell="sh", env={"FOO": "bar baz"})
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        attrs = inspect(docker_client, session.sandbox)
        seen = await session.sandbox.execute('echo "$FOO|${BASH_VERSION:-no bash}"')
    assert "FOO=bar baz" in attrs["Config"]["Env"]
    assert seen.stdout == "bar baz|no bash\n"


async def test_without_a_shell_given_the_image_s_bash_is_found_and_used(docker_backend) -> None:
    env = docker_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        seen = await session.sandbox.execute('echo "${BASH_VERSION:+bash}"')
        assert session.sandbox.shell == "bash"
    assert seen.stdout == "bash\n"
