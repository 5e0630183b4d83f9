"""Privilege separation in the Docker sandbox, attacked from inside (real containers).

The review played a hostile agent that was root in the container: it killed
the exec helper, stopped the container's TTL clock, replaced ``timeout`` and
used the runner's root file access through its own symlinks.  Now hooks and
agent commands run as the sandbox user (uid 1000, no capabilities); the
helper, the TTL clock and the setup script are root.  Each test makes the
attack as the agent would and checks it fails, on all three test images (the
helper's path on ``full``, one ``docker exec`` per command on the others).
Each one passes against ``user="root"`` only where the test says so: that is
the proof the separation, not something else, stops it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from conftest import TEST_IMAGE, lifecycle_until_it_dies

import runner as agents

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

#: Replaces the container's timeout by one that never times anything out.
FAKE_TIMEOUT = (
    "t=$(command -v timeout); case $t in /*) ;; *) t=/bin/timeout;; esac;"  # busybox: a builtin
    " printf '#!/bin/sh\\nshift 3\\nexec \"$@\"\\n' > $t.new"
    " && chmod +x $t.new && mv -f $t.new $t && head -c 9 $t"
)
#: SIGSTOP every process the command may signal, except itself and its parent.
STOP_EVERYTHING = (
    'for p in /proc/[0-9]*; do p=${p#/proc/}; if [ "$p" != $$ ] && [ "$p" != $PPID ] && '
    'kill -STOP "$p" 2>/dev/null; then echo "$p"; fi; done; true'
)
#: The state of the container's TTL clock (``sleep <ttl>``, the child of init).
TTL_STATE = (
    "for p in /proc/[0-9]*; do read -r line < $p/stat || continue; set -- $line; "
    '[ "$2" = "(sleep)" ] && [ "$4" = 1 ] && echo "$3"; done'
)


async def session_on(backend: Any, tag: str, **options: Any) -> Any:
    env = backend.environment(image=tag, **options)
    return await agents.Agent(model="m", environment=env).start_session()


async def test_commands_run_as_the_sandbox_user_who_owns_the_workspace(
    docker_backend, image
) -> None:
    _kind, tag = image
    async with await session_on(docker_backend, tag) as session:
        box = session.sandbox
        who = await box.execute('id -u; id -g; id -G; echo "$HOME"; pwd')
        await box.write_file("sub/dir/f.txt", "from the host\n")
        edit = await box.execute(
            "echo more >> sub/dir/f.txt && touch ~/dotfile && "
            "stat -c '%u:%g %a' /workspace sub sub/dir sub/dir/f.txt ~/dotfile"
        )
        written = await box.read_file("sub/dir/f.txt")
    assert who.stdout.split() == ["1000", "1000", "1000", "/home/sandbox", "/workspace"], who
    assert edit.exit_code == 0, edit
    # Everything the host wrote is the user's: the agent can change it.
    assert edit.stdout.split("\n")[:5] == [
        "1000:1000 755",
        "1000:1000 755",
        "1000:1000 755",
        "1000:1000 644",
        "1000:1000 644",
    ]
    assert written == b"from the host\nmore\n"


async def test_the_setup_script_runs_as_root_and_hands_its_files_over(
    docker_backend, image
) -> None:
    _kind, tag = image
    setup = "id -u > /root-was-here && mkdir -p made && echo x > made/by-setup"
    async with await session_on(docker_backend, tag, setup_script=setup) as session:
        box = session.sandbox
        result = await box.execute("cat /root-was-here && echo y >> made/by-setup && id -u")
    assert result.stdout.split() == ["0", "1000"], result


async def test_the_agent_cannot_replace_what_root_runs(docker_backend, image) -> None:
    """``timeout``, the shell, python3: the image's files are root's."""
    _kind, tag = image
    async with await session_on(docker_backend, tag) as session:
        box = session.sandbox
        replaced = await box.execute(FAKE_TIMEOUT)
        with anyio.fail_after(30):
            later = await box.execute("sleep 60", timeout_seconds=1)
    assert replaced.exit_code != 0 and "ermission denied" in replaced.stderr, replaced
    assert (later.exit_code, later.timed_out) == (124, True)
    assert later.duration_seconds < 10


async def test_the_agent_cannot_stop_the_helper_or_the_ttl_clock(docker_backend, image) -> None:
    """It stops every process it can: its own only.  The helper still answers
    (on the full image), and the TTL clock still ticks."""
    kind, tag = image
    async with await session_on(docker_backend, tag) as session:
        box = session.sandbox
        stopped = await box.execute(STOP_EVERYTHING)
        owners = await box.execute_as_root(
            f"for p in {' '.join(stopped.stdout.split())}; do stat -c %u /proc/$p 2>/dev/null; done"
            if stopped.stdout.split()
            else "true"
        )
        killed = await box.execute("kill -KILL 1 && echo killed-init")
        clock = await box.execute_as_root(TTL_STATE)
        after = await box.execute("echo still-here")
        if kind == "full":
            assert box.channel is not None and box.channel.alive
    assert stopped.exit_code == 0, stopped
    # Only its own processes (busybox's timeout watcher, on the per-command path).
    assert set(owners.stdout.split()) <= {"1000"}, owners
    assert "killed-init" not in killed.stdout
    assert clock.stdout.split() == ["S"], clock  # sleeping, not stopped (T)
    assert after.stdout == "still-here\n"


async def test_a_user_root_agent_can_stop_the_ttl_clock(docker_backend) -> None:
    """The opt-out is weaker, as documented: the same command stops the clock."""
    async with await session_on(docker_backend, TEST_IMAGE, user="root") as session:
        box = session.sandbox
        await box.execute(STOP_EVERYTHING.replace("echo", ": "))
        # A stop is delivered when the sleeping clock is next scheduled: on a
        # loaded machine /proc may still say S for a moment.
        for _ in range(50):
            clock = await box.execute_as_root(TTL_STATE)
            if clock.stdout.split() == ["T"]:
                break
            await anyio.sleep(0.2)
    assert clock.stdout.split() == ["T"], clock


async def test_the_container_still_ends_at_its_ttl(docker_backend, docker_client, image) -> None:
    """The review's reproducer: SIGSTOP the ``sleep <ttl>`` main process, and
    the container outlived its TTL.  As the sandbox user the signal fails."""
    _kind, tag = image
    since = int(time.time()) - 1
    session = await session_on(docker_backend, tag, ttl_seconds=6)
    try:
        await session.sandbox.execute(STOP_EVERYTHING)
        actions = lifecycle_until_it_dies(
            docker_client, session.sandbox.container_id, since=since, seconds=36
        )
    finally:
        await session.close()
    assert "die" in actions, f"still running 30 s after its 6 s TTL: {actions}"
    assert "kill" not in actions, f"it was killed, not ended by its clock: {actions}"


async def test_files_move_with_the_sandbox_users_rights(docker_backend, image, tmp_path) -> None:
    """The agent links workspace names to root's files; the runner's
    ``read_file``/``save:``/``write_file`` then act as the user and are refused
    (they used to read and write as root: the archive API and the root helper)."""
    _kind, tag = image
    async with await session_on(docker_backend, tag) as session:
        box = session.sandbox
        await box.execute_as_root(
            "mkdir -p /root && printf secret > /root/token && chmod 600 /root/token && "
            "chmod 700 /root && printf original > /etc/owned && chmod 644 /etc/owned"
        )
        await box.execute("ln -s /root/token stolen && ln -s /etc/owned planted")
        with pytest.raises(PermissionError):
            await box.read_file("stolen")
        with pytest.raises(PermissionError):
            await box.save_file("stolen", tmp_path / "stolen")
        assert not (tmp_path / "stolen").exists()
        with pytest.raises(PermissionError):
            await box.write_file("planted", "overwritten")
        with pytest.raises(PermissionError):
            await box.write_file("/etc/new-file", "x")
        # Big files take the same path (pieces over the channel, or cat).
        with pytest.raises(PermissionError):
            await box.write_file("planted", b"z" * (9 << 20))
        owned = await box.execute_as_root("cat /etc/owned; ls /etc/new-file 2>&1")
    assert owned.stdout.startswith("original"), owned
    assert "No such file" in owned.stdout


async def test_big_files_round_trip_as_the_user(docker_backend, image, tmp_path) -> None:
    """Over 4 MiB a file moves in pieces (channel) or as one stream (cat)."""
    _kind, tag = image
    data = bytes(range(256)) * (40 << 10) + b"tail"  # 10 MiB and 4 bytes
    async with await session_on(docker_backend, tag) as session:
        box = session.sandbox
        await box.write_file("big.bin", data)
        owner = await box.execute("stat -c %u big.bin && wc -c < big.bin")
        assert await box.read_file("big.bin") == data
        assert await box.save_file("big.bin", tmp_path / "big.bin") == len(data)
    assert owner.stdout.split() == ["1000", str(len(data))]
    assert (tmp_path / "big.bin").read_bytes() == data


async def test_a_read_only_root_keeps_writes_in_bounded_tmpfs_mounts(
    docker_backend, docker_client, image
) -> None:
    _kind, tag = image
    async with await session_on(docker_backend, tag, read_only_root=True) as session:
        box = session.sandbox
        attrs = docker_client.api.inspect_container(box.container_id)
        image_files = await box.execute_as_root("touch /usr/new 2>&1; echo $?")
        fill = await box.execute(
            "dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>&1; echo $?", timeout_seconds=60
        )
        await box.write_file("w.txt", "ws")
        home = await box.execute("echo h > ~/h && cat ~/h w.txt")
    assert attrs["HostConfig"]["ReadonlyRootfs"] is True
    assert "Read-only file system" in image_files.stdout, image_files
    assert "No space left on device" in fill.stdout, fill  # /tmp is 256m
    assert home.stdout == "h\nws", home


async def test_a_reattached_sandbox_knows_whose_turn_it_is(docker_backend) -> None:
    """``runner serve`` re-attaching after a crash reads whose turn it is
    from the workspace's owner (``owners.read_principal``): a sandbox still
    in its ``on_create`` runs the next hook as the hooks' uid, one handed to
    the agent runs the next turn as the agent's (without reading it, a
    re-attached sandbox ran the agent's tools as the hooks' uid)."""
    env = docker_backend.environment()
    session_id = "sess_reattach_principal"
    sandbox = await env.create(session_id=session_id, expires_at=None)
    seen = []
    try:
        for hand_over in (None, sandbox.hand_to_agent):
            if hand_over is not None:
                await hand_over()
            again = await env.reattach(sandbox.record(), session_id=session_id)
            try:
                seen.append((await again.execute("id -u")).stdout)
            finally:
                if again.channel is not None:
                    again.channel.close()
    finally:
        await sandbox.delete()
    assert seen == ["1001\n", "1000\n"]
