"""Depends(): bad declarations and bad inputs fail before any sandbox exists.

No ``from __future__ import annotations`` here: some hooks below are local
classes whose annotations name local classes, which only eager annotations see.
"""

from typing import Annotated

import pytest

import runner as agents
from runner.testing import RecordingSandbox

pytestmark = pytest.mark.anyio


class RepositoryContext(agents.SessionInput):
    input_id = "acme.repository"

    provider: str
    repository: str
    revision: str


class UsesRepo(agents.SandboxHook):
    def __init__(self) -> None:
        self.seen: list = []

    async def on_create(
        self,
        ctx: agents.SandboxCallbackContext,
        *,
        repo: Annotated[RepositoryContext, agents.Depends()],
    ) -> None:
        self.seen.append(repo)


REPO = RepositoryContext(provider="github", repository="acme/api", revision="main")


def test_depends_on_a_non_session_input_type_is_an_sdk_error() -> None:
    class Bad(agents.SandboxHook):
        async def on_create(self, ctx, *, repo: Annotated[str, agents.Depends()]) -> None: ...

    with pytest.raises(agents.SdkError) as info:
        agents.Agent(model="m", environment=RecordingSandbox(hooks=[Bad()]))
    assert "sandbox hook Bad.on_create" in str(info.value)
    assert "'repo'" in str(info.value)
    assert "not a SessionInput subclass" in str(info.value)


def test_positional_depends_is_an_sdk_error() -> None:
    class Bad(agents.SandboxHook):
        async def on_destroy(
            self, ctx, repo: Annotated[RepositoryContext, agents.Depends()]
        ) -> None: ...

    with pytest.raises(
        agents.SdkError, match=r"Bad\.on_destroy: Depends\(\) parameter 'repo' must be keyword-only"
    ):
        agents.Agent(model="m", environment=RecordingSandbox(hooks=[Bad()]))


def test_undeclared_required_parameter_is_an_sdk_error() -> None:
    class Bad(agents.SandboxHook):
        async def on_create(self, ctx, *, repo: RepositoryContext) -> None: ...

    with pytest.raises(agents.SdkError, match="'repo' has no default and is not a dependency"):
        agents.Agent(model="m", environment=RecordingSandbox(hooks=[Bad()]))


def test_two_classes_with_one_input_id_is_an_sdk_error() -> None:
    class OtherRepository(agents.SessionInput):
        input_id = "acme.repository"
        url: str

    class UsesOther(agents.SandboxHook):
        async def on_destroy(
            self, ctx, *, repo: Annotated[OtherRepository, agents.Depends()]
        ) -> None: ...

    with pytest.raises(agents.SdkError) as info:
        agents.Agent(model="m", environment=RecordingSandbox(hooks=[UsesRepo(), UsesOther()]))
    message = str(info.value)
    assert "two SessionInput classes share input_id 'acme.repository'" in message
    assert "RepositoryContext (used by sandbox hook UsesRepo.on_create)" in message
    assert "OtherRepository (used by sandbox hook UsesOther.on_destroy)" in message


async def test_the_input_reaches_the_hook() -> None:
    hook = UsesRepo()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook]))
    async with await agent.start_session(session_inputs={"acme.repository": REPO}):
        pass
    assert hook.seen == [REPO]


async def test_a_mapping_is_validated_into_the_input_class() -> None:
    hook = UsesRepo()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook]))
    value = {"provider": "github", "repository": "acme/api", "revision": "v1"}
    async with await agent.start_session(session_inputs={"acme.repository": value}):
        pass
    assert hook.seen == [RepositoryContext(**value)]


BAD_INPUTS = [
    pytest.param(None, "needs session input 'acme.repository' (RepositoryContext)", id="missing"),
    pytest.param(
        {"acme.repository": {"provider": "github", "repository": "acme/api"}},
        "sandbox hook UsesRepo.on_create: session input 'acme.repository' is invalid: "
        "'revision' is a required property",
        id="invalid",
    ),
    pytest.param(
        {"acme.repo": REPO, "acme.repository": REPO},
        "key 'acme.repo' holds a RepositoryContext whose input_id is 'acme.repository'",
        id="key-differs-from-input-id",
    ),
    pytest.param(
        {"acme.repository": REPO, "acme.unknown": {"x": 1}},
        "session input 'acme.unknown' is not declared by any hook",
        id="undeclared-id",
    ),
]


@pytest.mark.parametrize(("session_inputs", "message"), BAD_INPUTS)
async def test_bad_inputs_fail_before_the_recording_sandbox_is_created(
    session_inputs, message
) -> None:
    env = RecordingSandbox(hooks=[UsesRepo()])
    agent = agents.Agent(model="m", environment=env)
    with pytest.raises(agents.SessionInputError) as info:
        await agent.start_session(session_inputs=session_inputs)
    assert message in str(info.value)
    assert env.calls == []


@pytest.mark.parametrize(("session_inputs", "message"), BAD_INPUTS)
async def test_bad_inputs_leave_no_container_or_temp_dir(backend, session_inputs, message) -> None:
    agent = agents.Agent(model="m", environment=backend.environment(hooks=[UsesRepo()]))
    with pytest.raises(agents.SessionInputError, match="acme"):
        await agent.start_session(session_inputs=session_inputs)
    assert backend.leftovers() == []


async def test_inputs_are_checked_for_on_destroy_too_before_creation() -> None:
    class NeedsAtClose(agents.SandboxHook):
        async def on_destroy(
            self, ctx, *, repo: Annotated[RepositoryContext, agents.Depends()]
        ) -> None: ...

    env = RecordingSandbox(hooks=[NeedsAtClose()])
    agent = agents.Agent(model="m", environment=env)
    with pytest.raises(agents.SessionInputError, match=r"NeedsAtClose\.on_destroy needs"):
        await agent.start_session()
    assert env.calls == []


def test_an_unresolvable_annotation_is_an_sdk_error() -> None:
    class Bad(agents.SandboxHook):
        async def on_create(self, ctx, *, repo: "Annotated[Missing, agents.Depends()]") -> None: ...

    with pytest.raises(agents.SdkError, match="Bad.on_create: cannot resolve an annotation"):
        agents.Agent(model="m", environment=RecordingSandbox(hooks=[Bad()]))
