"""The built-in GitIdentity hook, on both backends."""

from __future__ import annotations

import pytest

import runner as agents
from runner.pattern.sandbox_hook import GitIdentity

pytestmark = pytest.mark.anyio


async def test_git_identity_sets_the_global_name_and_email(backend) -> None:
    hook = agents.pattern.sandbox_hook.GitIdentity(name="Review Bot", email="bot@example.com")
    env = backend.environment(hooks=[hook])
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute(
            "git config --global user.name; git config --global user.email; "
            "git init -q repo && cd repo && git commit -q --allow-empty -m first && "
            "git log -1 --format='%an <%ae>'"
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Review Bot",
        "bot@example.com",
        "Review Bot <bot@example.com>",
    ]


async def test_git_identity_quotes_unusual_names(backend) -> None:
    name = "O'Brien $(touch pwned) `id`"
    env = backend.environment(hooks=[GitIdentity(name=name, email="o@example.com")])
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        result = await session.sandbox.execute("git config --global user.name; ls -A")
    assert result.stdout.splitlines() == [name]


@pytest.mark.parametrize(("name", "email"), [("", "a@b"), ("A", "  "), ("A\nB", "a@b")])
def test_git_identity_rejects_empty_or_multiline_values(name: str, email: str) -> None:
    with pytest.raises(ValueError, match="GitIdentity"):
        GitIdentity(name=name, email=email)


async def test_git_identity_failure_fails_the_session(backend) -> None:
    env = backend.environment(hooks=[GitIdentity(name="A", email="a@b")], env={"HOME": "/proc"})
    with pytest.raises(RuntimeError, match="git-identity: git config failed"):
        await agents.Agent(model="m", environment=env).start_session()
    assert backend.leftovers() == []
