"""Stronger isolation as options (issue 26, item 6): ``runtime:`` (gVisor's
``runsc``) and ``seccomp: strict``, tried for real.

``scripts/docker-up`` installs Debian's ``runsc`` and registers it with the
test engine as the runtime ``runsc`` (ptrace platform, no network stack);
the hostile agent's attacks below run under it on the test images.  The
strict seccomp profile is probed with the raw system calls it denies.
"""

from __future__ import annotations

import os
import subprocess
import textwrap

import anyio
import pytest
from conftest import RUNNER_CLI, TEST_IMAGE, on_userns

import runner as agents
from runner.config import load, validate_file
from runner.sandboxes.docker.environment import LABEL_OWNER_PID, LocalDockerSandbox
from runner.sandboxes.docker.seccomp import STRICT_DENIED, strict_profile

#: Each call the strict profile denies, made raw (ctypes), and sockets by
#: family: "NAME ERRNO" a line (0: it worked).
PROBE = r"""python3 - <<'EOF'
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(number, *args):
    return 0 if libc.syscall(number, *args) >= 0 else ctypes.get_errno()
print("io_uring_setup", call(425, 1, 0))
print("inotify_init1", call(294, 0))
print("ptrace", call(101, 0, 0, 0, 0))
print("mq_open", call(240, b"/q", 0o100, 0o600, 0))
for family, kind in ((1, 1), (2, 1), (10, 1), (38, 5)):
    try:
        socket.socket(family, kind).close()
        print("socket%d" % family, 0)
    except OSError as error:
        print("socket%d" % family, error.errno)
EOF"""

EPERM = "1"


def probe(stdout: str) -> dict[str, str]:
    return dict(line.split() for line in stdout.splitlines())


def runsc_registered(docker_client) -> bool:
    return "runsc" in (docker_client.info().get("Runtimes") or {})


@pytest.fixture
def runsc(docker_client) -> str:
    if not runsc_registered(docker_client):  # optional, even under CI: gVisor may be missing
        pytest.skip(
            "the engine has no runsc runtime: scripts/docker-up installs Debian's runsc and "
            "registers it when it starts the engine"
        )
    return "runsc"


