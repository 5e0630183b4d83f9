"""The Docker sandbox on images without a full Python.

``scripts/docker-up`` builds three images (tags in the ``image_tags``
fixture):

- ``full``: Debian minbase + python3, git: the exec channel's helper runs;
- ``minimal``: Debian minbase + python3-minimal only: python3 starts, but
  without most of the standard library (no ``json``), so the helper cannot;
- ``busybox``: busybox-static alone: ``sh``, ``sleep``, ``timeout`` as
  busybox applets, no bash, no python3.

These tests record what each image does with the runner today: which exec
channel it ends up with (the helper, or one ``docker exec`` per command
after an ``exec_channel_unavailable`` event), and that commands, files and
timeouts work.  Where today's behaviour on a small image is a known gap (the
exec-channel work for such images is a later issue), the test asserts what
happens now and says so in a comment, so a change shows up here.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import runner as agents
from runner._events import listen

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def start(backend: Any, tag: str, **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A started session on ``tag`` and the events its start emitted."""
    events: list[dict[str, Any]] = []
    env = backend.environment(image=tag, **options)
    with listen(events.append):
        session = await agents.Agent(model="m", environment=env).start_session()
    return session, events


def channel_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"].startswith("exec_channel")]


async def test_which_exec_channel_each_image_ends_up_with(docker_backend, image) -> None:
    kind, tag = image
    session, events = await start(docker_backend, tag)
    async with session:
        sandbox = session.sandbox
        reported = channel_events(events)
        if kind == "full":
            # The helper runs: one stream for every command and file.
            assert sandbox.channel is not None
            assert reported == []
            assert sandbox.shell == "bash"
        elif kind == "minimal":
            # python3 exists, so the helper is started, and dies importing json:
            # the sandbox says why and falls back to one docker exec per command.
            assert sandbox.channel is None
            assert [e["event"] for e in reported] == ["exec_channel_unavailable"]
            assert "No module named 'json'" in reported[0]["reason"]
            assert sandbox.shell == "bash"
        else:
            # No python3 at all, and it falls back the same way.  Today the
            # reason is misleading: Docker's "OCI runtime exec failed: exec:
            # \"python3\": executable file not found" reply is read as a frame,
            # so the event says "a forged or malformed answer ended the channel:
            # an answer header of 1329809696 bytes" (0x4f434920 is "OCI ").
            # Naming the missing python3 is part of the later exec-channel issue.
            assert sandbox.channel is None
            assert [e["event"] for e in reported] == ["exec_channel_unavailable"]
            reason = reported[0]["reason"]
            assert "malformed answer" in reason or "python3" in reason, reason
            assert sandbox.shell == "sh"  # no bash: busybox ash


async def test_commands_and_files_work_on_every_image(docker_backend, image) -> None:
    _kind, tag = image
    session, _events = await start(docker_backend, tag)
    async with session:
        sandbox = session.sandbox
        result = await sandbox.execute("echo hi")
        assert (result.exit_code, result.stdout, result.stderr) == (0, "hi\n", "")
        # Through the helper (full) or cat as the sandbox user (the others).
        data = b"\x00\xff binary\nand text \xe2\x82\xac\n"
        await sandbox.write_file("round.bin", data)
        assert await sandbox.read_file("round.bin") == data
        await sandbox.write_file("/tmp/text.txt", "é\n")
        assert await sandbox.read_file("/tmp/text.txt") == "é\n".encode()
        # Where commands see them.
        seen = await sandbox.execute("cat round.bin /tmp/text.txt")
        assert seen.exit_code == 0
        assert seen.stdout == (data + "é\n".encode()).decode("utf-8", errors="replace")


# A command that outlives its timeout, leaving a background child behind.
TIMED_OUT = "(sleep 31; echo child) & sleep 30; echo late"
# How many "sleep 31" processes are alive (no ps in minbase: read /proc).
COUNT_CHILDREN = (
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    " | grep -c '^sleep 31 '"
)


async def test_a_timeout_on_every_image(docker_backend, image) -> None:
    kind, tag = image
    session, _events = await start(docker_backend, tag)
    async with session:
        sandbox = session.sandbox
        result = await sandbox.execute(TIMED_OUT, timeout_seconds=1)
        for _ in range(20):  # a signalled child may take a moment to be gone
            children = await sandbox.execute(COUNT_CHILDREN)
            if kind == "busybox" or children.stdout.strip() == "0":
                break
            await anyio.sleep(0.1)
    assert "late" not in result.stdout and "child" not in result.stdout
    assert result.duration_seconds < 10
    if kind in ("full", "minimal"):
        # The helper (full) or GNU timeout (minimal) kills the command's whole
        # process group: 124, and its background child is gone too.
        assert (result.exit_code, result.timed_out) == (124, True), result
        assert children.stdout.strip() == "0"
    else:
        # busybox's timeout signals only the command's own process (not its
        # group): the command dies of TERM (143), which the runner counts as
        # the timeout it is (124), but its background child keeps running.
        # A later issue (the exec channel on small images) is to kill the group.
        assert (result.exit_code, result.timed_out) == (124, True), result
        assert children.stdout.strip() == "1"


async def test_a_tmpfs_workspace_on_every_image(docker_backend, image) -> None:
    """Files move through the helper or through ``cat`` run as the sandbox
    user, never through the Engine's archive API (which cannot see a tmpfs),
    so ``workspace_size`` works on every image."""
    _kind, tag = image
    session, _events = await start(docker_backend, tag, workspace_size="16m")
    async with session:
        await session.sandbox.write_file("w.txt", "tmpfs\n")
        result = await session.sandbox.execute("cat w.txt; df -P /workspace | tail -n 1")
        assert await session.sandbox.read_file("w.txt") == b"tmpfs\n"
    assert result.stdout.startswith("tmpfs\ntmpfs "), result
