"""What ctx.sandbox does, identically on the local sandbox and in Docker."""

from __future__ import annotations

import pytest

import runner as agents

pytestmark = pytest.mark.anyio


@pytest.fixture
async def sandbox(backend):
    agent = agents.Agent(model="m", environment=backend.environment(default_exec_timeout_seconds=5))
    async with await agent.start_session() as session:
        yield session.sandbox


async def test_execute_separates_stdout_and_stderr_and_keeps_the_exit_code(sandbox) -> None:
    result = await sandbox.execute("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.timed_out is False
    assert result.duration_seconds > 0


async def test_commands_run_in_the_workspace(sandbox) -> None:
    result = await sandbox.execute("pwd")
    assert result.stdout.strip() == sandbox.workspace


async def test_the_shell_is_bash_when_present(sandbox) -> None:
    result = await sandbox.execute('echo "$BASH_VERSION"')
    assert result.stdout.strip() != ""


async def test_env_and_cwd_apply_to_one_command(sandbox) -> None:
    await sandbox.execute("mkdir -p sub/dir")
    result = await sandbox.execute(
        'pwd; echo "$GREETING"', env={"GREETING": "hi there"}, cwd="sub/dir"
    )
    lines = result.stdout.splitlines()
    assert lines[0].endswith("/sub/dir")
    assert lines[1] == "hi there"
    again = await sandbox.execute('echo "[$GREETING]"')
    assert again.stdout == "[]\n"


async def test_a_timeout_kills_the_command_and_its_children(sandbox) -> None:
    # A background grandchild records its pid, then everything sleeps past the timeout.
    command = "sleep 60 & echo $! > child.pid; sleep 60"
    result = await sandbox.execute(command, timeout_seconds=1)
    assert result.exit_code == 124
    assert result.timed_out is True
    assert 1 <= result.duration_seconds < 10
    pid = (await sandbox.read_file("child.pid")).decode().strip()
    # Gone, or a zombie waiting for its reaper: either way no longer running.
    state = await sandbox.execute(f"grep '^State:' /proc/{pid}/status 2>/dev/null || echo gone")
    assert state.stdout.split()[:2] in (["gone"], ["State:", "Z"])


async def test_a_command_that_ignores_sigterm_is_killed_too(sandbox) -> None:
    result = await sandbox.execute("trap '' TERM; sleep 60", timeout_seconds=1)
    assert (result.exit_code, result.timed_out) == (124, True)
    assert result.duration_seconds < 10


async def test_the_default_timeout_comes_from_the_sandbox(backend) -> None:
    env = backend.environment(default_exec_timeout_seconds=1)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute("sleep 30")
    assert result.timed_out is True


async def test_a_quick_exit_124_is_not_a_timeout(sandbox) -> None:
    result = await sandbox.execute("exit 124")
    assert (result.exit_code, result.timed_out) == (124, False)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
async def test_a_nonsense_timeout_is_refused(sandbox, timeout) -> None:
    with pytest.raises(ValueError, match="timeout_seconds must be a positive number"):
        await sandbox.execute("true", timeout_seconds=timeout)


async def test_write_then_read_round_trips_bytes_and_creates_parents(sandbox) -> None:
    payload = bytes(range(256)) * 100
    await sandbox.write_file("deep/er/data.bin", payload)
    assert await sandbox.read_file("deep/er/data.bin") == payload
    listing = await sandbox.execute("wc -c < deep/er/data.bin")
    assert listing.stdout.strip() == str(len(payload))


async def test_write_file_accepts_text_as_utf8(sandbox) -> None:
    await sandbox.write_file("notes.md", "ünïcødé ☃\n")
    result = await sandbox.execute("cat notes.md")
    assert result.stdout == "ünïcødé ☃\n"


async def test_write_file_replaces_an_existing_file(sandbox) -> None:
    await sandbox.write_file("a.txt", "long content here")
    await sandbox.write_file("a.txt", "short")
    assert await sandbox.read_file("a.txt") == b"short"


async def test_files_written_by_commands_are_readable(sandbox, backend) -> None:
    await sandbox.execute("printf 'x\\ny' > made.txt && ln -s made.txt link.txt")
    assert await sandbox.read_file("made.txt") == b"x\ny"
    if backend.name == "local":  # on the host it follows no symlink, even one that stays inside
        with pytest.raises(PermissionError, match="'link.txt' is a symlink"):
            await sandbox.read_file("link.txt")
    else:
        assert await sandbox.read_file("link.txt") == b"x\ny"


async def test_reading_a_missing_file_raises_file_not_found(sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("does-not-exist.txt")


async def test_reading_a_directory_raises_is_a_directory(sandbox) -> None:
    await sandbox.execute("mkdir adir")
    with pytest.raises(IsADirectoryError):
        await sandbox.read_file("adir")


async def test_each_session_gets_a_fresh_workspace(backend) -> None:
    agent = agents.Agent(model="m", environment=backend.environment())
    async with await agent.start_session() as first:
        await first.sandbox.write_file("left-over.txt", "x")
    async with await agent.start_session() as second:
        result = await second.sandbox.execute("ls -A")
    assert result.stdout == ""
    assert first.sandbox is not second.sandbox


async def test_a_missing_cwd_is_an_exit_code_not_an_exception(sandbox) -> None:
    result = await sandbox.execute("pwd", cwd="no/such/dir")
    assert result.exit_code == 126
    assert result.timed_out is False
