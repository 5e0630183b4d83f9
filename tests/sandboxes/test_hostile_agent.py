"""A hostile agent inside the sandbox cannot make the runner outlive its deadlines.

Each test plays the agent with ordinary commands and checks that ``execute``, the close of a session and ``runner run``
end within their deadlines and leave no container.  Time limits are asserted
around the calls (``anyio.fail_after``) so a regression fails, not hangs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import anyio
import pytest
from conftest import ENGINES, RUNNER_CLI, TEST_IMAGE

import runner as agents
from runner.sandboxes.docker.environment import HOST_GRACE_SECONDS, LABEL_OWNER_PID

#: Replaces the container's GNU timeout by one that never times anything out.
FAKE_TIMEOUT = (
    "t=$(command -v timeout) && printf '#!/bin/sh\\nshift 3\\nexec \"$@\"\\n' > $t.new"
    " && chmod +x $t.new && mv -f $t.new $t && head -c 9 $t"
)


@pytest.fixture(params=["sandbox", "root"])
async def fallback_box(docker_backend, request):
    """A container whose commands go one ``docker exec`` each (no helper), as on
    an image without python3, for either ``user``."""
    env = docker_backend.environment(exec_channel=False, user=request.param)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        yield session.sandbox


@pytest.fixture
async def root_fallback_box(docker_backend):
    """The same for ``user: root``, where the agent can also replace the image's files."""
    env = docker_backend.environment(exec_channel=False, user="root")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        yield session.sandbox


@pytest.mark.docker
@pytest.mark.anyio
@pytest.mark.parametrize("docker_backend", ENGINES, indirect=True)
async def test_a_stopped_in_container_timeout_cannot_hang_a_command(fallback_box) -> None:
    """The command stops the ``timeout`` that wraps it (its parent) and
    sleeps.  Under ``user: root`` it can: only the host's deadline ends the
    wait.  As the sandbox user it no longer can: the per-command path runs
    ``timeout`` as root and drops below it (issue 26), so the kill is
    refused and ``timeout`` ends the command itself.  On the main engine
    and on the remapped one (``userns``)."""
    started = time.monotonic()
    with anyio.fail_after(2 + HOST_GRACE_SECONDS + 20):
        result = await fallback_box.execute("kill -STOP $PPID; sleep 600", timeout_seconds=2)
    assert result.exit_code == 124 and result.timed_out
    if fallback_box.user == "root":
        assert "outlived its 2 s timeout" in result.stderr
    else:
        assert "outlived" not in result.stderr, result.stderr
    assert time.monotonic() - started < 2 + HOST_GRACE_SECONDS + 10
    assert (await fallback_box.execute("echo still-usable")).stdout == "still-usable\n"


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_replaced_timeout_binary_cannot_hang_later_commands(root_fallback_box) -> None:
    """Only as root (``test_privilege_separation.py`` shows the sandbox user cannot)."""
    replaced = await root_fallback_box.execute(FAKE_TIMEOUT)
    assert replaced.stdout == "#!/bin/sh", replaced  # the timeout binary is the fake now
    with anyio.fail_after(2 + HOST_GRACE_SECONDS + 20):
        result = await root_fallback_box.execute("sleep 600", timeout_seconds=2)
    assert result.exit_code == 124 and result.timed_out


class SleepsForever(agents.SandboxHook):
    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        await anyio.sleep_forever()


@pytest.mark.anyio
async def test_a_hook_that_never_returns_cannot_hold_the_close(backend) -> None:
    env = backend.environment(hooks=[SleepsForever()])
    env.cleanup_timeout_seconds = 1.0
    session = await agents.Agent(model="m", environment=env).start_session()
    with anyio.fail_after(30):
        await session.cancel()
    assert backend.is_deleted(session.sandbox)
    (failure,) = session.destroy_failures
    assert "did not finish within cleanup_timeout_seconds=1" in str(failure)


def owned_by(docker_client, pid: int) -> list[str]:
    containers = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"}
    )
    return [c.id for c in containers]


