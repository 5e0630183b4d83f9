"""The lifecycle rules (README, "The lifecycle"), on the local sandbox and on Docker
(each of the three test images: full, python3-minimal and busybox)."""

from __future__ import annotations

import logging

import pytest

import runner as agents

pytestmark = pytest.mark.anyio


@pytest.fixture
def backend(backend_on_every_image):
    """Here, Docker runs on every test image (issue 13)."""
    return backend_on_every_image


class Recorder(agents.SandboxHook):
    """Appends (hook name, point) to a shared journal; can be told to fail."""

    def __init__(self, name: str, journal: list, *, fail_on: str | None = None) -> None:
        self.name = name
        self.journal = journal
        self.fail_on = fail_on

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        self.journal.append((self.name, "on_create", ctx))
        if self.fail_on == "on_create":
            raise ValueError(f"{self.name} refused to start")

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        self.journal.append((self.name, "on_destroy", ctx))
        if self.fail_on == "on_destroy":
            raise ValueError(f"{self.name} could not clean up")


def points(journal: list) -> list[tuple[str, str]]:
    return [(name, point) for name, point, _ in journal]


async def test_on_create_in_order_and_on_destroy_in_reverse(backend) -> None:
    journal: list = []
    hooks = [Recorder(n, journal) for n in ("a", "b", "c")]
    agent = agents.Agent(model="m", environment=backend.environment(hooks=hooks))
    session = await agent.start_session()
    assert points(journal) == [("a", "on_create"), ("b", "on_create"), ("c", "on_create")]
    await session.cancel()
    assert points(journal)[3:] == [("c", "on_destroy"), ("b", "on_destroy"), ("a", "on_destroy")]
    assert backend.is_deleted(session.sandbox)


async def test_each_point_gets_a_fresh_context_on_the_same_sandbox(backend) -> None:
    journal: list = []
    agent = agents.Agent(model="m", environment=backend.environment(hooks=[Recorder("a", journal)]))
    async with await agent.start_session() as session:
        pass
    (_, _, create_ctx), (_, _, destroy_ctx) = journal
    assert create_ctx is not destroy_ctx
    assert create_ctx.sandbox is destroy_ctx.sandbox is session.sandbox
    assert create_ctx.session_id == destroy_ctx.session_id == session.id


async def test_failing_on_create_unwinds_completed_hooks_and_deletes_the_sandbox(
    backend,
) -> None:
    journal: list = []
    hooks = [
        Recorder("a", journal),
        Recorder("b", journal),
        Recorder("c", journal, fail_on="on_create"),
        Recorder("d", journal),
    ]
    agent = agents.Agent(model="m", environment=backend.environment(hooks=hooks))
    with pytest.raises(ValueError, match="c refused to start"):
        await agent.start_session()
    assert points(journal) == [
        ("a", "on_create"),
        ("b", "on_create"),
        ("c", "on_create"),
        ("b", "on_destroy"),
        ("a", "on_destroy"),
    ]
    assert backend.leftovers() == []


async def test_unwinding_logs_on_destroy_errors_and_still_raises_the_hook_error(
    backend, caplog
) -> None:
    journal: list = []
    hooks = [
        Recorder("a", journal),
        Recorder("x", journal, fail_on="on_destroy"),
        Recorder("b", journal, fail_on="on_create"),
    ]
    agent = agents.Agent(model="m", environment=backend.environment(hooks=hooks))
    with (
        caplog.at_level(logging.ERROR, logger="runner"),
        pytest.raises(ValueError, match="b refused"),
    ):
        await agent.start_session()
    assert points(journal)[-2:] == [("x", "on_destroy"), ("a", "on_destroy")]
    assert "x.on_destroy failed" in caplog.text
    assert backend.leftovers() == []


async def test_failing_on_destroy_is_logged_and_the_rest_still_run(backend, caplog) -> None:
    journal: list = []
    hooks = [
        Recorder("a", journal),
        Recorder("b", journal, fail_on="on_destroy"),
        Recorder("c", journal),
    ]
    agent = agents.Agent(model="m", environment=backend.environment(hooks=hooks))
    session = await agent.start_session()
    with caplog.at_level(logging.ERROR, logger="runner"):
        await session.cancel()
    assert points(journal)[3:] == [("c", "on_destroy"), ("b", "on_destroy"), ("a", "on_destroy")]
    assert "sandbox hook b.on_destroy failed" in caplog.text
    assert "ValueError: b could not clean up" in caplog.text
    assert session.status == "terminated"
    assert backend.is_deleted(session.sandbox)


async def test_closing_twice_runs_on_destroy_once(backend) -> None:
    journal: list = []
    agent = agents.Agent(model="m", environment=backend.environment(hooks=[Recorder("a", journal)]))
    session = await agent.start_session()
    await session.cancel()
    await session.cancel()
    async with session:
        pass
    assert points(journal) == [("a", "on_create"), ("a", "on_destroy")]


async def test_close_deletes_the_sandbox_even_when_every_on_destroy_fails(backend) -> None:
    journal: list = []
    hooks = [Recorder(n, journal, fail_on="on_destroy") for n in ("a", "b")]
    agent = agents.Agent(model="m", environment=backend.environment(hooks=hooks))
    session = await agent.start_session()
    await session.cancel()
    assert backend.is_deleted(session.sandbox)


