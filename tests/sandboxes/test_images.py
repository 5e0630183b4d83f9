"""The Docker sandbox on images without a full Python.

``scripts/docker-up`` builds three images (tags in the ``image_tags``
fixture):

- ``full``: Debian minbase + python3, git: the exec channel's helper runs;
- ``minimal``: Debian minbase + python3-minimal only: python3 without most
  of the standard library (no ``json``, ``shutil`` or ``ctypes``), which the
  Python helper does without;
- ``busybox``: busybox-static alone: ``sh``, ``sleep``, ``timeout`` as
  busybox applets, no bash, no python3.

These tests check what each image does with the runner: which exec channel
it gets (the Python helper on ``full`` and ``minimal``, the POSIX shell
helper on busybox, each announced by an ``exec_channel_started`` event), and that
commands, files and timeouts behave the same on all three.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import runner as agents
from runner.core.events import listen

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
        assert [e["event"] for e in reported] == ["exec_channel_started"]
        assert sandbox.channel is not None
        if kind in ("full", "minimal"):
            # A python3, even python3-minimal (no json, shutil or ctypes):
            # the Python helper, the faster one.
            assert (sandbox.channel.kind, reported[0]["channel"]) == ("python", "python")
            assert "the image has python3 (full or python3-minimal)" in reported[0]["reason"]
            assert sandbox.shell == "bash"
        else:
            # No python3 at all: the shell helper, which becomes the sandbox
            # user through busybox's nsenter.
            assert (sandbox.channel.kind, reported[0]["channel"]) == ("shell", "shell")
            assert "no python3 that can run the Python helper" in reported[0]["reason"]
            assert sandbox.shell == "sh"
        assert sandbox.channel.can_drop
        whoami = await sandbox.execute("id -u; id -g; grep ^Groups /proc/self/status")
        assert whoami.stdout.split() == ["1000", "1000", "Groups:"]


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


ENV_NAMES = "env | cut -d= -f1 | sort"


@pytest.mark.parametrize("container_env", [{}, {"LC_CTYPE": "C.UTF-8"}])
async def test_commands_get_the_containers_environment_on_every_image(
    docker_backend, image, container_env
) -> None:
    """A command sees the variables one ``docker exec`` would give it, no more:
    Python's locale coercion sets ``LC_CTYPE`` in the helper where the
    container had none, and the helper takes it out (a value the container
    does set is kept)."""
    _kind, tag = image
    seen = {}
    for path in ("channel", "per-command"):
        session, _events = await start(
            docker_backend, tag, exec_channel=path == "channel", env=container_env
        )
        async with session:
            names = await session.sandbox.execute(ENV_NAMES)
            ctype = await session.sandbox.execute('echo "${LC_CTYPE-unset}"')
        assert names.exit_code == 0, names
        seen[path] = (names.stdout.split(), ctype.stdout)
    assert seen["channel"] == seen["per-command"]
    assert seen["channel"][1] == container_env.get("LC_CTYPE", "unset") + "\n"


# A command that outlives its timeout, leaving a background child behind.
TIMED_OUT = "(sleep 31; echo child) & sleep 30; echo late"
# How many "sleep 31" processes are alive (no ps in minbase: read /proc).
COUNT_CHILDREN = (
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    " | grep -c '^sleep 31 '"
)


@pytest.mark.parametrize("path", ["channel", "per-command"])
async def test_a_timeout_on_every_image(docker_backend, image, path) -> None:
    kind, tag = image
    session, _events = await start(docker_backend, tag, exec_channel=path == "channel")
    async with session:
        sandbox = session.sandbox
        result = await sandbox.execute(TIMED_OUT, timeout_seconds=1)
        for _ in range(20):  # a signalled child may take a moment to be gone
            children = await sandbox.execute(COUNT_CHILDREN)
            if children.stdout.strip() == "0":
                break
            await anyio.sleep(0.1)
    assert "late" not in result.stdout and "child" not in result.stdout
    assert result.duration_seconds < 10
    assert (result.exit_code, result.timed_out) == (124, True), result
    if path == "channel" or kind != "busybox":
        # The helper (Python or shell), or GNU timeout on the per-command
        # path, kills the command's whole process group: its child is gone.
        assert children.stdout.strip() == "0"
    else:
        # Per command on busybox (only images where neither helper can
        # start): busybox's timeout signals the command's own process, not
        # its group, so the background child keeps running (README, "Status").
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


LIFECYCLE = """\
version: 1
inputs:
  acme.note:
    as: note
    schema:
      type: object
      properties: {text: {type: string}}
      required: [text]
agent:
  model: m
  environment:
    sandbox: docker
    hooks:
      - name: seed
        on_create:
          - upload: seed.txt
            to: seeded/seed.txt
          - run: printf '%s\\n' {{ note.text }} > NOTE
          - run: cat seeded/seed.txt NOTE > both.txt
        on_destroy:
          - run: echo closing >> both.txt
          - save: both.txt
            to: out/both.txt
"""


async def test_a_yaml_lifecycle_on_every_image(image, tmp_path, docker_client) -> None:
    """upload, run (with an input full of shell syntax), save and on_destroy,
    through each image's helper."""
    from runner.config import compile_file

    _kind, tag = image
    (tmp_path / "seed.txt").write_text("seed\n")
    (tmp_path / "agent.yaml").write_text(LIFECYCLE)
    compiled = compile_file(tmp_path / "agent.yaml", output_dir=tmp_path / "output", image=tag)
    note = "it's $(echo not run) `x` ; \\n done"
    async with await compiled.agent.start_session(
        session_inputs={"acme.note": {"text": note}}
    ) as session:
        assert session.sandbox.channel is not None
        container = session.sandbox.container_id
    assert (tmp_path / "output" / "out" / "both.txt").read_text() == f"seed\n{note}\nclosing\n"
    assert not docker_client.containers.list(all=True, filters={"id": container})
