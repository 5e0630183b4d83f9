"""A hostile agent inside a Docker sandbox attacks the exec channel (real containers).

By default commands run as the sandbox user, who cannot reach the root
helper at all (``test_hostile_agent.py`` shows that).  These tests play the
stronger agent of a ``user: root`` sandbox, root in the container, against
the two defences that remain: the helper seals itself (non-dumpable), so no
command can reach its stream, memory or stdin; and the runner checks every
answer, for when a command can reach the stream anyway (CAP_SYS_PTRACE
granted, no ctypes in the image).  The ``unsealed`` fixture runs the helper
without the first, to test the second on its own.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import time
from typing import Any

import anyio
import pytest

import runner as agents
from runner.sandboxes.docker import channel as _exec_channel

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture(autouse=True)
def no_thread_dies(monkeypatch) -> Any:
    """A bad frame must end the channel, not kill its reader with a traceback."""
    died: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    yield
    assert [f"{d.thread.name}: {d.exc_type.__name__}: {d.exc_value}" for d in died] == []


def patch_python_helper(monkeypatch, old: str, new: str) -> None:
    """Start the Python helper with ``old`` replaced by ``new`` in its code."""
    original = _exec_channel.helper_source
    source = original("exec_helper.py")
    assert old in source
    patched = source.replace(old, new)
    monkeypatch.setattr(
        _exec_channel,
        "helper_source",
        lambda name="exec_helper.py": patched if name == "exec_helper.py" else original(name),
    )


@pytest.fixture
def unsealed(monkeypatch) -> None:
    """The helper without ``seal()``: commands can open its fds, as with CAP_SYS_PTRACE."""
    patch_python_helper(monkeypatch, "SEALED = seal()", "SEALED = False")


def frame(header: Any, body: bytes = b"") -> bytes:
    data = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack(">I", len(data)) + data + struct.pack(">Q", len(body)) + body


#: Runs in the container as the agent: opens the helper's stdin and stdout
#: through /proc, then answers in its place.  "guess": blind, forged exec
#: answers for the ids 1..199 (the next ones, were ids sequential).
#: "steal": stops the helper, takes the next request off its stdin, answers
#: it (exit 0 and "forged"), lets the helper go on.
FORGER = r"""
import json, os, select, signal, struct, sys, time

helper, attack = int(sys.argv[1]), sys.argv[2]


def frame(header, body=b""):
    data = json.dumps(header).encode()
    return struct.pack(">I", len(data)) + data + struct.pack(">Q", len(body)) + body


def read_exact(fd, size):
    data = b""
    while len(data) < size:
        data += os.read(fd, size - len(data))
    return data


EXEC = {"exit_code": 0, "timed_out": False, "stdout_total": 7, "stdout_len": 7, "stderr_total": 0}
try:
    out = os.open("/proc/%d/fd/1" % helper, os.O_WRONLY)
    stolen = os.open("/proc/%d/fd/0" % helper, os.O_RDONLY)
except OSError as exc:
    sys.exit("blocked: %s" % exc)
print("opened", flush=True)
time.sleep(0.5)  # the command that started us gets its answer first
if attack == "guess":
    os.write(out, b"".join(frame(dict(EXEC, id=i), b"forged\n") for i in range(1, 200)))
    sys.exit()
os.kill(helper, signal.SIGSTOP)
try:
    if select.select([stolen], [], [], 20)[0]:
        request = json.loads(read_exact(stolen, struct.unpack(">I", read_exact(stolen, 4))[0]))
        read_exact(stolen, struct.unpack(">Q", read_exact(stolen, 8))[0])
        answer = EXEC if request["op"] == "exec" else {"ok": True}
        os.write(out, frame(dict(answer, id=request["id"]), b"forged\n"))
        print("answered", request["op"], flush=True)
finally:
    os.kill(helper, signal.SIGCONT)
"""

START_FORGER = "setsid python3 forge.py $PPID {} > forge.log 2>&1 < /dev/null &"


@pytest.mark.parametrize("op", ["exec", "read"])
@pytest.mark.parametrize("seal", ["prctl", "no ctypes"])
async def test_a_command_cannot_answer_in_the_helpers_place(
    docker_backend, monkeypatch, seal, op
) -> None:
    if seal == "no ctypes":  # as in a Python built without it: the setegid way
        patch_python_helper(monkeypatch, "import ctypes", "import _none")
    env = docker_backend.environment(user="root")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        await box.write_file("forge.py", FORGER)
        await box.write_file("real.txt", "real\n")
        await box.execute(START_FORGER.format("steal"))
        await anyio.sleep(1.5)  # had it opened the helper's fds, the helper would be stopped
        with anyio.fail_after(30):
            if op == "exec":
                result = await box.execute("false")
                assert (result.exit_code, result.stdout) == (1, "")
            else:
                assert await box.read_file("real.txt") == b"real\n"
        log = await box.execute("cat forge.log")
        assert "blocked: [Errno 13] Permission denied" in log.stdout + log.stderr
        assert box.channel is not None


PROBE = r"""
import ctypes, os, sys

