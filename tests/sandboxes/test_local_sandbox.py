"""What only the local sandbox does: host isolation of HOME, env and paths."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest

import runner as agents
from runner.sandboxes.docker.engine import process_start_time
from runner.sandboxes.local import DangerousLocalWarning, _group_exists, _groups_running

pytestmark = pytest.mark.anyio


def test_construction_warns_that_there_is_no_isolation() -> None:
    with pytest.warns(DangerousLocalWarning, match="no isolation"):
        agents.DangerousLocalSandbox()


def test_it_has_no_network_option() -> None:
    with pytest.raises(TypeError, match="network"):
        agents.DangerousLocalSandbox(network=agents.Network.none())  # type: ignore[call-arg]


async def test_home_is_a_per_session_folder_so_global_git_config_stays_inside(
    local_backend, tmp_path
) -> None:
    fake_home = tmp_path / "my-home"
    fake_home.mkdir()
    os.environ["HOME"], saved = str(fake_home), os.environ["HOME"]
    try:
        agent = agents.Agent(model="m", environment=local_backend.environment())
        async with await agent.start_session() as session:
            result = await session.sandbox.execute(
                'git config --global user.name "Sandbox Bot" && echo "$HOME"'
            )
            assert result.exit_code == 0, result.stderr
            home = Path(result.stdout.strip())
            assert home.is_relative_to(local_backend.temp_dir)
            assert (home / ".gitconfig").read_text().count("Sandbox Bot") == 1
    finally:
        os.environ["HOME"] = saved
    assert list(fake_home.iterdir()) == []


async def test_the_host_environment_is_not_passed_on(local_backend, monkeypatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "sk-secret-value")
    env = local_backend.environment(env={"VISIBLE": "yes"})
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute("env")
    assert "sk-secret-value" not in result.stdout
    assert "VISIBLE=yes" in result.stdout
    assert "PATH=" in result.stdout


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/hostname", "a/../../x"])
async def test_paths_outside_the_workspace_are_refused(local_backend, path) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        with pytest.raises(PermissionError, match="outside the sandbox workspace"):
            await session.sandbox.read_file(path)
        with pytest.raises(PermissionError, match="outside the sandbox workspace"):
            await session.sandbox.write_file(path, "x")


async def test_a_symlink_pointing_out_of_the_workspace_is_refused(local_backend) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        await session.sandbox.execute("ln -s /etc/passwd passwd")
        with pytest.raises(PermissionError):
            await session.sandbox.read_file("passwd")


async def test_the_workspace_is_removed_at_close_even_with_read_only_files(local_backend) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        await session.sandbox.execute("mkdir -p ro/sub && touch ro/sub/f && chmod -R a-w ro")
        root = session.sandbox.root
        assert root.exists()
    assert not root.exists()


async def test_background_processes_are_killed_at_close(local_backend) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        await session.sandbox.execute("sleep 300 >/dev/null 2>&1 & echo $! > pid")
        pid = int((await session.sandbox.read_file("pid")).decode())
        started = process_start_time(pid)
        assert started is not None and "sleep" in Path(f"/proc/{pid}/cmdline").read_text()
    status = Path(f"/proc/{pid}/status")

    def dead() -> bool:
        """Gone, a zombie, or its pid already reused by another process."""
        if process_start_time(pid) not in (None, started):
            return True
        try:
            return "\nState:\tZ" in status.read_text()
        except FileNotFoundError:
            return True

    # SIGKILL is sent at close, and close returns once the process is gone
    # (the kernel ends it when it next runs: on a loaded machine, later).
    assert dead(), status.read_text()


def test_a_killed_process_not_yet_reaped_runs_nothing() -> None:
    """What close waits for: a group counts as running until its processes
    are dead; a zombie (killed, its parent has not reaped it) is dead."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        assert _groups_running({process.pid, 2**22 + 7}) == {process.pid}
        os.killpg(process.pid, signal.SIGKILL)
        zombie = Path(f"/proc/{process.pid}/stat")
        while b") Z " not in zombie.read_bytes():
            time.sleep(0.01)
        assert _group_exists(process.pid)  # the zombie still holds its group
        assert _groups_running({process.pid}) == set()
    finally:
        process.kill()
        process.wait()
    assert _groups_running({process.pid}) == set()


