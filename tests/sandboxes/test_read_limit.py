"""The agent's ``read_file`` tool keeps its 1 MiB limit inside the read itself
(issue 26, finding 1).

The tool used to ask ``stat -L`` for the size first, then read the path
again: the two resolved ``a/../big`` differently (the shell follows the link
``a``, the read drops ``a/..`` from the text), so ``stat`` saw a 3-byte file
and the read got a big one; a failing ``stat`` (``b`` a dangling link) let the
read go on; and the whole file, up to ``max_file_bytes`` (1 GiB), was then
spooled, loaded and decoded at once.  Each test plays the agent, asks the tool
for the big file and checks the answer is the refusal and that the runner's
peak memory (traced: tracemalloc sees every bytes and str object of every
thread) stays bounded by the limit, not by the file.
"""

from __future__ import annotations

import tracemalloc

import pytest

import runner as agents
from runner.models.turns import PreparedCall, run_tool
from runner.sandboxes.base import FileTooLargeError

pytestmark = pytest.mark.anyio

#: The big file: sparse (free for the agent), one emoji at its end (decoded
#: whole, it made a 4-bytes-a-character str).  64 MiB keeps a failing run
#: cheap; the bench (bench/read_limit.py) reads 1 GiB.
BIG = 64 << 20
#: ``a`` leads to sub/deep, so the shell's ``a/../big`` is sub/big (3 bytes);
#: ``b`` leads nowhere, so ``stat`` of ``b/../big`` fails.  The read of either
#: path gets the workspace's ``big``.
PLANT = (
    "mkdir -p sub/deep && printf abc > sub/big && ln -s sub/deep a && ln -s nowhere/deep b"
    f" && truncate -s {BIG} big && printf '\\360\\237\\230\\200' >> big"
    " && printf 'small file\\n' > small.txt"
)
#: Peak traced memory of one refused read: the limit's bytes, a few pieces on
#: their way, never the file.
PEAK_BOUND = 8 << 20


async def read_tool(sandbox: agents.Sandbox, path: str) -> tuple[agents.ToolCallRecord, int]:
    """The tool's answer for ``path``, and the peak traced memory it took."""
    call = PreparedCall(agents.ToolCall("c1", "read_file", "{}"), "read_file", {"path": path})
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        record = await run_tool(sandbox, call)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    return record, peak


async def check_the_limit_holds(sandbox: agents.Sandbox) -> None:
    planted = await sandbox.execute(PLANT)
    assert planted.exit_code == 0, planted.stderr
    shell_sees = await sandbox.execute("stat -L -c %s a/../big; stat -L -c %s b/../big")
    assert shell_sees.stdout.splitlines()[0] == "3", shell_sees  # the mismatch is real
    assert shell_sees.exit_code != 0  # and stat of b/../big fails
    await read_tool(sandbox, "small.txt")  # warm: a first read starts what later ones reuse
    for path in ("a/../big", "b/../big", "big"):
        record, peak = await read_tool(sandbox, path)
        assert record.is_error, f"{path}: read {len(record.output)} characters: no refusal"
        assert record.output.startswith(f"error: {path} is "), record.output
        assert "read parts of it with bash" in record.output, record.output
        assert peak < PEAK_BOUND, f"{path}: peak traced memory {peak / (1 << 20):.1f} MiB"
    record, _ = await read_tool(sandbox, "small.txt")
    assert (record.is_error, record.output) == (False, "small file\n")


@pytest.mark.docker
async def test_the_read_tool_refuses_past_its_limit_on_every_backend(
    backend_on_every_image,
) -> None:
    """Local, and Docker on the full and python3-minimal images (the Python
    helper) and busybox (the shell helper).  Before: on every one, the tool
    returned the decoded 64 MiB file for ``a/../big`` and ``b/../big``
    (traced peak 300+ MiB)."""
    env = backend_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        await check_the_limit_holds(session.sandbox)


@pytest.mark.docker
@pytest.mark.parametrize("kind", ["full", "busybox"])
async def test_the_read_tool_refuses_past_its_limit_on_the_per_command_path(
    docker_backend, image_tags, kind
) -> None:
    """Without a helper, the read is ``head -c LIMIT+1`` run as the sandbox user."""
    env = docker_backend.environment(image=image_tags[kind], exec_channel=False)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        assert session.sandbox.channel is None
        await check_the_limit_holds(session.sandbox)


@pytest.mark.docker
async def test_a_limited_read_returns_the_file_up_to_its_limit(backend_on_every_image) -> None:
    """``read_file_limited``: a file of exactly the limit is returned whole, one
    byte more is refused with its size; the limit is the read's, not
    ``max_file_bytes``."""
    env = backend_on_every_image.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        await box.execute(
            "head -c 1000 /dev/urandom > exact.bin && head -c 1001 exact.bin > more.bin"
        )
        await box.execute("cat exact.bin exact.bin > two.bin")
        exact = await box.read_file_limited("exact.bin", 1000)
        assert len(exact) == 1000 and exact == await box.read_file("exact.bin")
        with pytest.raises(
            FileTooLargeError, match=r"over the limit of this read \(1000\)"
        ) as info:
            await box.read_file_limited("two.bin", 1000)
        assert info.value.size == 2000
        with pytest.raises(FileNotFoundError):
            await box.read_file_limited("missing.bin", 1000)
