"""A hostile agent inside the sandbox cannot make the runner outlive its deadlines.

Each test plays the agent with ordinary commands (root in the container, as
today) and checks that ``execute``, the close of a session and ``runner run``
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
from conftest import TEST_IMAGE

import runner as agents
from runner.sandboxes.docker import HOST_GRACE_SECONDS, LABEL_OWNER_PID

#: Replaces the container's GNU timeout by one that never times anything out.
FAKE_TIMEOUT = (
    "t=$(command -v timeout) && printf '#!/bin/sh\\nshift 3\\nexec \"$@\"\\n' > $t.new"
    " && chmod +x $t.new && mv -f $t.new $t && head -c 9 $t"
)


@pytest.fixture
async def fallback_box(docker_backend):
    """A container whose commands go one ``docker exec`` each (no helper), as on
    an image without python3 or after the agent killed the helper."""
    env = docker_backend.environment(exec_channel=False)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        yield session.sandbox


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_stopped_in_container_timeout_cannot_hang_a_command(fallback_box) -> None:
    """The command stops the ``timeout`` that wraps it (its parent) and sleeps:
    only the host's deadline can end the wait."""
    started = time.monotonic()
    with anyio.fail_after(2 + HOST_GRACE_SECONDS + 20):
        result = await fallback_box.execute("kill -STOP $PPID; sleep 600", timeout_seconds=2)
    assert result.exit_code == 124 and result.timed_out
    assert "outlived its 2 s timeout" in result.stderr
    assert time.monotonic() - started < 2 + HOST_GRACE_SECONDS + 10
    assert (await fallback_box.execute("echo still-usable")).stdout == "still-usable\n"


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_replaced_timeout_binary_cannot_hang_later_commands(fallback_box) -> None:
    replaced = await fallback_box.execute(FAKE_TIMEOUT)
    assert replaced.stdout == "#!/bin/sh", replaced  # the timeout binary is the fake now
    with anyio.fail_after(2 + HOST_GRACE_SECONDS + 20):
        result = await fallback_box.execute("sleep 600", timeout_seconds=2)
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
def test_runner_run_ends_within_its_deadlines_against_a_hostile_agent(
    tmp_path, docker_client
) -> None:
    """The review's reproducer: kill the exec helper, replace ``timeout``, then
    an on_destroy step with a 5 s timeout sleeps for ten minutes.  Before the
    host-side deadline this ran for 12 minutes and ignored Ctrl-C."""
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            agent:
              model: m
              environment:
                sandbox: docker
                hooks:
                  - name: hostile
                    on_create:
                      - run: {json.dumps(FAKE_TIMEOUT)}
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
        [sys.executable, "-m", "runner", "run", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUNNER_DOCKER_IMAGE": TEST_IMAGE},
        cwd=tmp_path,
    )
    try:
        stderr = process.communicate(timeout=120)[1]
    finally:
        process.kill()
        subprocess.run([sys.executable, "-m", "runner", "gc"], capture_output=True, timeout=60)
    took = time.monotonic() - started
    assert process.returncode == 1, stderr  # the on_destroy step timed out
    assert "hostile.on_destroy" in stderr and "timed out" in stderr
    assert took < 60, f"runner run took {took:.0f} s"
    assert owned_by(docker_client, process.pid) == []