async def test_no_sandbox_never_runs_hooks() -> None:
    journal: list = []
    agent = agents.Agent(model="m", environment=agents.NoSandbox(hooks=[Recorder("a", journal)]))
    async with await agent.start_session() as session:
        assert session.sandbox is None
    assert journal == []


async def test_the_default_environment_is_no_sandbox() -> None:
    agent = agents.Agent(model="m")
    assert isinstance(agent.environment, agents.NoSandbox)


async def test_hook_objects_are_not_copied(backend) -> None:
    journal: list = []
    hook = Recorder("a", journal)
    agent = agents.Agent(model="m", environment=backend.environment(hooks=[hook]))
    for _ in range(2):
        async with await agent.start_session():
            pass
    assert agent.environment.hooks[0] is hook
    assert len(journal) == 4


async def test_cancellation_during_on_create_still_unwinds(backend) -> None:
    import anyio

    journal: list = []
    blocked = anyio.Event()

    class Slow(agents.SandboxHook):
        async def on_create(self, ctx):
            blocked.set()
            await anyio.sleep(30)

    hooks = [Recorder("a", journal), Slow()]
    agent = agents.Agent(model="m", environment=backend.environment(hooks=hooks))
    # Cancelled once the second hook runs (a wait on that, not on the clock:
    # a Docker sandbox may take more than a second to start on a busy machine).
    async with anyio.create_task_group() as tg:

        async def cancel_when_blocked() -> None:
            await blocked.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_when_blocked)
        with anyio.fail_after(120):
            await agent.start_session()
    assert points(journal) == [("a", "on_create"), ("a", "on_destroy")]
    assert backend.leftovers() == []


async def test_lifecycle_events_are_reported_in_order() -> None:
    from runner.testing import RecordingSandbox

    journal: list = []
    events: list[dict] = []
    env = RecordingSandbox(hooks=[Recorder("a", journal), Recorder("b", journal)])
    agent = agents.Agent(model="m", environment=env)
    with agents.listen(events.append):
        async with await agent.start_session():
            pass
    kinds = [(e["event"], e.get("hook"), e.get("point")) for e in events]
    assert kinds == [
        ("session_starting", None, None),
        ("sandbox_creating", None, None),
        ("sandbox_created", None, None),
        ("hook_started", "a", "on_create"),
        ("hook_finished", "a", "on_create"),
        ("hook_started", "b", "on_create"),
        ("hook_finished", "b", "on_create"),
        ("session_started", None, None),
        ("session_closing", None, None),
        ("hook_started", "b", "on_destroy"),
        ("hook_finished", "b", "on_destroy"),
        ("hook_started", "a", "on_destroy"),
        ("hook_finished", "a", "on_destroy"),
        ("sandbox_deleting", None, None),
        ("sandbox_deleted", None, None),
        ("session_closed", None, None),
    ]
    assert [c.kind for c in env.calls] == ["create", "delete"]


class SlowDestroy(agents.SandboxHook):
    """An on_destroy that takes a while and uses the sandbox at its end."""

    def __init__(self, journal: list, *, started: object = None) -> None:
        self.journal = journal
        self.started = started

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        import anyio

        self.journal.append("on_destroy started")
        if self.started is not None:
            self.started.set()
        await anyio.sleep(0.5)
        result = await ctx.sandbox.execute("echo still here")
        self.journal.append(f"on_destroy finished: {result.stdout.strip()}")


async def test_cancelling_close_lets_a_slow_on_destroy_finish_then_deletes(local_backend) -> None:
    """close() is shielded: the task that closes is cancelled mid-on_destroy,
    and the hook still finishes (it can still use the sandbox), then the
    sandbox is deleted."""
    import anyio

    journal: list = []
    started = anyio.Event()
    env = local_backend.environment(hooks=[SlowDestroy(journal, started=started)])
    session = await agents.Agent(model="m", environment=env).start_session()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(session.close)
        await started.wait()
        tasks.cancel_scope.cancel()
    assert journal == ["on_destroy started", "on_destroy finished: still here"]
    assert session.status == "terminated"
    assert local_backend.is_deleted(session.sandbox)


async def test_cancelling_a_failed_start_lets_a_slow_on_destroy_finish(local_backend) -> None:
    """The unwinding of a failed on_create is shielded too: a start cancelled
    during a later hook's on_create runs the earlier hook's slow on_destroy to
    its end, then deletes the sandbox."""
    import anyio

    journal: list = []

    class Stuck(agents.SandboxHook):
        async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
            journal.append("stuck")
            await anyio.sleep(60)

    env = local_backend.environment(hooks=[SlowDestroy(journal), Stuck()])
    agent = agents.Agent(model="m", environment=env)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(agent.start_session)
            while journal != ["stuck"]:
                await anyio.sleep(0.01)
            scope.cancel()
    assert scope.cancelled_caught
    assert journal == ["stuck", "on_destroy started", "on_destroy finished: still here"]
    assert local_backend.leftovers() == []