def test_the_options_are_checked_before_anything_starts(tmp_path) -> None:
    with pytest.raises(ValueError, match="seccomp must be one of default, strict"):
        LocalDockerSandbox(seccomp="tight")
    with pytest.raises(ValueError, match="runtime must be"):
        LocalDockerSandbox(runtime=" ")
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              model: m
              environment: {sandbox: docker, runtime: runsc, seccomp: strict}
            """
        )
    )
    assert validate_file(config) == []
    agent = load(config)
    assert (agent.environment.runtime, agent.environment.seccomp) == ("runsc", "strict")
    config.write_text(config.read_text().replace("seccomp: strict", "seccomp: tight"))
    (problem,) = validate_file(config)
    assert "seccomp" in str(problem) and "agent.yaml:4" in str(problem), problem


def test_the_strict_profile_is_dockers_default_without_the_denied_calls() -> None:
    import json

    from runner.sandboxes.docker.seccomp import docker_default

    strict = json.loads(strict_profile())
    allowed = {n for rule in strict["syscalls"] for n in rule["names"] if "args" not in rule}
    assert not allowed & STRICT_DENIED
    default = {n for rule in docker_default()["syscalls"] for n in rule["names"]}
    assert default - STRICT_DENIED <= {n for rule in strict["syscalls"] for n in rule["names"]}
    families = sorted(r["args"][0]["value"] for r in strict["syscalls"] if r["names"] == ["socket"])
    assert families == [1, 2, 10, 16]


@pytest.mark.docker
@pytest.mark.anyio
@pytest.mark.parametrize("seccomp", ["default", "strict"])
async def test_strict_seccomp_denies_what_agents_never_need(
    docker_backend, seccomp, inotify_lock
) -> None:
    """The agent's raw calls: under ``strict`` each one fails with EPERM
    while unix and internet sockets still open; under Docker's default the
    same calls get past seccomp (io_uring_setup fails on its bad arguments,
    inotify and AF_ALG work)."""
    env = docker_backend.environment(seccomp=seccomp)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute(PROBE)
    assert result.exit_code == 0, result.stderr
    found = probe(result.stdout)
    assert found["socket1"] == found["socket2"] == "0", found
    denied = ("io_uring_setup", "inotify_init1", "ptrace", "mq_open", "socket38")
    if seccomp == "strict":
        assert {name: found[name] for name in denied} == dict.fromkeys(denied, EPERM)
    else:
        assert found["io_uring_setup"] != EPERM and found["inotify_init1"] == "0", found
        assert found["socket38"] != EPERM and found["ptrace"] == "0", found


@pytest.mark.docker
@pytest.mark.anyio
async def test_an_unknown_runtime_is_a_clear_error_and_leaves_nothing(docker_backend) -> None:
    env = docker_backend.environment(runtime="no-such-runtime")
    with pytest.raises(agents.SandboxUnavailableError, match="no-such-runtime"):
        await agents.Agent(model="m", environment=env).start_session()
    assert docker_backend.leftovers() == []


#: The agent's attacks, under gVisor: a loop that steals a hook's secret from
#: /proc, a stop loop against the per-command path, a fork bomb, the network.
LOOT_LOOP = (
    "(while :; do cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep SECRET >> loot;"
    " sleep 0.05; done) >/dev/null 2>&1 & echo started"
)


class CarriesASecret(agents.SandboxHook):
    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        await ctx.sandbox.execute("sleep 1", env={"SECRET": "s3cr3t-4711"})
        self.loot = await ctx.sandbox.read_file("loot")


@pytest.mark.docker
@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["full", "busybox"])
async def test_the_hostile_agent_is_contained_under_runsc(
    docker_backend, image_tags, runsc, kind
) -> None:
    hook = CarriesASecret()
    env = docker_backend.environment(image=image_tags[kind], runtime=runsc, hooks=[hook])
    with anyio.fail_after(180):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            # (gVisor's 2022 build lets uid 1000 read root's /proc/PID/environ,
            # which runc refuses: SECURITY.md says so; the kill before
            # on_destroy is what keeps the hook's secret from the loop below.)
            assert (await box.execute("id -u")).stdout == "1000\n"
            assert (await box.execute(LOOT_LOOP)).stdout == "started\n"
            offline = await box.execute("wget -q -T 2 -O- http://192.0.2.1/ || echo offline")
            assert offline.stdout.strip().endswith("offline"), offline
            assert (await box.execute("echo still-usable")).stdout == "still-usable\n"
    assert b"s3cr3t" not in hook.loot, "the agent's loop read the on_destroy secret"
    assert docker_backend.leftovers() == []


@pytest.mark.docker
@pytest.mark.anyio
@pytest.mark.parametrize("docker_on_every_image", on_userns("full", "busybox"), indirect=True)
async def test_the_hostile_agent_is_contained_under_userns_remap(docker_on_every_image) -> None:
    """The same attacks on the remapped engine (``scripts/docker-userns-up``),
    and the stop-everything attack on root's helper and the TTL clock: the
    agent is uid 1000 inside (host uid 101000), stops only its own
    processes, the helper still answers and the clock still ticks, the
    network is absent, and the kill before ``on_destroy`` keeps the hook's
    secret from the loop."""
    from test_privilege_separation import STOP_EVERYTHING, TTL_STATE

    backend = docker_on_every_image
    hook = CarriesASecret()
    env = backend.environment(hooks=[hook])
    with anyio.fail_after(180):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            assert (await box.execute("id -u")).stdout == "1000\n"
            stopped = (await box.execute(STOP_EVERYTHING)).stdout.split()
            owners = await box.execute_as_root(
                "".join(f"stat -c %u /proc/{p} 2>/dev/null; " for p in stopped) or "true"
            )
            killed = await box.execute("kill -KILL 1 && echo killed-init")
            clock = await box.execute_as_root(TTL_STATE)
            assert (await box.execute(LOOT_LOOP)).stdout == "started\n"
            offline = await box.execute("wget -q -T 2 -O- http://192.0.2.1/ || echo offline")
            assert offline.stdout.strip().endswith("offline"), offline
            assert (await box.execute("echo still-usable")).stdout == "still-usable\n"
            if backend.image == TEST_IMAGE:
                assert box.channel is not None and box.channel.alive
    assert set(owners.stdout.split()) <= {"1000"}, owners
    assert "killed-init" not in killed.stdout
    assert clock.stdout.split() == ["S"], clock
    assert b"s3cr3t" not in hook.loot, "the agent's loop read the on_destroy secret"
    assert backend.leftovers() == []


@pytest.mark.docker
def test_runner_run_uses_the_runtime_from_the_file(tmp_path, docker_client, runsc) -> None:
    """Through the installed CLI: the container of a ``runtime: runsc`` file
    runs gVisor's kernel (its boot log says so), and nothing is left."""
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              model: m
              environment:
                sandbox: docker
                runtime: runsc
                seccomp: strict
                hooks:
                  - name: kernel
                    on_create:
                      - run: dmesg 2>/dev/null | head -n 1 > kernel.txt; uname -r >> kernel.txt
                    on_destroy:
                      - save: kernel.txt
                        to: kernel.txt
            """
        )
    )
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", str(config), "--output-dir", "out"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path), "RUNNER_DOCKER_IMAGE": TEST_IMAGE},
    )
    try:
        _, stderr = process.communicate(timeout=180)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    left = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_OWNER_PID}={process.pid}"}
    )
    assert left == []
    kernel = (tmp_path / "out" / "kernel.txt").read_text()
    assert "gVisor" in kernel, kernel


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_fork_bomb_under_runsc_ends_the_sandbox_not_the_host(docker_backend, runsc) -> None:
    """Under runc the pids limit holds and the sandbox survives a fork bomb
    (``tests/sandboxes/test_faults.py``).  Under gVisor on the ptrace platform the bomb
    takes gVisor's own sandbox down instead: the command fails, later ones
    fail with a typed error, the close deletes the container, and the host
    (this test, the engine) is unharmed.  SECURITY.md says so."""
    env = docker_backend.environment(runtime=runsc)
    with anyio.fail_after(180):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            bomb = await box.execute("b() { b | b & }; b", timeout_seconds=5)
            assert bomb.exit_code != 0 or bomb.timed_out
            try:
                after = await box.execute("echo alive", timeout_seconds=5)
            except agents.SandboxUnavailableError:
                after = None
            assert after is None or after.stdout in ("alive\n", ""), after
    assert docker_backend.leftovers() == []
    assert docker_backend.docker_client.ping()