helper = int(sys.argv[1])
for name, mode in (("fd/0", os.O_RDONLY), ("fd/1", os.O_WRONLY), ("mem", os.O_RDONLY)):
    try:
        os.close(os.open("/proc/%d/%s" % (helper, name), mode))
        print(name, "opened")
    except OSError as exc:
        print(name, exc.strerror)
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, helper, 0, 0) == 0:  # PTRACE_ATTACH
    os.waitpid(helper, 0)
    libc.ptrace(17, helper, 0, 0)  # PTRACE_DETACH
    print("ptrace attached")
else:
    print("ptrace", os.strerror(ctypes.get_errno()))
"""


async def test_a_command_cannot_open_read_or_trace_the_helper(docker_backend) -> None:
    env = docker_backend.environment(user="root")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        await session.sandbox.write_file("probe.py", PROBE)
        with anyio.fail_after(30):
            probe = await session.sandbox.execute("python3 probe.py $PPID")
    assert probe.stdout.splitlines() == [
        "fd/0 Permission denied",
        "fd/1 Permission denied",
        "mem Permission denied",
        "ptrace Operation not permitted",
    ]


async def test_blind_forged_answers_end_the_channel(docker_backend, unsealed) -> None:
    events: list[dict] = []
    env = docker_backend.environment(user="root")
    with agents.listen(events.append):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            await box.write_file("forge.py", FORGER)
            await box.write_file("real.txt", "real\n")
            await box.execute(START_FORGER.format("guess"))
            started = time.monotonic()
            with anyio.fail_after(30):
                result = await box.execute("sleep 10; false", timeout_seconds=20)
            assert result.exit_code == 255
            assert "exec channel was lost" in result.stderr
            assert "an answer to no request in flight" in result.stderr
            assert "forged" not in result.stdout
            assert time.monotonic() - started < 5  # at the forgery (0.5 s), not the command's end
            assert box.channel is None
            assert (await box.execute("false")).exit_code == 1
            assert await box.read_file("real.txt") == b"real\n"
            assert (await box.execute("cat forge.log")).stdout == "opened\n"  # it got through
    assert [e["event"] for e in events].count("exec_channel_lost") == 1


EXEC_FIELDS = {"exit_code": 0, "timed_out": False, "stdout_total": 0, "stdout_len": 0}
BAD_FRAMES = {
    "not JSON": lambda id_: frame(b"\xff{ not json"),
    "a JSON list": lambda id_: frame(b"[1, 2]"),
    "an unhashable id": lambda id_: frame({"id": [id_]}),
    "JSON nested 30000 deep": lambda id_: frame(b"[" * 30000 + b"]" * 30000),
    "a missing field": lambda id_: frame({"id": id_, "exit_code": 0, "timed_out": False}),
    "exit_code a string": lambda id_: frame(
        {**EXEC_FIELDS, "id": id_, "exit_code": "0", "stderr_total": 0}
    ),
    "timed_out a number": lambda id_: frame(
        {**EXEC_FIELDS, "id": id_, "timed_out": 0, "stderr_total": 0}
    ),
    "stdout longer than the body": lambda id_: frame(
        {**EXEC_FIELDS, "id": id_, "stdout_len": 100, "stdout_total": 100, "stderr_total": 0},
        b"forged\n",
    ),
    "an output frame for a command that did not ask": lambda id_: frame(
        {"id": id_, "output": "stdout", "gap": False}, b"forged\n"
    ),
    "an id not in flight": lambda id_: frame(
        {**EXEC_FIELDS, "id": id_ ^ 1, "stdout_len": 7, "stdout_total": 7, "stderr_total": 0},
        b"forged\n",
    ),
}
INJECT = (
    "import base64, sys; f = open('/proc/%s/fd/1' % sys.argv[1], 'wb'); "
    "f.write(base64.b64decode(sys.argv[2])); f.close()"
)


@pytest.mark.parametrize("bad", BAD_FRAMES)
async def test_a_bad_frame_ends_the_channel_at_once(docker_backend, docker_client, unsealed, bad):
    """The worst case: the forger knows the id in flight (it read the helper's
    memory), so only the checks of each field stand between it and the runner."""
    events: list[dict] = []
    env = docker_backend.environment(user="root")
    with agents.listen(events.append):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            helper_pid = (await box.execute("echo $PPID")).stdout.strip()
            container = docker_client.containers.get(box.container_id)
            results: list[Any] = []
            # One command in flight, its id read from the runner's side.
            async with anyio.create_task_group() as tg:

                async def sleeper() -> None:
                    results.append(await box.execute("sleep 30", timeout_seconds=60))
                    results.append(time.monotonic())

                tg.start_soon(sleeper)
                while box.channel is None or len(box.channel._pending) != 1:
                    await anyio.sleep(0.01)
                (request_id,) = box.channel._pending
                payload = base64.b64encode(BAD_FRAMES[bad](request_id)).decode()
                injected = await anyio.to_thread.run_sync(
                    container.exec_run, ["python3", "-c", INJECT, helper_pid, payload]
                )
                assert injected.exit_code == 0, injected.output
                sent = time.monotonic()
                with anyio.fail_after(20):
                    while len(results) < 2:
                        await anyio.sleep(0.01)
            result, answered = results
            assert result.exit_code == 255, result
            assert "exec channel was lost" in result.stderr
            assert answered - sent < 2.0  # not the command's 30 s, nor its 75 s deadline
            assert (await box.execute("echo after")).stdout == "after\n"
    assert [e["event"] for e in events].count("exec_channel_lost") == 1


#: Each makes ``target`` something the helper (or, without one, the file
#: script run as the sandbox user) must refuse at once.  (A symlink to a
#: regular file is followed, with the sandbox user's rights: the
#: container is the sandbox, so a link cannot lead out of it.)
TRAPS = {
    "a FIFO": "mkfifo target",
    "a FIFO with a reader": "mkfifo target; (setsid cat target </dev/null >/dev/null 2>&1 &); sleep 0.5",
    "a symlink to a FIFO": "mkfifo fifo; ln -s fifo target",
}


@pytest.mark.parametrize("op", ["read", "write"])
@pytest.mark.parametrize("trap", TRAPS)
@pytest.mark.parametrize("path", ["channel", "per-command"])
async def test_file_traps_are_refused_at_once(docker_backend, trap, op, image, path) -> None:
    """On every image: its helper's path (Python on full, the shell helper on
    the others) and the per-command one."""
    _kind, tag = image
    env = docker_backend.environment(image=tag, exec_channel=path == "channel")
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        assert (await box.execute(TRAPS[trap])).exit_code == 0
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(OSError) as refused:
            if op == "read":
                await box.read_file("target")
            else:
                await box.write_file("target", "forged\n")
        took = time.monotonic() - started
        assert took < 2.0
        assert "not a regular file" in str(refused.value)
        assert (box.channel is not None) == (path == "channel")  # and it still works:
        assert (await box.execute("cat real.txt 2>/dev/null; echo ok")).stdout in (
            "original\nok\n",
            "ok\n",
        )
        await box.write_file("plain.txt", "plain\n")
        assert await box.read_file("plain.txt") == b"plain\n"


#: Runs in the container: swaps ``target`` between a regular file, a FIFO and
#: a symlink, each step one atomic rename, as fast as it can (for 60 s).
SWAPPER = r"""
import os, time

