"""Issue 26, finding 2: memory pressure takes the agent's processes, not the
root helper, and a helper the out-of-memory killer took anyway is reported
as such and replaced.

Memory a tmpfs holds belongs to no process, so when the agent fills one the
kernel kills the process with the highest score; before, that was the
largest, the helper (the command came back 255, "channel lost", and later
commands went one ``docker exec`` each).  On the full, python3-minimal and
busybox images, with a 64 MiB memory limit.
"""

from __future__ import annotations

import re
import textwrap

import pytest

import runner as agents
from runner.config import validate_file

MEMORY = "64m"

#: Every process as "UID ADJ SESSION", one a line, then this command's
#: session as "me SESSION" (as the sandbox user can see them).
LIST_ADJ = (
    "for d in /proc/[0-9]*; do u=; while read -r k a rest; do "
    '[ "$k" = Uid: ] && u=$a && break; done < $d/status; '
    "read -r j < $d/oom_score_adj && set -- $(cat $d/stat) && "
    'echo "$u $j $6"; done 2>/dev/null; set -- $(cat /proc/$$/stat); echo "me $6"'
)
#: Fills the workspace (a tmpfs as large as the memory limit) until the
#: kernel steps in: pages no process owns, in a file already removed, so
#: they are freed once the command's processes are gone.
FILL = "exec 3> fill && rm fill && head -c 200m /dev/zero >&3"


async def start(backend, tag: str, **options):
    env = backend.environment(image=tag, memory=MEMORY, **options)
    return await agents.Agent(model="m", environment=env).start_session()


@pytest.mark.anyio
async def test_the_agents_processes_are_the_oom_killers_first_choice(docker_backend, image) -> None:
    """The sandbox user's commands, and what they start, run with
    oom_score_adj 1000; root's helper, the TTL clock and docker-init keep 0.
    The agent can lower its own to 0 again, not below (that would need
    CAP_SYS_RESOURCE).  Before, everything ran at 0."""
    _kind, tag = image
    for exec_channel in (True, False):  # the helpers, and one docker exec per command
        async with await start(docker_backend, tag, exec_channel=exec_channel) as session:
            box = session.sandbox
            listed = await box.execute(f"(sleep 5 &); {LIST_ADJ}")
            assert listed.exit_code == 0, listed.stderr
            *rows, (_, me) = [line.split() for line in listed.stdout.splitlines()]
            # (on the per-command path root's timeout shares the session: root's)
            ours = {adj for uid, adj, session in rows if session == me and uid != "0"}
            roots = {adj for uid, adj, session in rows if uid == "0"}
            assert len([r for r in rows if r[2] == me and r[0] != "0"]) >= 2, rows  # shell, sleep
            assert ours == {"1000"}, rows
            assert roots == {"0"}, rows
            lowered = await box.execute(
                "echo 0 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj; "
                "echo -1 > /proc/self/oom_score_adj"
            )
            assert lowered.stdout == "0\n"
            assert lowered.exit_code != 0  # below 0: permission denied


@pytest.mark.anyio
async def test_filling_memory_kills_the_agents_command_not_the_helper(
    docker_backend, image
) -> None:
    """The review's case: the agent fills a tmpfs workspace as large as the
    memory limit.  The kernel now kills the agent's command (137, said to
    be out of memory) and the helper answers on; before, it killed the
    helper (the Python one is the largest process): 255, the channel lost."""
    _kind, tag = image
    async with await start(docker_backend, tag, workspace_size=MEMORY) as session:
        box = session.sandbox
        channel = box.channel
        filled = await box.execute(FILL, timeout_seconds=60)
        assert filled.exit_code == 137, filled
        assert "out of memory" in filled.stderr
        assert box.channel is channel, "the helper was lost"
        after = await box.execute("echo ok")
        assert (after.exit_code, after.stdout) == (0, "ok\n")
        assert box.channel is channel


#: As root: every process but docker-init, the TTL clock and this command's
#: own session gets oom_score_adj 1000 (the helper's, that is), then the
#: command takes memory of its own until the kernel steps in.
TAKE_THE_HELPER = textwrap.dedent(
    """\
    me=$(set -- $(cat /proc/self/stat); echo $6)
    for d in /proc/[0-9]*; do
        set -- $(cat $d/stat 2>/dev/null) || continue
        [ "$1" = 1 ] || [ "$4" = 1 ] || [ "$6" = "$me" ] && continue
        echo 1000 > $d/oom_score_adj
    done
    x=$(head -c 200m /dev/zero | tr '\\0' a)
    """
)


@pytest.mark.anyio
async def test_a_helper_lost_to_the_oom_killer_is_reported_and_replaced(
    docker_backend, image
) -> None:
    """Where the kernel does take the helper (here an agent running as root
    makes it the first choice; the sandbox user can bring its own processes
    down to the helper's 0), the command is reported as 137 out of memory,
    from the container's OOM kill count, and the next command gets a new
    helper.  Before: 255 "channel lost", and every later command went one
    ``docker exec`` each."""
    _kind, tag = image
    async with await start(docker_backend, tag, user="root") as session:
        box = session.sandbox
        channel = box.channel
        taken = await box.execute(TAKE_THE_HELPER, timeout_seconds=60)
        assert taken.exit_code == 137, taken
        assert re.search(r"out of memory \(memory limit 64m\).*exec helper", taken.stderr)
        after = await box.execute("echo ok")
        assert (after.exit_code, after.stdout) == (0, "ok\n")
        assert box.channel is not None and box.channel is not channel, "no new helper"
        assert box.channel.kind == channel.kind


def test_a_tmpfs_workspace_larger_than_memory_is_refused(tmp_path) -> None:
    """Filling it would leave the sandbox's own processes no memory, and the
    kernel then killed the TTL clock and docker-init too."""
    with pytest.raises(ValueError, match=r"workspace_size '128m' is larger than the memory limit"):
        agents.LocalDockerSandbox(memory="64m", workspace_size="128m")
    with pytest.raises(ValueError, match=r"read_only_root's tmpfs workspace \(1g\) is larger"):
        agents.LocalDockerSandbox(memory="512m", read_only_root=True)
    agents.LocalDockerSandbox(memory="64m", workspace_size="64m")
    agents.LocalDockerSandbox(memory="2g", read_only_root=True)
    config = tmp_path / "agent.yaml"
    config.write_text(
        "version: 1\nagent:\n  model: m\n  environment:\n"
        "    sandbox: docker\n    memory: 64m\n    workspace_size: 1g\n"
    )
    problems = [str(p) for p in validate_file(config)]
    assert any("larger than the memory limit" in p for p in problems), problems
