"""A Docker step's output reaches the live progress while it runs (issue 31).

The exec channel's helpers answer a command when it ends; a command whose
output someone listens to (``core.output.listen_output``: the CLI's
progress) asks for its output as it comes too, in output frames before the
answer.  On real containers, every image (the Python helper on the full
and the python3-minimal images, the shell helper on busybox, and the shell
helper on the full image too):

- a line shows while its command still runs: the command waits for a file
  that the test writes only once the line reached the listener (without
  streaming it would reach it only at the end, and the test would hang
  until its guard);
- the result is byte for byte the one a command nobody listens to gets;
- a secret printed in two writes, the second only once the first arrived
  as a chunk of its own, never reaches the listener, in part or whole.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helper_parity import observed, open_session

from runner.core import output as core_output
from runner.core.events import add_secrets
from runner.core.output import listen_output
from runner.core.redaction import secret_text_forms

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

#: No command here should take long; the guard only turns a hang into a failure.
GUARD_SECONDS = 60

#: (image kind, exec_channel): every helper on every image that has it.
HELPERS = [("full", "python"), ("full", "shell"), ("minimal", "auto"), ("busybox", "auto")]


def on_image(request: pytest.FixtureRequest, tmp_path: Any, kind: str) -> Any:
    from conftest import _docker_on

    return _docker_on(request, tmp_path, "docker", kind)


@pytest.fixture(params=HELPERS, ids=[f"{kind}-{helper}" for kind, helper in HELPERS])
def helper_backend(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """(backend, exec_channel, image kind) for one image and helper."""
    kind, helper = request.param
    backend = on_image(request, tmp_path, kind)
    yield backend, helper, kind
    assert backend.leftovers() == [], f"{kind} left containers behind"


@pytest.mark.parametrize("user", ["sandbox", "root"])
async def test_a_line_shows_while_its_command_runs(helper_backend, user: str) -> None:
    """As the sandbox user (the Python helper's spawner relays the chunks)
    and as root (the helper's own command)."""
    backend, helper, kind = helper_backend
    async with await open_session(backend, exec_channel=helper, user=user) as session:
        box = session.sandbox
        seen: list[tuple[str, str]] = []
        first = anyio.Event()

        def listener(stream: str, line: str) -> None:
            seen.append((stream, line))
            if line == "compiling part 1":
                first.set()

        async def touch_once_seen() -> None:
            await first.wait()
            await box.execute("touch /tmp/go")

        with anyio.fail_after(GUARD_SECONDS), listen_output(listener):
            async with anyio.create_task_group() as tg:
                tg.start_soon(touch_once_seen)
                result = await box.execute(
                    "echo compiling part 1; echo warned >&2;"
                    " while [ ! -e /tmp/go ]; do sleep 0.05; done; printf 'linking'"
                )
        expected = "python" if helper == "python" or kind == "minimal" else "shell"
        assert box.channel is not None and box.channel.kind == expected
        assert (result.exit_code, result.stdout, result.stderr) == (
            0,
            "compiling part 1\nlinking",
            "warned\n",
        )
        # the line came before the command ended; all of them, once each
        assert sorted(seen) == [
            ("stderr", "warned"),
            ("stdout", "compiling part 1"),
            ("stdout", "linking"),
        ]


#: Commands whose results must not depend on whether the output streamed:
#: both streams, no newline at the end, bytes that are not UTF-8, output over
#: the cap (head, marker, tail), a timeout, a kill.
COMMANDS = [
    "echo out; echo err >&2; printf 'no newline'",
    "printf '\\377\\376 not utf-8 \\000 nul\\n'",
    "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done",
    "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo tail",
    "head -c 200000 /dev/zero | tr '\\0' y >&2; echo small",
    "echo before; sleep 30",
    "echo dying; kill -9 $$",
]


async def test_a_streamed_result_is_the_one_nobody_listening_gets(helper_backend) -> None:
    backend, helper, _kind = helper_backend
    async with await open_session(
        backend, exec_channel=helper, output_cap_bytes=1 << 20
    ) as session:
        box = session.sandbox
        for command in COMMANDS:
            timeout = 2 if "sleep 30" in command else None
            with anyio.fail_after(GUARD_SECONDS):
                plain = await box.execute(command, timeout_seconds=timeout)
                lines: list[str] = []
                with listen_output(lambda _stream, line, into=lines: into.append(line)):
                    streamed = await box.execute(command, timeout_seconds=timeout)
            assert observed(streamed) == observed(plain), command
            assert lines, command  # it did stream
        assert box.channel is not None  # no frame ended the channel


SECRET = "hunter2-Secret Value/93+x"
HALVES = (SECRET[:10], SECRET[10:])


async def test_a_secret_split_across_two_chunks_never_reaches_the_listener(
    helper_backend, monkeypatch
) -> None:
    """The step prints the first half, then waits until the test saw that
    half arrive as a chunk of its own (the raw chunks are watched where the
    channel hands them to the line splitter), then prints the rest.  The
    listener gets the whole line, scrubbed, and no piece of the secret."""
    backend, helper, _kind = helper_backend
    chunks: list[bytes] = []
    half_arrived = anyio.Event()
    feed = core_output.OutputLines.feed

    def watched(self: Any, stream: str, chunk: bytes) -> None:
        chunks.append(chunk)
        if HALVES[0].encode() in chunk:
            half_arrived.set()
        feed(self, stream, chunk)

    monkeypatch.setattr(core_output.OutputLines, "feed", watched)
    async with await open_session(backend, exec_channel=helper) as session:
        box = session.sandbox
        add_secrets(secret_text_forms(SECRET))
        seen: list[str] = []

        async def go_once_half_arrived() -> None:
            await half_arrived.wait()
            await box.execute("touch /tmp/go")

        with anyio.fail_after(GUARD_SECONDS), listen_output(lambda _s, line: seen.append(line)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(go_once_half_arrived)
                result = await box.execute(
                    'printf "first: %s" "$A"; while [ ! -e /tmp/go ]; do sleep 0.05; done;'
                    ' printf "%s :last\\n" "$B"; echo visible-marker',
                    env={"A": HALVES[0], "B": HALVES[1]},
                )
        assert result.exit_code == 0, result
        # the halves came apart: the first without the second
        assert any(HALVES[0].encode() in c and HALVES[1].encode() not in c for c in chunks)
        shown = "\n".join(seen)
        for piece in (SECRET, *HALVES):
            assert piece not in shown, seen
        assert "first: *** :last" in seen and "visible-marker" in seen, seen


async def test_a_full_channel_directory_costs_the_streaming_not_the_result(
    docker_backend,
) -> None:
    """The shell helper stores each piece it relays in its tmpfs; full (only
    root can fill it), nothing is streamed, the command runs to its end,
    and its result is the one a command nobody listens to gets in the same
    state (cut and marked); the channel stays."""
    async with await open_session(docker_backend, exec_channel="shell", user="root") as session:
        box = session.sandbox
        await box.execute("dd if=/dev/zero of=/run/sandbox-runner/fill bs=1M 2>/dev/null")
        command = "seq 1 200000 | wc -l; echo done"
        with anyio.fail_after(GUARD_SECONDS):
            plain = await box.execute(command)
            with listen_output(lambda _stream, _line: None):
                streamed = await box.execute(command)
        await box.execute("rm /run/sandbox-runner/fill")
        assert observed(streamed) == observed(plain)
        assert streamed.exit_code == 0, streamed  # cut and marked, as any output there
        assert box.channel is not None
        after = await box.execute(command)
        assert (after.exit_code, after.stdout) == (0, "200000\ndone\n"), after


#: Root's copies of the shell helper's tools: a relay's or a capture's left
#: behind would show here.
COUNT_ROOT_COPIES = (
    "n=0; for p in /proc/[0-9]*; do"
    ' [ "$(stat -c %u $p 2>/dev/null)" = 0 ] || continue;'
    " case $(tr '\\0' ' ' < $p/cmdline 2>/dev/null) in dd*|tee*|tail*|head*|wc*|cat*) n=$((n+1));; esac;"
    " done; echo $n"
)


async def test_a_process_that_leaves_the_group_cannot_hold_a_streamed_answer(
    docker_on_every_image,
) -> None:
    """A child in a session of its own keeps the pipes of a streamed command:
    the answer comes at the timeout and a grace, as unstreamed, and no relay, capture or copy of the shell helper's is left (``kill_tree``
    reaches a relay's ``dd``, a grandchild)."""
    command = "echo started; setsid sleep 300 & sleep 100"
    async with await open_session(docker_on_every_image, exec_channel="shell") as session:
        box = session.sandbox
        before = await box.execute_as_root(COUNT_ROOT_COPIES)
        with anyio.fail_after(GUARD_SECONDS):
            plain = await box.execute(command, timeout_seconds=2)
            with listen_output(lambda _stream, _line: None):
                streamed = await box.execute(command, timeout_seconds=2)
        await anyio.sleep(0.5)
        after = await box.execute_as_root(COUNT_ROOT_COPIES)
        assert (await box.execute("echo on")).stdout == "on\n"
    for result in (plain, streamed):
        # what had arrived when the captures were killed: "started", or
        # nothing if it was still in a capture's dd (either way, never cut)
        assert (result.exit_code, result.timed_out) == (124, True), result
        assert result.stdout in ("started\n", "") and not result.output_truncated, result
    assert int(after.stdout) <= int(before.stdout), (before.stdout, after.stdout)


async def test_the_runners_own_root_commands_stream_nothing(tmp_path, request) -> None:
    """Review 24's U4: with ``-v`` the hand-over's ``handed``, the process
    sweep's ``killed:0`` and the OOM probe's ``oom_kill 0`` showed as a
    step's output.  The runner's own root commands stream nothing."""
    backend = on_image(request, tmp_path, "full")
    async with await open_session(backend) as session:
        box = session.sandbox
        seen: list[tuple[str, str]] = []
        with anyio.fail_after(GUARD_SECONDS), listen_output(lambda s, line: seen.append((s, line))):
            await box.execute("echo mine")
            assert await box.mark_processes() is not None
            await box.end_processes()
            probed = await box.execute_as_root("echo probe")
        assert probed.stdout == "probe\n"  # the result is whole; only the stream is quiet
        assert seen == [("stdout", "mine")]
    assert backend.leftovers() == []
