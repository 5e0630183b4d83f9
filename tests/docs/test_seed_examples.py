"""The two examples of the seed document, ported by changing only the import.

The hook and input classes below are copied from the seed text verbatim, with
``from mistralai import agents`` replaced by ``import runner as agents``.  The
seeds run them on ``MistralSandbox``; here they run on the local sandbox and
on Docker (the seed itself suggests ``LocalDockerSandbox`` for trying hooks).
"""

import shlex
from pathlib import Path
from typing import Annotated

import pytest

import runner as agents

pytestmark = pytest.mark.anyio


# --- verbatim from the seed: "Seed the workspace" ---------------------------


class SeedWorkspace(agents.SandboxHook):
    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        result = await ctx.sandbox.execute("echo 'Run the tests with pytest.' > NOTES.md")
        if result.exit_code != 0:
            raise RuntimeError(f"seeding failed: {result.stderr}")

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        report = await ctx.sandbox.read_file("NOTES.md")
        Path("saved-notes.md").write_bytes(
            report
        )  # in your process; deployed, upload it from the sandbox


# --- verbatim from the seed: "Seed it from a session input" -----------------


class RepositoryContext(agents.SessionInput):
    input_id = "acme.repository"

    provider: str
    repository: str
    revision: str


class RecordRepository(agents.SandboxHook):
    async def on_create(
        self,
        ctx: agents.SandboxCallbackContext,
        *,
        repo: Annotated[RepositoryContext, agents.Depends()],
    ) -> None:
        line = shlex.quote(f"{repo.repository}@{repo.revision}")
        result = await ctx.sandbox.execute(f"echo {line} > REPOSITORY")
        if result.exit_code != 0:
            raise RuntimeError(f"seeding failed: {result.stderr}")


# --- the tests ---------------------------------------------------------------


async def test_seed_workspace_writes_notes_and_copies_them_out(backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agent = agents.Agent(
        model="mistral-large-4",
        environment=backend.environment(hooks=[SeedWorkspace()]),
    )
    async with agents.local_runtime():
        session = await agent.start_session()
        notes = await session.sandbox.read_file("NOTES.md")
        assert notes == b"Run the tests with pytest.\n"
        assert not (tmp_path / "saved-notes.md").exists()
    assert (tmp_path / "saved-notes.md").read_bytes() == b"Run the tests with pytest.\n"


async def test_record_repository_from_the_seed_session_input(backend):
    agent = agents.Agent(
        model="mistral-large-4",
        environment=backend.environment(hooks=[RecordRepository()]),
    )
    repo = RepositoryContext(provider="github", repository="acme/api", revision="main")
    session = await agent.start_session(session_inputs={RepositoryContext.input_id: repo})
    async with session:
        assert await session.sandbox.read_file("REPOSITORY") == b"acme/api@main\n"


HOSTILE_VALUES = [
    'it\'s "quoted"',
    "$(touch pwned)",
    "`touch pwned`",
    "line one\nline two\n",
    "-n",
    "--help",
    "ünïcødé ☃ 🚀 中文",
    "a; touch pwned | cat & echo",
    "* ? [a-z] ~ $HOME ${PATH}",
    "back\\slash\\n \\t",
    "",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
async def test_hostile_input_values_reach_the_workspace_byte_for_byte(backend, value):
    agent = agents.Agent(
        model="mistral-large-4",
        environment=backend.environment(hooks=[RecordRepository()]),
    )
    repo = RepositoryContext(provider="github", repository=value, revision=value)
    async with await agent.start_session(session_inputs={"acme.repository": repo}) as session:
        recorded = await session.sandbox.read_file("REPOSITORY")
        listing = await session.sandbox.execute("ls -A")
    assert recorded == f"{value}@{value}\n".encode()
    assert listing.stdout.split() == ["REPOSITORY"]


async def test_missing_seed_input_fails_before_the_sandbox_exists(backend):
    agent = agents.Agent(
        model="mistral-large-4",
        environment=backend.environment(hooks=[RecordRepository()]),
    )
    with pytest.raises(agents.SessionInputError, match="RecordRepository.on_create"):
        await agent.start_session()
    assert backend.leftovers() == []