os.chdir("/workspace")
with open("regular", "w") as f:
    f.write("data\n")
os.mkfifo("fifo")
end = time.time() + 60
while time.time() < end:
    for name in ("regular", "fifo", None):
        if name:
            os.link(name, "next")
        else:
            os.symlink("fifo", "next")
        os.rename("next", "target")
"""


async def test_swapping_the_file_during_read_file_never_hangs(docker_backend) -> None:
    env = docker_backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        await box.write_file("swap.py", SWAPPER)
        await box.execute("setsid python3 swap.py </dev/null >swap.log 2>&1 &")
        while (await box.execute("test -e target")).exit_code:
            await anyio.sleep(0.05)
        seen: dict[str, int] = {}
        with anyio.fail_after(60):
            for _ in range(1000):
                try:
                    outcome = repr(await box.read_file("target"))
                except OSError as exc:
                    outcome = str(exc).split(": ")[1]
                seen[outcome] = seen.get(outcome, 0) + 1
        # Every read either returned the data or failed at once with an error
        # (not a regular file, or a link swapped in after the path was
        # resolved); both were met, and nothing ever hung.
        assert [o for o in seen if o.startswith("b")] == ["b'data\\n'"], seen
        assert "not a regular file" in seen, seen
        assert box.channel is not None


async def test_forged_frames_end_the_channel_instead_of_filling_memory(
    docker_backend, unsealed
) -> None:
    forge = (
        "python3 -c 'import json, struct, sys; "
        'h = json.dumps({"id": 999}).encode(); '
        'f = open("/proc/%s/fd/1" % sys.argv[1], "wb"); '
        'f.write(struct.pack(">I", len(h)) + h + struct.pack(">Q", 1 << 40)); f.flush()\' $PPID; '
        "cat /dev/zero > /proc/$PPID/fd/1"
    )
    events: list[dict] = []
    # This process's peak RSS, reset (VmHWM through clear_refs): a comparison
    # of ru_maxrss could not fail unless this test set a new lifetime peak.
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")
    before = peak_rss_kib()
    env = docker_backend.environment(user="root")
    with agents.listen(events.append):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            with anyio.fail_after(60):
                forged = await session.sandbox.execute(forge, timeout_seconds=5)
            assert forged.exit_code == 255
            after = await session.sandbox.execute("echo fine")
    assert after.stdout == "fine\n"
    assert [e["event"] for e in events].count("exec_channel_lost") == 1
    assert peak_rss_kib() - before < 200_000  # KiB: far below the 1 TiB frame announced


def peak_rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
