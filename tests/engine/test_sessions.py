"""Sessions: how they start, run turns and close (cancel, async with, runtime, TTL)."""

from __future__ import annotations

from typing import Annotated

import anyio
import pytest

import runner as agents
from runner.testing import RecordingSandbox, ScriptedModel

pytestmark = pytest.mark.anyio


class Counter(agents.SandboxHook):
    def __init__(self) -> None:
        self.created = 0
        self.destroyed = 0

    async def on_create(self, ctx) -> None:
        self.created += 1

    async def on_destroy(self, ctx) -> None:
        self.destroyed += 1


class Ticket(agents.SessionInput):
    input_id = "ci.ticket"
    number: int


class UsesTicket(agents.SandboxHook):
    async def on_create(self, ctx, *, ticket: Annotated[Ticket, agents.Depends()]) -> None:
        await ctx.sandbox.execute(f"echo {ticket.number}")


def answer(text: str) -> agents.ModelReply:
    return agents.ModelReply(text=text)


async def test_start_session_opens_a_waiting_session_and_cancel_terminates_it() -> None:
    hook = Counter()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook]))
    session = await agent.start_session()
    assert session.status == "waiting"
    assert session.id.startswith("sess_")
    assert (hook.created, hook.destroyed) == (1, 0)
    await session.cancel()
    assert session.status == "terminated"
    assert (hook.created, hook.destroyed) == (1, 1)


async def test_async_with_closes_the_session_even_on_error() -> None:
    hook = Counter()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook]))
    with pytest.raises(KeyError):
        async with await agent.start_session() as session:
            raise KeyError("boom")
    assert session.status == "terminated"
    assert hook.destroyed == 1


async def test_run_after_close_raises_session_terminated() -> None:
    agent = agents.Agent(model=ScriptedModel([answer("hi")]), environment=RecordingSandbox())
    session = await agent.start_session()
    await session.cancel()
    with pytest.raises(agents.SessionTerminatedError, match=f"session {session.id} is closed"):
        await session.run("hello")


async def test_local_runtime_closes_every_session_still_open_in_reverse_order() -> None:
    order: list[str] = []

    class Named(agents.SandboxHook):
        def __init__(self, label: str) -> None:
            self.label = label

        async def on_destroy(self, ctx) -> None:
            order.append(self.label)

    first = agents.Agent(model="m", environment=RecordingSandbox(hooks=[Named("first")]))
    second = agents.Agent(model="m", environment=RecordingSandbox(hooks=[Named("second")]))
    async with agents.local_runtime():
        one = await first.start_session()
        two = await second.start_session()
        closed_early = await first.start_session()
        await closed_early.cancel()
    assert order == ["first", "second", "first"]
    assert one.status == two.status == "terminated"


async def test_local_runtime_closes_sessions_when_its_body_raises() -> None:
    hook = Counter()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook]))
    with pytest.raises(RuntimeError, match="body failed"):
        async with agents.local_runtime():
            await agent.start_session()
            raise RuntimeError("body failed")
    assert hook.destroyed == 1


async def test_sessions_started_outside_a_runtime_are_not_closed_by_it() -> None:
    hook = Counter()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook]))
    outside = await agent.start_session()
    async with agents.local_runtime():
        pass
    assert outside.status == "waiting"
    await outside.cancel()


async def test_ttl_closes_a_session_inside_a_runtime_when_it_expires() -> None:
    hook = Counter()
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[hook], ttl_seconds=0.3))
    async with agents.local_runtime():
        session = await agent.start_session()
        await anyio.sleep(0.6)
        assert session.status == "terminated"
        assert hook.destroyed == 1
        with pytest.raises(agents.SessionTerminatedError, match="ttl_seconds=0.3 expired"):
            await session.run("too late")