def _running_with_argv(argv: bytes) -> list[int]:
    """The processes (zombies excepted) whose command line is ``argv``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and (entry / "cmdline").read_bytes() == argv
                and ") Z " not in (entry / "stat").read_text()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def test_a_command_cancelled_as_it_starts_leaves_nothing_running(local_backend) -> None:
    """A cancellation (a ``DELETE`` during ``on_create``) at any moment of a
    command's start: nothing of it runs on.  One that came while asyncio
    connected the pipes of a process already running left the group unknown
    to the sandbox; asyncio killed the leader alone, and the command ran on,
    orphaned (CI's red in test_serve_cancel).  Cancelled at 60 moments."""
    seconds = f"{600 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6}"
    argv = f"sleep\0{seconds}\0".encode()
    try:
        async with await agents.Agent(
            model="m", environment=local_backend.environment()
        ).start_session() as session:
            for step in range(60):
                with anyio.move_on_after(step * 0.0005):
                    await session.sandbox.execute(f"exec sleep {seconds}")
                await session.sandbox.end_processes()
                assert _running_with_argv(argv) == [], f"cancelled after {step * 0.5} ms"
    finally:
        for pid in _running_with_argv(argv):
            os.kill(pid, signal.SIGKILL)


async def test_finished_commands_leave_no_process_group_to_kill_later(local_backend) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        await session.sandbox.execute("true")
        assert session.sandbox._process_groups == set()
        await session.sandbox.execute("sleep 300 >/dev/null 2>&1 &")
        assert len(session.sandbox._process_groups) == 1


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE), as an attacker would."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, bytes(a), at_fdcwd, bytes(b), rename_exchange) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


@pytest.fixture
def outside(tmp_path) -> Path:
    """A host folder beside the sandboxes, holding a file no sandbox may read or change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_bytes(b"OUTSIDE")
    return folder


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "renameat2"), reason="needs Linux renameat2")
async def test_swapping_a_path_for_a_symlink_mid_call_never_leaves_the_workspace(
    local_backend, outside
) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        box = session.sandbox
        workspace = Path(box.workspace)
        (workspace / "d").mkdir()
        (workspace / "d" / "secret.txt").write_bytes(b"inside")
        (workspace / "alt").symlink_to(outside)
        (workspace / "f").write_bytes(b"inside")
        (workspace / "g").symlink_to(outside / "secret.txt")
        stop = threading.Event()

        def swap() -> None:  # "d" and "f" are a real folder/file, then a symlink out, ...
            while not stop.is_set():
                _exchange(workspace / "d", workspace / "alt")
                _exchange(workspace / "f", workspace / "g")

        swapper = threading.Thread(target=swap)
        swapper.start()
        outcomes: list[object] = []
        try:
            for _ in range(400):
                for call in (
                    lambda: box.read_file("d/secret.txt"),
                    lambda: box.read_file("f"),
                    lambda: box.write_file("d/new.txt", "written"),
                    lambda: box.write_file("f", "inside"),
                ):
                    try:
                        outcomes.append(await call())
                    except OSError as exc:  # refusing is fine; only escaping is not
                        outcomes.append(type(exc))
        finally:
            stop.set()
            swapper.join()
    assert b"OUTSIDE" not in outcomes
    assert {b"inside", PermissionError} <= set(outcomes)  # both states were hit
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]
    assert (outside / "secret.txt").read_bytes() == b"OUTSIDE"


async def test_a_symlink_anywhere_in_the_path_is_refused_even_for_writes(
    local_backend, outside
) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        box = session.sandbox
        await box.execute(f"ln -s {outside} out && ln -s {outside}/secret.txt file && mkdir in")
        await box.execute("ln -s ../in in/loop")  # points inside: refused all the same
        for path in ("out/secret.txt", "file", "in/loop/x", "out/new/deeper.txt"):
            with pytest.raises(PermissionError, match="is a symlink"):
                await box.read_file(path)
            with pytest.raises(PermissionError, match="is a symlink"):
                await box.write_file(path, "written")
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]
    assert (outside / "secret.txt").read_bytes() == b"OUTSIDE"


async def test_a_fifo_or_a_missing_file_is_a_clear_error_not_a_hang(local_backend) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        await session.sandbox.execute("mkfifo pipe")
        fifo = Path(session.sandbox.workspace) / "pipe"
        # Were read_file stuck opening the FIFO, this writer would free it (and the test fail).
        release = threading.Timer(5, lambda: os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)))
        release.start()
        try:
            with pytest.raises(OSError, match="not a regular file"):
                await session.sandbox.read_file("pipe")
        finally:
            release.cancel()
        with pytest.raises(FileNotFoundError):
            await session.sandbox.read_file("no/such/file")
