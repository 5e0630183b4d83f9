"""What only the local sandbox does: host isolation of HOME, env and paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import runner as agents
from runner.sandboxes.local import DangerousLocalWarning

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
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "\nState:\tZ" in status.read_text()


async def test_finished_commands_leave_no_process_group_to_kill_later(local_backend) -> None:
    async with await agents.Agent(
        model="m", environment=local_backend.environment()
    ).start_session() as session:
        await session.sandbox.execute("true")
        assert session.sandbox._process_groups == set()
        await session.sandbox.execute("sleep 300 >/dev/null 2>&1 &")
        assert len(session.sandbox._process_groups) == 1