async def test_ttl_closes_an_expired_session_outside_a_runtime_when_it_is_used() -> None:
    hook = Counter()
    env = RecordingSandbox(hooks=[hook], ttl_seconds=0.2)
    agent = agents.Agent(model=ScriptedModel([answer("hi")]), environment=env)
    session = await agent.start_session()
    await anyio.sleep(0.3)
    with pytest.raises(agents.SessionTerminatedError, match="expired"):
        await session.run("hello")
    assert hook.destroyed == 1
    assert env.calls[-1].kind == "delete"


async def test_ttl_interrupts_a_running_turn() -> None:
    class Hangs:
        async def complete(self, messages, tools):
            await anyio.sleep(30)

    agent = agents.Agent(model=Hangs(), environment=RecordingSandbox(ttl_seconds=0.3))
    async with agents.local_runtime():
        session = await agent.start_session()
        with anyio.fail_after(5), pytest.raises(agents.SessionTerminatedError, match="during"):
            await session.run("hello")
    assert session.status == "terminated"


async def test_cancel_from_another_task_stops_the_running_turn() -> None:
    started = anyio.Event()

    class Hangs:
        async def complete(self, messages, tools):
            started.set()
            await anyio.sleep(30)

    agent = agents.Agent(model=Hangs(), environment=RecordingSandbox())
    session = await agent.start_session()
    errors: list[BaseException] = []

    async def run_turn() -> None:
        try:
            await session.run("hello")
        except agents.SessionTerminatedError as exc:
            errors.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_turn)
            await started.wait()
            assert session.status == "running"
            await session.cancel()
    assert len(errors) == 1
    assert session.status == "terminated"


async def test_one_shot_run_opens_runs_and_closes_a_session() -> None:
    hook = Counter()
    model = ScriptedModel([answer("done")])
    agent = agents.Agent(model=model, environment=RecordingSandbox(hooks=[hook]))
    result = await agent.run("do it")
    assert result == agents.Completed("done", ())
    assert (hook.created, hook.destroyed) == (1, 1)


async def test_idempotency_key_continues_the_same_session() -> None:
    hook = Counter()
    model = ScriptedModel([answer("one"), answer("two")])
    agent = agents.Agent(
        model=model, instructions="Be brief.", environment=RecordingSandbox(hooks=[hook])
    )
    first = await agent.run("first", idempotency_key="job-1")
    second = await agent.run("second", idempotency_key="job-1")
    assert (first.text, second.text) == ("one", "two")
    assert hook.created == 1 and hook.destroyed == 0
    messages, _ = model.requests[1]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"] == "second"
    session = await agent.start_session(idempotency_key="job-1")
    await session.cancel()
    assert hook.destroyed == 1


async def test_idempotency_key_with_other_inputs_is_a_conflict() -> None:
    env = RecordingSandbox(hooks=[UsesTicket()])
    agent = agents.Agent(model=ScriptedModel([answer("a"), answer("b")]), environment=env)
    await agent.run("x", idempotency_key="k", session_inputs={"ci.ticket": Ticket(number=1)})
    with pytest.raises(agents.SessionIdempotencyConflictError, match="'k'"):
        await agent.run("x", idempotency_key="k", session_inputs={"ci.ticket": {"number": 2}})
    assert [c.kind for c in env.calls].count("create") == 1
    session = await agent.start_session(
        idempotency_key="k", session_inputs={"ci.ticket": {"number": 1}}
    )
    await session.cancel()


async def test_a_closed_idempotent_session_is_not_silently_restarted() -> None:
    agent = agents.Agent(model=ScriptedModel([answer("a")]), environment=RecordingSandbox())
    await agent.run("x", idempotency_key="k")
    (await agent.start_session(idempotency_key="k"))
    await (await agent.start_session(idempotency_key="k")).cancel()
    with pytest.raises(agents.SessionTerminatedError, match="'k'"):
        await agent.run("again", idempotency_key="k")


