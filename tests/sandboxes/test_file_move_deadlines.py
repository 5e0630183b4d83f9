"""A process of the sandbox user's that the agent stops cannot hold a file
move (issue 26, finding 6).

Files move with the sandbox user's rights: the Python helper forks a child
that becomes the user and opens the file, the shell helper runs a script as
the user, and the per-command path runs ``head``/``cat`` as the user.  The
agent has the same uid, so a loop of ``kill -STOP -1`` stops each of them.
The Python helper used to wait for its child without a deadline: a read was
held for the whole host deadline (300 s), then the channel was declared lost
and the per-command path was stopped the same way (300 s more).  Now every
wait for the user's processes has a deadline, ``file_piece_seconds`` (60 s,
as the shell helper already had); the tests set it to 3 s and check that the
move fails with a ``TimeoutError`` saying so, well within a generous bound
(no timing is asserted: only that it does not hang).

On the per-command path (no helper) each move and command is a ``docker
exec``.  Started with ``--user``, that exec's own ``runc init`` ran as the
sandbox user before the command did, the agent's ``kill -STOP -1`` stopped it,
and runc, the container's shim and every later Engine call on the container,
deletion included, waited for it forever.  The execs now start as root and
drop to the user inside (setpriv or nsenter); the last test checks commands,
moves and the container's removal all end.
"""

from __future__ import annotations

import anyio
import pytest

import runner as agents

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

#: The agent's attack: after a second (so that this command's own answer
#: gets out), stop every process of its uid, again and again (``kill -1``
#: spares the loop itself).
STOP_LOOP = (
    "(sleep 1; while :; do kill -STOP -1; done) </dev/null >/dev/null 2>&1 &"
    " printf 'x\\n' > f; ln -s . d; echo planted"
)
#: A path through 1000 links (``d`` is ``.``): resolving it, which the
#: Python helper's child does as the sandbox user, takes long enough to be
#: caught for sure.  (The kernel refuses more than 40 links in one lookup,
#: so the shell helper and ``head`` get the plain path: they run several
#: processes of the user for each move anyway.)
DEEP = "d/" * 1000 + "f"
#: A write creates the file's parents first, which the kernel resolves: 30
#: links, under its limit.
DEEP_WRITE = "d/" * 30 + "g"
#: The deadline the tests give every wait for the sandbox user's processes.
PIECE_SECONDS = 3.0
#: Far beyond the deadline (and its 2 s grace), far below the 300 s a move
#: used to be held: a hang fails the test, nothing else is timed.
BOUND_SECONDS = 120


async def stopped_sandbox(session: agents.Session, kind: str, *, helper: bool = True) -> str:
    """Start the attack in ``session``; the path to read: through the links
    for the Python helper, the plain one for the shell helper and ``head``
    (through the links, a ``head`` the loop did not catch fails with ELOOP,
    which is neither a finished move nor the deadline)."""
    box = session.sandbox
    box.file_piece_seconds = PIECE_SECONDS
    planted = await box.execute(STOP_LOOP)
    assert planted.stdout == "planted\n", planted
    await anyio.sleep(2)  # the loop runs from now on
    return DEEP if helper and kind != "busybox" else "f"


async def moves_stopped(move, attempts: int = 200) -> bool:
    """Try ``move`` until the agent's loop stops it: True once one failed
    with the deadline's TimeoutError.  A move the loop misses takes
    milliseconds, so many attempts cost nothing; on a loaded 2-core machine
    the loop gets little CPU: five were not always enough (CI, stop 37),
    nor were 25 for a write through 30 links (a rehearsal, stop 45)."""
    for _ in range(attempts):
        try:
            await move()
        except TimeoutError as exc:
            assert "sandbox" in str(exc), exc
            return True
    return False


@pytest.mark.parametrize("kind", ["full", "minimal", "busybox"])
async def test_a_stopped_open_cannot_hold_a_file_move(docker_backend, image_tags, kind) -> None:
    """Over the exec channel: the Python helper (full, python3-minimal) and
    the shell helper (busybox).  Before: on full and minimal the read was
    held until the 120 s bound cut it (it would have waited 300 s, then the
    per-command path as long again); busybox already stopped it, at 60 s."""
    env = docker_backend.environment(image=image_tags[kind])
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        path = await stopped_sandbox(session, kind)
        target = "g" if kind == "busybox" else DEEP_WRITE
        with anyio.fail_after(BOUND_SECONDS):
            # The loop races the open (on a loaded machine the open can win):
            # each move either ends or fails with the deadline; none may hang.
            assert await moves_stopped(lambda: box.read_file(path)), "no read was stopped"
            assert await moves_stopped(lambda: box.write_file(target, "data")), "no write was"
        # The channel was not given up for it: its answer was an error.
        assert box.channel is not None and box.channel.alive


@pytest.mark.parametrize("kind", ["full", "minimal", "busybox"])
async def test_a_stopped_user_cannot_wedge_the_per_command_path(
    docker_backend, image_tags, kind
) -> None:
    """Without a helper, under the same loop: every command and move ends
    (done, timed out or failed with the deadline), and so does the removal
    of the container.  Before: the first exec after the loop started hung in
    ``runc init`` and the container could not even be removed (the test
    hit its bound and left a wedged container behind)."""
    env = docker_backend.environment(image=image_tags[kind], exec_channel=False)
    with anyio.fail_after(BOUND_SECONDS):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            assert box.channel is None
            container_id = box.container_id
            path = await stopped_sandbox(session, kind, helper=False)
            for _ in range(3):
                result = await box.execute("echo alive", timeout_seconds=3)
                assert result.exit_code == 0 or result.timed_out, result
            assert await moves_stopped(lambda: box.read_file(path)), "no read was stopped"
            assert await moves_stopped(lambda: box.write_file("g", "data")), "no write was"
            # Root's commands are not the agent's to stop.
            assert (await box.execute_as_root("echo root", timeout_seconds=10)).stdout == "root\n"
    with anyio.fail_after(30):
        gone = await anyio.to_thread.run_sync(
            lambda: docker_backend.docker_client.containers.list(
                all=True, filters={"id": container_id}
            )
        )
    assert gone == []
