"""The agent traces the shell helper's user-side file processes (ptrace).

For each read_file and write_file the shell helper (``helpers/exec_helper.sh``)
runs a small script as the sandbox user, the agent's own uid: the agent may
ptrace it, inject a fork, and keep writing through the descriptors a stopped
child of it holds.  Those descriptors are FIFOs that root copies from with a
bound, so: no answer is forged or stretched (the channel never sees a frame
the helper did not mean to send), no root file fills (the root tmpfs stays
small), and a read gives the file's bytes or an OSError.  One thing the
agent keeps: a read's bytes come from its side, so after the file's bytes
it may add its own, up to the piece's bound (as it could write them into
the file itself); those must be its bytes, nothing of root's.

``tests/data/ptrace_attacker.py`` runs the attack (it needs python3: the
full image, with the shell helper asked for) while the runner reads a file
again and again; its log must show that it caught a process and wrote
through it, so the test cannot pass by the attack doing nothing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import runner as agents

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

ATTACKER = Path(__file__).parents[1] / "data" / "ptrace_attacker.py"
LOG = "/tmp/ptrace-attack.log"
#: One piece (under FILE_CHUNK_BYTES), so its end, where the attacker's
#: bytes may follow the file's, is in every read it catches.
FILE_BYTES = 12 << 20
#: Far under the 512 MiB tmpfs, far over what honest reads leave there.
ROOT_TMPFS_BOUND = 64 << 20


def attacker_block() -> bytes:
    """The 64 KiB the attacker sends with every write."""
    spec = importlib.util.spec_from_file_location("ptrace_attacker", ATTACKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BLOCK


def only_attackers(extra: bytes, block: bytes) -> bool:
    """Whether ``extra`` is the attacker's writes one after the other (each
    ``block``, or its start where root's bound cut it)."""
    at = 0
    while at < len(extra):
        piece = extra[at : at + len(block)]
        if piece == block[: len(piece)]:
            same = len(piece)
        else:
            pairs = enumerate(zip(piece, block, strict=False))
            same = next(i for i, (x, y) in pairs if x != y)
        if same == 0:
            return False
        at += same
    return True


def outcome(read: Any, payload: bytes, block: bytes) -> str:
    if isinstance(read, OSError):
        return f"OSError ({type(read).__name__}: {read})"
    if read == payload:
        return "exact"
    if read.startswith(payload) and only_attackers(read[len(payload) :], block):
        return f"the file, then {len(read) - len(payload)} bytes of the attacker's"
    at = next((i for i, (a, b) in enumerate(zip(read, payload, strict=False)) if a != b), None)
    at = min(len(read), len(payload)) if at is None else at
    return (
        f"{len(read)} bytes, not the file's {len(payload)}; from byte {at}: {read[at : at + 40]!r}"
    )


async def root(box: Any, command: str) -> str:
    result = await box.execute_as_root(command, timeout_seconds=20)
    if result.exit_code == 255 and "exec channel was lost" in result.stderr:
        # A forged frame ended the channel during it (the test says so
        # below); again, through docker exec.
        result = await box.execute_as_root(command, timeout_seconds=20)
    assert result.exit_code == 0, result
    return result.stdout


async def tmpfs_used(box: Any) -> int:
    """Bytes used on the helper's root-only tmpfs (df, as root)."""
    return int((await root(box, "df -k /run/sandbox-runner | tail -1")).split()[2]) << 10


async def test_a_traced_file_process_cannot_flood_or_forge_answers(
    docker_backend: Any,
) -> None:
    # The attacker's stopped child may hold a piece's FIFO open: root's copy
    # then waits until the runner stops the piece, file_piece_seconds
    # after asking (60 s), plus the helper's 2 s grace, and the read fails
    # with TimeoutError.  That is an allowed outcome; a few seconds instead
    # of 60 (set below) keep the test short without changing it.
    payload, block = os.urandom(FILE_BYTES), attacker_block()
    events: list[dict[str, Any]] = []
    outcomes: list[str] = []
    used: list[int] = []
    started = time.monotonic()
    with agents.listen(events.append):
        env = docker_backend.environment(exec_channel="shell")
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            box = session.sandbox
            box.file_piece_seconds = 4.0
            assert box.channel.kind == "shell"
            await box.write_file("big.bin", payload)
            await box.write_file("attacker.py", ATTACKER.read_bytes())
            # 30 s at most; 1 s of rest after each catch, so that a read it
            # stretched (each piece full: the runner asks for the next) ends.
            run = f"setsid python3 attacker.py {LOG} 30 1 </dev/null >/dev/null 2>&1 & echo started"
            assert (await box.execute(run)).stdout == "started\n"
            with anyio.fail_after(10):
                while not (log := await root(box, f"cat {LOG} 2>/dev/null || true")):
                    await anyio.sleep(0.1)
            attacker = re.match(r"ready (\d+)", log)
            assert attacker, log

            async def sample_tmpfs() -> None:  # while the attack goes on
                while True:
                    used.append(await tmpfs_used(box))
                    await anyio.sleep(0.25)

            # Read while it attacks: until two reads after its first write
            # through a caught process, for 35 s at most.
            async with anyio.create_task_group() as sampler:
                sampler.start_soon(sample_tmpfs)
                after_first_write = 0
                while time.monotonic() - started < 35 and after_first_write < 2:
                    try:
                        read: Any = await box.read_file("big.bin")
                    except OSError as exc:
                        read = exc
                    outcomes.append(outcome(read, payload, block))
                    log = await root(box, f"cat {LOG}")
                    if re.search(r"^wrote [1-9]", log, re.M):
                        after_first_write += 1
                sampler.cancel_scope.cancel()
            await root(box, f"kill -KILL {attacker.group(1)} 2>/dev/null; true")
            used.append(await tmpfs_used(box))
            log = await root(box, f"cat {LOG}")
            lost = [e for e in events if e["event"] == "exec_channel_lost"]
            report = f"reads: {outcomes}\nchannel lost: {lost}\ntmpfs used at most {max(used)} bytes\nattacker:\n{log}"

            # The attack really happened: else the rest proves nothing.
            if not re.search(r"^caught ", log, re.M):
                failed = re.findall(r"^attach .*", log, re.M)
                why = f"ptrace failed: {failed[0]}" if failed else "it saw none"
                pytest.fail(f"the attacker caught no file process ({why})\n{report}")
            if not re.search(r"^wrote [1-9]", log, re.M):
                pytest.fail(f"the attacker wrote nothing through what it caught\n{report}")

            assert not lost, f"a forged frame ended the exec channel: {lost}\n{report}"
            assert box.channel is not None
            assert max(used) < ROOT_TMPFS_BOUND, f"the root tmpfs filled\n{report}"
            good = ("exact", "OSError", "the file, then")
            assert all(o.startswith(good) for o in outcomes), f"a read gave other bytes\n{report}"

            # And the channel serves on, the attacker gone.
            assert (await box.execute("echo ok")).stdout == "ok\n"
            await box.write_file("small.txt", b"small\n")
            assert await box.read_file("small.txt") == b"small\n"
            assert await box.read_file("big.bin") == payload
            assert box.channel is not None
    print(report)