async def test_a_model_name_without_credentials_fails_before_any_sandbox(monkeypatch) -> None:
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    env = RecordingSandbox()
    agent = agents.Agent(model="mistral-large-4", environment=env)
    with pytest.raises(agents.MissingCredentialsError, match="MISTRAL_API_KEY"):
        await agent.run("hello")
    assert env.calls == []


async def test_status_is_running_during_a_turn() -> None:
    seen: list[str] = []
    holder: dict = {}

    class Peeks:
        async def complete(self, messages, tools):
            seen.append(holder["session"].status)
            return answer("ok")

    agent = agents.Agent(model=Peeks(), environment=RecordingSandbox())
    async with await agent.start_session() as session:
        holder["session"] = session
        await session.run("hi")
        assert session.status == "waiting"
    assert seen == ["running"]


async def test_a_second_close_waits_for_the_first_to_finish() -> None:
    release = anyio.Event()
    finished: list[str] = []

    class SlowDestroy(agents.SandboxHook):
        async def on_destroy(self, ctx) -> None:
            await release.wait()
            finished.append("destroyed")

    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[SlowDestroy()]))
    session = await agent.start_session()
    second_returned: list[bool] = []

    async def second_close() -> None:
        await session.cancel()
        second_returned.append(finished == ["destroyed"])

    async with anyio.create_task_group() as tg:
        tg.start_soon(session.cancel)
        await anyio.sleep(0.05)
        tg.start_soon(second_close)
        await anyio.sleep(0.05)
        assert second_returned == []
        release.set()
    assert second_returned == [True]


async def test_concurrent_calls_with_one_idempotency_key_share_one_session() -> None:
    hook = Counter()
    env = RecordingSandbox(hooks=[hook])
    agent = agents.Agent(model="m", environment=env)
    sessions: list = []

    async def start() -> None:
        sessions.append(await agent.start_session(idempotency_key="job"))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(start)
    assert len({s.id for s in sessions}) == 1
    assert hook.created == 1
    await sessions[0].cancel()


async def test_on_destroy_failures_are_kept_on_the_session() -> None:
    class Fails(agents.SandboxHook):
        async def on_destroy(self, ctx) -> None:
            raise OSError("upload refused")

    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[Fails()]))
    async with await agent.start_session() as session:
        pass
    assert [str(f) for f in session.destroy_failures] == [
        "sandbox hook Fails.on_destroy failed: OSError: upload refused"
    ]


Token = agents.SessionInput.from_json_schema(
    "acme.token",
    {"type": "object", "properties": {"value": {"type": "string"}}},
    secret=True,
)


async def test_secret_inputs_never_reach_hook_events_or_logs(caplog) -> None:
    class Leaky(agents.SandboxHook):
        async def on_destroy(self, ctx, *, token: Annotated[Token, agents.Depends()]) -> None:
            raise RuntimeError(f"bad token {token.value}")

    events: list[dict] = []
    agent = agents.Agent(model="m", environment=RecordingSandbox(hooks=[Leaky()]))
    with agents.listen(events.append), caplog.at_level("ERROR", logger="runner"):
        async with await agent.start_session(
            session_inputs={"acme.token": {"value": "sk-SECRET-1"}}
        ) as session:
            pass
    failed = next(e for e in events if e["event"] == "hook_failed")
    assert failed["error"] == "bad token ***"
    assert "sk-SECRET-1" not in caplog.text
    assert "bad token ***" in caplog.text
    assert session.destroy_failures[0].message == "bad token ***"


def test_a_secret_input_error_does_not_show_the_value() -> None:
    Token = agents.SessionInput.from_json_schema(
        "acme.token",
        {"type": "object", "properties": {"value": {"type": "string", "pattern": "^[a-z]+$"}}},
        secret=True,
    )
    with pytest.raises(agents.SessionInputError) as info:
        Token.from_value({"value": "Sup3rSecret!"})
    assert "Sup3rSecret!" not in str(info.value)
    assert "fails the schema's 'pattern' rule (the value is secret and not shown)" in str(
        info.value
    )
