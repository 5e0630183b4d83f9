"""Paths the rest of the suite did not run (found by the coverage report of
scripts/test): the warm pool's upkeep, the local sandbox's and the test
doubles' error paths, and command-line errors with their messages (through
the installed `runner`, as the other CLI tests)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

import runner as agents
from runner.sandboxes.docker.pool import WarmPool


def test_a_warm_pool_needs_a_size_of_at_least_one() -> None:
    with pytest.raises(ValueError, match="a warm pool needs a size of at least 1"):
        WarmPool(0, make=lambda: 1, discard=lambda item: None)


def test_a_warm_pool_replaces_items_idle_too_long() -> None:
    made: list[int] = []
    discarded: list[int] = []

    def make() -> int:
        made.append(len(made))
        return made[-1]

    pool = WarmPool(1, make=make, discard=discarded.append, max_idle_seconds=0.2)
    try:
        assert pool.wait_ready(10)
        deadline = time.monotonic() + 10
        while not discarded and time.monotonic() < deadline:
            time.sleep(0.05)
        # the first item went stale: discarded, and a new one made in its place
        assert discarded[:1] == [0]
        assert pool.wait_ready(10)
        assert pool.claim() not in discarded
    finally:
        pool.close()


def test_a_warm_pool_retries_a_failed_make_and_counts_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[int] = []

    def make() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("the engine is away")
        return "sandbox"

    with caplog.at_level(logging.WARNING, logger="runner"):
        pool = WarmPool(1, make=make, discard=lambda item: None)
        try:
            assert pool.wait_ready(15)  # after one backoff of a second
            assert pool.failures == 1
            assert pool.claim() == "sandbox"
        finally:
            pool.close()
    assert "warm pool: making a sandbox failed (the engine is away); retrying" in caplog.text


def test_a_warm_pool_logs_a_failed_discard_and_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    def discard(item: str) -> None:
        raise RuntimeError(f"cannot remove {item}")

    pool = WarmPool(2, make=lambda: "box", discard=discard)
    assert pool.wait_ready(10)
    with caplog.at_level(logging.WARNING, logger="runner"):
        pool.close()
    assert caplog.text.count("discarding a pooled sandbox failed: cannot remove box") == 2
    assert len(pool) == 0
    assert not pool.wait_ready(0.1)  # closed: never ready again


def test_an_item_made_while_the_pool_closes_is_discarded() -> None:
    started = threading.Event()
    release = threading.Event()
    discarded: list[str] = []

    def make() -> str:
        started.set()
        release.wait(10)
        return "late"

    pool = WarmPool(1, make=make, discard=discarded.append)
    assert started.wait(10)
    closer = threading.Thread(target=pool.close)
    closer.start()
    deadline = time.monotonic() + 10
    while not pool._closed and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    closer.join(10)
    assert not closer.is_alive()
    assert discarded == ["late"]
    assert pool.claim() is None


def test_wait_ready_gives_up_after_its_timeout() -> None:
    release = threading.Event()
    pool = WarmPool(1, make=lambda: release.wait(10) or "x", discard=lambda item: None)
    try:
        started = time.monotonic()
        assert pool.wait_ready(0.2) is False
        assert time.monotonic() - started < 5
    finally:
        release.set()
        pool.close()


@pytest.mark.anyio
async def test_local_file_access_refuses_what_is_not_a_regular_file_in_the_workspace(
    local_backend,
) -> None:
    environment = local_backend.environment()
    async with await agents.Agent(model="m", environment=environment).start_session() as session:
        sandbox = session.sandbox
        made = await sandbox.execute("mkdir folder && echo text > file && mkfifo pipe")
        assert made.exit_code == 0, made.stderr
        with pytest.raises(NotADirectoryError):
            await sandbox.read_file("file/inside")
        with pytest.raises(IsADirectoryError):
            await sandbox.read_file("folder")
        with pytest.raises(IsADirectoryError, match="the workspace is a directory"):
            await sandbox.read_file(".")
        with pytest.raises(OSError, match="'pipe' is not a regular file"):
            await sandbox.read_file("pipe")
        with pytest.raises(PermissionError, match="outside the sandbox workspace"):
            await sandbox.read_file("../escape")
        with pytest.raises(PermissionError, match="outside the sandbox workspace"):
            await sandbox.execute("pwd", cwd="../..")
        assert await sandbox.read_file("folder/../file") == b"text\n"
    with pytest.raises(RuntimeError, match="the sandbox was deleted"):
        await sandbox.read_file("file")


@pytest.mark.anyio
async def test_the_recording_sandbox_fails_as_told_and_refuses_calls_after_delete() -> None:
    from runner.testing import RecordingSandbox

    failing = RecordingSandbox(fail_create=OSError("no room left"))
    with pytest.raises(OSError, match="no room left"):
        await agents.Agent(model="m", environment=failing).start_session()
    assert [call.kind for call in failing.calls] == ["create"]

    environment = RecordingSandbox(files={"seed.txt": b"seeded"})
    async with await agents.Agent(model="m", environment=environment).start_session() as session:
        assert await session.sandbox.read_file("./seed.txt") == b"seeded"
        with pytest.raises(FileNotFoundError, match="No such file in the sandbox"):
            await session.sandbox.read_file("missing.txt")
    (sandbox,) = environment.sandboxes
    with pytest.raises(RuntimeError, match=f"execute on a deleted sandbox \\({sandbox.session_id}"):
        await sandbox.execute("true")
    kinds = [call.kind for call in environment.calls]
    assert kinds == ["create", "read_file", "read_file", "delete"]


@pytest.mark.anyio
async def test_the_scripted_model_raises_the_exceptions_it_was_given_then_runs_out() -> None:
    from runner.testing import ScriptedModel

    model = ScriptedModel([ValueError("the model is down")])
    with pytest.raises(ValueError, match="the model is down"):
        await model.complete([{"role": "user", "content": "hi"}], [])
    with pytest.raises(RuntimeError, match="ScriptedModel has no reply left"):
        await model.complete([], [])
    assert model.requests == [([{"role": "user", "content": "hi"}], []), ([], [])]


QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


def runner_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def test_run_refuses_both_a_prompt_and_a_prompt_file(tmp_path: Path) -> None:
    (tmp_path / "prompt.txt").write_text("hello")
    result = runner_cli(
        "run", str(QUICKSTART), "--input", "acme.repository.repository=acme/api",
        "--prompt", "hi", "--prompt-file", "prompt.txt",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "runner: give --prompt or --prompt-file, not both"
    assert not (tmp_path / "saved-notes.md").exists()  # nothing ran


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{a: 1}\n",
            "--input-sets sets.yaml: expected a non-empty list of mappings (input_id: value)",
        ),
        ("[]\n", "--input-sets sets.yaml: expected a non-empty list of mappings (input_id: value)"),
        ("[\n", "sets.yaml:2:1: YAML syntax: "),
    ],
)
def test_run_refuses_input_sets_that_are_not_a_list_of_mappings(
    tmp_path: Path, content: str, message: str
) -> None:
    (tmp_path / "sets.yaml").write_text(content)
    result = runner_cli("run", str(QUICKSTART), "--input-sets", "sets.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"runner: {message}"), result.stderr


def test_init_says_what_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder")
    result = runner_cli("init", "blocker/runner.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "runner: cannot write blocker: File exists"
    assert (tmp_path / "blocker").read_text() == "a file, not a folder"


def test_serve_needs_something_to_serve(tmp_path: Path) -> None:
    result = runner_cli("serve", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "runner: give YAML FILES to serve, --agent MODULE:ATTR, or both"
    )


def test_gc_and_info_without_a_docker_engine(tmp_path: Path) -> None:
    """No engine at DOCKER_HOST: gc fails with the reason, info reports it and goes on."""
    nowhere = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    gc = runner_cli("gc", cwd=tmp_path, env=nowhere)
    assert gc.returncode == 2
    assert gc.stderr.startswith(
        f"runner: the Docker engine is not reachable at unix://{tmp_path}/no-engine.sock"
    ), gc.stderr
    assert "point DOCKER_HOST at a running one" in gc.stderr

    info = runner_cli("info", cwd=tmp_path, env=nowhere)
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert lines[0].startswith("runner 0.1.0 on Python ")
    assert lines[1].startswith(
        f"docker: not reachable: the Docker engine is not reachable at unix://{tmp_path}/"
    )
    assert any(line.endswith(": unknown (Docker not reachable)") for line in lines), lines
    assert any(line.startswith("MISTRAL_API_KEY: ") for line in lines), lines


def test_serve_refuses_a_short_token_and_a_public_address_without_one(tmp_path: Path) -> None:
    short = runner_cli(
        "serve", str(QUICKSTART), "--port", "0", cwd=tmp_path, env={"RUNNER_SERVE_TOKEN": "short"}
    )
    assert short.returncode == 2
    assert short.stderr.startswith("runner: RUNNER_SERVE_TOKEN is shorter than 16 characters; ")

    environ = {key: value for key, value in os.environ.items() if key != "RUNNER_SERVE_TOKEN"}
    public = subprocess.run(
        [*RUNNER_CLI, "serve", str(QUICKSTART), "--host", "runner.invalid", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=environ,
    )
    assert public.returncode == 2
    assert public.stderr.startswith(
        "runner: refusing to listen on runner.invalid without a token: set RUNNER_SERVE_TOKEN"
    ), public.stderr
    assert list(tmp_path.iterdir()) == []  # stopped before the database was made


def test_serve_refuses_two_files_with_the_same_agent_name(tmp_path: Path) -> None:
    for name in ("one.yaml", "two.yaml"):
        (tmp_path / name).write_text(QUICKSTART.read_text())
    result = runner_cli(
        "serve", "one.yaml", "two.yaml", "--port", "0", cwd=tmp_path,
        env={"RUNNER_SERVE_TOKEN": "t" * 32},
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "runner: two files declare an agent named 'quickstart-agent': "
        f"{tmp_path / 'one.yaml'} and two.yaml"
    )


def test_serve_says_when_it_cannot_listen(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner_cli(
            "serve", str(QUICKSTART), "--port", str(port), "--output-dir", "out", cwd=tmp_path,
            env={"RUNNER_SERVE_TOKEN": "t" * 32},
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"runner: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