@pytest.mark.docker
@pytest.mark.parametrize("user", ["sandbox", "root"])
def test_runner_run_ends_within_its_deadlines_against_a_hostile_agent(
    tmp_path, docker_client, user
) -> None:
    """The review's reproducer: kill the exec helper, replace ``timeout``, then
    an on_destroy step with a 5 s timeout sleeps for ten minutes.  Before the
    host-side deadline this ran for 12 minutes and ignored Ctrl-C.  As the
    sandbox user the first two steps fail (``check: false``) and the helper
    kills the step at 5 s; as root they succeed and the host's deadline ends it."""
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            agent:
              model: m
              environment:
                sandbox: docker
                user: {user}
                hooks:
                  - name: hostile
                    on_create:
                      - run: {json.dumps(FAKE_TIMEOUT)}
                        check: false
                      - run: kill -9 $PPID
                        check: false
                    on_destroy:
                      - run: sleep 600
                        timeout_seconds: 5
            """
        )
    )
    started = time.monotonic()
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUNNER_DOCKER_IMAGE": TEST_IMAGE},
        cwd=tmp_path,
    )
    try:
        stderr = process.communicate(timeout=120)[1]
    finally:
        process.kill()
        subprocess.run([*RUNNER_CLI, "gc"], capture_output=True, timeout=60)
    took = time.monotonic() - started
    assert process.returncode == 1, stderr  # the on_destroy step timed out
    assert "hostile.on_destroy" in stderr and "timed out" in stderr
    assert took < 60, f"runner run took {took:.0f} s"
    assert owned_by(docker_client, process.pid) == []


@pytest.mark.docker
def test_a_huge_sparse_file_cannot_take_the_runners_memory() -> None:
    """truncate -s 4G is free for the agent; read_file of it used to take the
    runner to 8 GiB.  Now its size (fstat, over the channel) refuses it before any read."""
    code = textwrap.dedent(
        f"""\
        import resource, anyio, runner
        from runner.sandboxes.base import FileTooLargeError
        async def main():
            env = runner.LocalDockerSandbox(image={TEST_IMAGE!r})
            async with await runner.Agent(model="m", environment=env).start_session() as s:
                await s.sandbox.execute("truncate -s 4G huge.bin")
                before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                try:
                    await s.sandbox.read_file("huge.bin")
                except FileTooLargeError as exc:
                    print("refused", exc.strerror)
                after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                print(after - before)
        anyio.run(main)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    refused, growth_kib = result.stdout.splitlines()
    assert refused.startswith("refused the file is 4294967296 bytes, over"), result.stderr
    assert int(growth_kib) < 50_000


@pytest.mark.docker
def test_save_streams_to_disk_keeps_holes_and_refuses_what_is_too_big(
    tmp_path, docker_client
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              model: m
              environment:
                sandbox: docker
                hooks:
                  - name: carry
                    on_create:
                      - run: truncate -s 300M sparse.bin && printf end >> sparse.bin
                      - run: truncate -s 2G huge.bin
                    on_destroy:
                      - {save: sparse.bin, to: sparse.bin}
                      - {save: huge.bin, to: huge.bin}
            """
        )
    )
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(config), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "RUNNER_DOCKER_IMAGE": TEST_IMAGE},
    )
    assert result.returncode == 1, result.stderr  # the huge file was refused
    assert "over the sandbox's max_file_bytes (1073741824)" in result.stderr
    saved = tmp_path / "sparse.bin"
    assert saved.stat().st_size == 300 * (1 << 20) + 3
    assert saved.stat().st_blocks * 512 < 1 << 20  # the holes stayed holes
    with saved.open("rb") as stream:
        stream.seek(-3, os.SEEK_END)
        assert stream.read() == b"end"
    assert not (tmp_path / "huge.bin").exists() or (tmp_path / "huge.bin").stat().st_size == 0


@pytest.mark.docker
@pytest.mark.anyio
async def test_reads_are_bounded_on_every_image_and_workspace(
    docker_backend, tmp_path, image
) -> None:
    """Over the channel (full image) and through cat (the others), on a tmpfs
    workspace too; a refused save leaves no file behind."""
    from runner.sandboxes.base import FileTooLargeError

    env = docker_backend.environment(image=image[1], workspace_size="16m", max_file_bytes=1000)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        await box.execute("head -c 2000 /dev/zero > big.bin && head -c 10 /dev/zero > ok.bin")
        with pytest.raises(FileTooLargeError, match=r"over the sandbox's max_file_bytes \(1000\)"):
            await box.read_file("big.bin")
        with pytest.raises(FileTooLargeError):
            await box.save_file("big.bin", tmp_path / "big.bin")
        assert not (tmp_path / "big.bin").exists()
        assert await box.read_file("ok.bin") == b"\0" * 10


@pytest.mark.anyio
async def test_the_default_save_refuses_over_max_file_bytes(local_backend, tmp_path) -> None:
    from runner.sandboxes.base import FileTooLargeError

    env = local_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        box.max_file_bytes = 10
        await box.write_file("big.txt", "x" * 11)
        with pytest.raises(FileTooLargeError, match="the file is 11 bytes"):
            await box.save_file("big.txt", tmp_path / "out.txt")
        assert not (tmp_path / "out.txt").exists()
