"""The sandbox lifecycle's edges: snapshots, failed deletions, every event's
fields (``scripts/mutate lifecycle`` mutates the lifecycle against them).

Every test runs the real lifecycle in-process on local sandboxes (host
directories and subprocesses).  Two small backends are written here the way a
user would write one (``SandboxEnvironment`` is public): one that can snapshot
(a snapshot is a copy of the workspace folder) and one whose sandboxes cannot
be deleted (the engine went away), to reach the snapshot and the
failed-deletion paths without Docker.  Every event is checked against the
shipped events schema, so a field dropped or emptied fails here.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from jsonschema import Draft202012Validator

import runner as agents
from runner.core.events import events_schema
from runner.core.snapshot_keys import SnapshotError, snapshot_key, snapshots_disabled
from runner.engine.cleanup import force_cleanup
from runner.engine.hook_points import HookFailure, plan_hooks
from runner.engine.lifecycle import open_sandbox, resume_sandbox
from runner.sandboxes.local import DangerousLocalSandbox, LocalSandbox

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::runner.sandboxes.local.DangerousLocalWarning"),
]

VALIDATOR = Draft202012Validator(events_schema())


def checked(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events, each valid against the schema and with a plausible duration."""
    for event in events:
        errors = [e.message for e in VALIDATOR.iter_errors(event)]
        assert errors == [], (event, errors)
        if "duration_seconds" in event:
            assert 0 <= event["duration_seconds"] < 60, event
    return events


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    return [(e["event"], e.get("hook"), e.get("point")) for e in events]


class Ticket(agents.SessionInput):
    input_id = "ci.ticket"
    number: int


Token = agents.SessionInput.from_json_schema(
    "mh.token", {"type": "object", "properties": {"value": {"type": "string"}}}, secret=True
)


class Journal(agents.SandboxHook):
    """Records (name, point, what it saw) and can fail or be slow at either point."""

    def __init__(
        self,
        name: str,
        journal: list,
        *,
        fail_on: str | None = None,
        destroy_seconds: float = 0,
    ) -> None:
        self.name = name
        self.journal = journal
        self.fail_on = fail_on
        self.destroy_seconds = destroy_seconds

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        self.journal.append((self.name, "on_create"))
        await ctx.sandbox.write_file(f"{self.name}.txt", self.name)
        if self.fail_on == "on_create":
            raise ValueError(f"{self.name} refused to start")

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        self.journal.append((self.name, "on_destroy"))
        if self.destroy_seconds:
            await anyio.sleep(self.destroy_seconds)
        if self.fail_on == "on_destroy":
            raise ValueError(f"{self.name} could not clean up")


def local(tmp_path: Path, **options: Any) -> DangerousLocalSandbox:
    (tmp_path / "sandboxes").mkdir(exist_ok=True)
    return DangerousLocalSandbox(temp_dir=tmp_path / "sandboxes", **options)


def leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "sandboxes").iterdir())


# --- events ------------------------------------------------------------------


async def test_every_lifecycle_event_has_its_fields(tmp_path) -> None:
    """A session whose on_destroy fails, and a start whose on_create fails:
    every event valid, with the session's id, the hook, the point and the error."""
    journal: list = []
    events: list[dict[str, Any]] = []
    env = local(
        tmp_path, hooks=[Journal("a", journal), Journal("b", journal, fail_on="on_destroy")]
    )
    with agents.listen(events.append):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            pass
    checked(events)
    assert {e["session_id"] for e in events} == {session.id}
    ours = [e for e in events if e["event"].startswith(("sandbox_", "hook_"))]
    assert kinds(ours) == [
        ("sandbox_creating", None, None),
        ("sandbox_created", None, None),
        ("hook_started", "a", "on_create"),
        ("hook_finished", "a", "on_create"),
        ("hook_started", "b", "on_create"),
        ("hook_finished", "b", "on_create"),
        ("hook_started", "b", "on_destroy"),
        ("hook_failed", "b", "on_destroy"),
        ("hook_started", "a", "on_destroy"),
        ("hook_finished", "a", "on_destroy"),
        ("sandbox_deleting", None, None),
        ("sandbox_deleted", None, None),
    ]
    assert ours[0]["backend"] == ours[1]["backend"] == "local"
    failed = ours[7]
    assert (failed["error_type"], failed["error"]) == ("ValueError", "b could not clean up")

    events.clear()
    env = local(tmp_path, hooks=[Journal("c", journal, fail_on="on_create")])
    with agents.listen(events.append), pytest.raises(ValueError, match="c refused to start"):
        await agents.Agent(model="m", environment=env).start_session()
    failed = next(e for e in checked(events) if e["event"] == "hook_failed")
    assert (failed["hook"], failed["point"]) == ("c", "on_create")
    assert (failed["error_type"], failed["error"]) == ("ValueError", "c refused to start")
    assert leftovers(tmp_path) == []


async def test_a_cancelled_on_create_reports_hook_cancelled(tmp_path) -> None:
    class Stuck(agents.SandboxHook):
        async def on_create(self, ctx) -> None:
            await anyio.sleep(30)

    events: list[dict[str, Any]] = []
    env = local(tmp_path, hooks=[Stuck()])
    with agents.listen(events.append), anyio.move_on_after(0.5):
        await agents.Agent(model="m", environment=env).start_session()
    cancelled = [e for e in checked(events) if e["event"] == "hook_cancelled"]
    assert [(e["hook"], e["point"]) for e in cancelled] == [("Stuck", "on_create")]
    assert 0 < cancelled[0]["duration_seconds"] < 10
    assert leftovers(tmp_path) == []


# --- the hook's exception ------------------------------------------------------


class Fails(agents.SandboxHook):
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def on_create(self, ctx) -> None:
        raise self.error


async def test_a_hook_error_says_which_hook_and_point_raised_it(tmp_path) -> None:
    env = local(tmp_path, hooks=[Fails(ValueError("no"))])
    with pytest.raises(ValueError) as caught:
        await agents.Agent(model="m", environment=env).start_session()
    assert caught.value.runner_hook == ("Fails", "on_create")

    marked = ValueError("inner")
    marked.runner_hook = ("Inner", "on_create")  # a nested lifecycle already said where
    env = local(tmp_path, hooks=[Fails(marked)])
    with pytest.raises(ValueError) as caught:
        await agents.Agent(model="m", environment=env).start_session()
    assert caught.value.runner_hook == ("Inner", "on_create")
    assert leftovers(tmp_path) == []


class ReadOnlyError(Exception):
    """An exception that refuses new attributes, as some library exceptions do."""

    refusal: type[Exception] = AttributeError
    runner_hook = None

    def __setattr__(self, name: str, value: object) -> None:
        raise self.refusal(f"{type(self).__name__} is read-only")


class FrozenError(ReadOnlyError):
    refusal = TypeError


@pytest.mark.parametrize("error_class", [ReadOnlyError, FrozenError])
async def test_an_exception_that_refuses_the_mark_still_propagates(tmp_path, error_class) -> None:
    events: list[dict[str, Any]] = []
    env = local(tmp_path, hooks=[Fails(error_class("the hook's own error"))])
    with agents.listen(events.append), pytest.raises(error_class, match="the hook's own error"):
        await agents.Agent(model="m", environment=env).start_session()
    failed = [e for e in checked(events) if e["event"] == "hook_failed"]
    assert [e["error_type"] for e in failed] == [error_class.__name__]
    assert leftovers(tmp_path) == []


# --- plans ------------------------------------------------------------------------


class UsesTicket(agents.SandboxHook):
    async def on_create(self, ctx, *, ticket: Annotated[Ticket, agents.Depends()]) -> None:
        await ctx.sandbox.write_file("ticket.txt", str(ticket.number))


async def test_a_plan_names_each_dependency_s_consumer(tmp_path) -> None:
    agent = agents.Agent(model="m", environment=local(tmp_path, hooks=[UsesTicket()]))
    (hook_plan,) = agent.plan.hooks
    (dependency,) = hook_plan.dependencies["on_create"]
    assert dependency.consumer == "sandbox hook UsesTicket.on_create"
    assert hook_plan.dependencies["on_destroy"] == ()
    with pytest.raises(agents.SessionInputError) as caught:
        await agent.start_session()
    assert str(caught.value).startswith(
        "sandbox hook UsesTicket.on_create needs session input 'ci.ticket'"
    )


class CachedSeed(agents.SandboxHook):
    """Cacheable: writes seed.txt from the ticket; journals each point."""

    def __init__(self, journal: list) -> None:
        self.journal = journal

    def cache_key(self) -> str:
        return "seed-v1"

    async def on_create(self, ctx, *, ticket: Annotated[Ticket, agents.Depends()]) -> None:
        self.journal.append(("seed", "on_create"))
        await ctx.sandbox.write_file("seed.txt", f"ticket {ticket.number}")

    async def on_destroy(self, ctx) -> None:
        self.journal.append(("seed", "on_destroy"))


class Build(agents.SandboxHook):
    """Not cacheable: reads what the cached hook left, writes build.txt."""

    def __init__(self, journal: list) -> None:
        self.journal = journal

    async def on_create(self, ctx) -> None:
        seed = (await ctx.sandbox.read_file("seed.txt")).decode()
        self.journal.append(("build", "on_create", seed))
        await ctx.sandbox.write_file("build.txt", "built")

    async def on_destroy(self, ctx) -> None:
        self.journal.append(("build", "on_destroy"))


SEED_DEFINITION = {"class": f"{__name__}.CachedSeed", "cache_key": "seed-v1"}


def test_a_plan_holds_the_definitions_of_the_leading_cached_hooks(tmp_path) -> None:
    plan = plan_hooks(local(tmp_path, hooks=[CachedSeed([]), Build([]), CachedSeed([])]))
    assert plan.cached == (SEED_DEFINITION,)
    assert [p.name for p in plan.hooks] == ["CachedSeed", "Build", "CachedSeed"]


def test_a_cached_hook_that_reads_a_secret_is_refused(tmp_path) -> None:
    class SecretSeed(CachedSeed):
        async def on_create(self, ctx, *, token: Annotated[Token, agents.Depends()]) -> None:
            pass

    with pytest.raises(SnapshotError) as caught:
        plan_hooks(local(tmp_path, hooks=[SecretSeed([])]))
    assert str(caught.value) == (
        "hook SecretSeed is cached but its on_create reads the secret input 'mh.token': "
        "secrets must never be part of a snapshot"
    )
    # Not cached (after a hook that is not), the same hook is accepted.
    assert plan_hooks(local(tmp_path, hooks=[Build([]), SecretSeed([])])).cached == ()


# --- snapshots, on a backend that can take them ------------------------------------


def image_of(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class SnapshottingLocal(DangerousLocalSandbox):
    """A local backend that can snapshot: a snapshot is a copy of the workspace."""

    backend = "local-snapshots"
    can_snapshot = True

    def __init__(self, *, store: Path, fail_save: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.store = store
        self.fail_save = fail_save
        self.calls: list[tuple[Any, ...]] = []

    async def create(self, *, session_id: str, expires_at: float | None) -> LocalSandbox:
        self.calls.append(("create", session_id, expires_at))
        return await super().create(session_id=session_id, expires_at=expires_at)

    async def snapshot_key(self, *, hooks, inputs) -> str:
        self.calls.append(("snapshot_key", list(hooks), dict(inputs)))
        return snapshot_key({"hooks": list(hooks), "inputs": dict(inputs)})

    async def create_from_snapshot(self, key, *, session_id, expires_at):
        self.calls.append(("create_from_snapshot", key, session_id, expires_at))
        saved = self.store / key
        if not saved.is_dir():
            return None
        sandbox = await super().create(session_id=session_id, expires_at=expires_at)
        shutil.copytree(saved, sandbox.workspace, dirs_exist_ok=True)
        sandbox.snapshot_image = image_of(key)
        return sandbox

    async def save_snapshot(self, sandbox, key) -> str:
        self.calls.append(("save_snapshot", sandbox.session_id, key))
        if self.fail_save:
            raise OSError("no space left for snapshots")
        shutil.copytree(sandbox.workspace, self.store / key)
        return image_of(key)


def snapshotting(tmp_path: Path, journal: list, **options: Any) -> SnapshottingLocal:
    (tmp_path / "sandboxes").mkdir(exist_ok=True)
    return SnapshottingLocal(
        store=tmp_path / "store",
        temp_dir=tmp_path / "sandboxes",
        hooks=[CachedSeed(journal), Build(journal)],
        ttl_seconds=600,
        **options,
    )


async def one_session(agent, number: int, events: list) -> str:
    with agents.listen(events.append):
        async with await agent.start_session(
            session_inputs={"ci.ticket": Ticket(number=number)}
        ) as session:
            return session.id


async def test_the_first_session_saves_a_snapshot_and_the_next_starts_from_it(tmp_path) -> None:
    journal: list = []
    env = snapshotting(tmp_path, journal)
    agent = agents.Agent(model="m", environment=env)
    key = snapshot_key({"hooks": [SEED_DEFINITION], "inputs": {"ci.ticket": {"number": 7}}})

    events: list[dict[str, Any]] = []
    first = await one_session(agent, 7, events)
    assert journal == [
        ("seed", "on_create"),
        ("build", "on_create", "ticket 7"),
        ("build", "on_destroy"),
        ("seed", "on_destroy"),
    ]
    saved = [e for e in checked(events) if e["event"].startswith("snapshot_")]
    assert [(e["event"], e["session_id"], e["key"], e["image_id"]) for e in saved] == [
        ("snapshot_saved", first, key, image_of(key))
    ]
    # Taken right after the cached hook, before the one that is not cached.
    assert sorted(p.name for p in (tmp_path / "store" / key).iterdir()) == ["seed.txt"]
    assert [c[0] for c in env.calls] == [
        "snapshot_key",
        "create_from_snapshot",
        "create",
        "save_snapshot",
    ]
    assert env.calls[0][1:] == ([SEED_DEFINITION], {"ci.ticket": {"number": 7}})
    assert env.calls[3][1:] == (first, key)

    journal.clear()
    env.calls.clear()
    events.clear()
    second = await one_session(agent, 7, events)
    assert journal == [  # the cached on_create is skipped, its on_destroy still runs
        ("build", "on_create", "ticket 7"),
        ("build", "on_destroy"),
        ("seed", "on_destroy"),
    ]
    used = [e for e in checked(events) if e["event"].startswith("snapshot_")]
    assert [(e["event"], e["session_id"], e["key"], e["image_id"]) for e in used] == [
        ("snapshot_used", second, key, image_of(key))
    ]
    assert [c[0] for c in env.calls] == ["snapshot_key", "create_from_snapshot"]
    _, used_key, session_id, expires_at = env.calls[1]
    assert (used_key, session_id) == (key, second)
    assert abs(expires_at - (time.time() + 600)) < 60
    assert {e["session_id"] for e in events} == {second}

    # Another value of the input the cached hook reads: another key, a new snapshot.
    journal.clear()
    env.calls.clear()
    await one_session(agent, 8, [])
    assert journal[:2] == [("seed", "on_create"), ("build", "on_create", "ticket 8")]
    assert env.calls[0][2] == {"ci.ticket": {"number": 8}}
    assert len(list((tmp_path / "store").iterdir())) == 2
    assert leftovers(tmp_path) == []


async def test_a_new_sandbox_gets_the_session_s_expiry(tmp_path) -> None:
    env = snapshotting(tmp_path, [])
    with snapshots_disabled():
        await one_session(agents.Agent(model="m", environment=env), 7, [])
    ((kind, _, expires_at),) = env.calls
    assert kind == "create"
    assert abs(expires_at - (time.time() + 600)) < 60


async def test_no_cache_neither_uses_nor_saves_a_snapshot(tmp_path) -> None:
    journal: list = []
    env = snapshotting(tmp_path, journal)
    agent = agents.Agent(model="m", environment=env)
    await one_session(agent, 7, [])  # a snapshot now exists
    for _ in range(2):
        journal.clear()
        env.calls.clear()
        events: list[dict[str, Any]] = []
        with snapshots_disabled():
            await one_session(agent, 7, events)
        assert [c[0] for c in env.calls] == ["create"]
        assert journal[0] == ("seed", "on_create")
        assert not [e for e in checked(events) if e["event"].startswith("snapshot_")]
    assert len(list((tmp_path / "store").iterdir())) == 1


async def test_without_cached_hooks_no_snapshot_is_looked_for(tmp_path) -> None:
    journal: list = []
    env = snapshotting(tmp_path, journal)
    env.hooks = [Journal("plain", journal)]
    events: list[dict[str, Any]] = []
    with agents.listen(events.append):
        async with await agents.Agent(model="m", environment=env).start_session():
            pass
    assert [c[0] for c in env.calls] == ["create"]
    assert not [e for e in checked(events) if e["event"].startswith("snapshot_")]


async def test_a_failed_snapshot_costs_only_the_cache(tmp_path, caplog) -> None:
    journal: list = []
    env = snapshotting(tmp_path, journal, fail_save=True)
    events: list[dict[str, Any]] = []
    with caplog.at_level(logging.WARNING, logger="runner"):
        session_id = await one_session(agents.Agent(model="m", environment=env), 7, events)
    assert [m for _, _, m in caplog.record_tuples] == [
        f"could not save a snapshot of session {session_id}: OSError: no space left for snapshots"
    ]
    assert not [e for e in checked(events) if e["event"].startswith("snapshot_")]
    assert len(journal) == 4  # every hook ran, the session worked
    assert leftovers(tmp_path) == []


async def test_cached_hooks_on_a_backend_that_cannot_snapshot_just_run(tmp_path, caplog) -> None:
    journal: list = []
    env = local(tmp_path, hooks=[CachedSeed(journal), Build(journal)])
    events: list[dict[str, Any]] = []
    with caplog.at_level(logging.WARNING, logger="runner"):
        await one_session(agents.Agent(model="m", environment=env), 7, events)
    assert caplog.record_tuples == []
    assert journal[:2] == [("seed", "on_create"), ("build", "on_create", "ticket 7")]
    assert not [e for e in checked(events) if e["event"].startswith("snapshot_")]


# --- on_created, for runner serve --------------------------------------------------------


async def test_on_created_gets_the_sandbox_before_any_on_create(tmp_path) -> None:
    seen: list = []

    class Looks(agents.SandboxHook):
        async def on_create(self, ctx) -> None:
            seen.append(("on_create", ctx.sandbox))

    env = local(tmp_path, hooks=[Looks()])
    sandbox = await open_sandbox(
        env,
        plan_hooks(env),
        {},
        session_id="sess_" + "0" * 32,
        expires_at=None,
        on_created=lambda box: seen.append(("created", box)),
    )
    try:
        assert seen == [("created", sandbox), ("on_create", sandbox)]
        assert isinstance(sandbox, LocalSandbox)
    finally:
        await sandbox.delete()


# --- cleanup limits ----------------------------------------------------------------------


async def test_a_slow_on_destroy_is_cut_at_cleanup_timeout_seconds(tmp_path, caplog) -> None:
    journal: list = []
    env = local(tmp_path, hooks=[Journal("slow", journal, destroy_seconds=5)])
    env.cleanup_timeout_seconds = 0.3
    events: list[dict[str, Any]] = []
    session = await agents.Agent(model="m", environment=env).start_session()
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="runner"), agents.listen(events.append):
        await session.close()
    assert time.monotonic() - started < 3
    expected = HookFailure(
        "cleanup",
        "on_destroy",
        "CleanupTimeout",
        "did not finish within cleanup_timeout_seconds=0.3",
    )
    assert session.destroy_failures == [expected]
    assert str(expected) == (
        "sandbox hook cleanup.on_destroy failed: CleanupTimeout: "
        "did not finish within cleanup_timeout_seconds=0.3"
    )
    assert [r.getMessage() for r in caplog.records] == [f"{expected} (session {session.id})"]
    assert [(e["event"], e.get("hook")) for e in checked(events)][1:4] == [
        ("hook_started", "slow"),
        ("hook_cancelled", "slow"),
        ("sandbox_deleting", None),
    ]
    assert leftovers(tmp_path) == []
    assert force_cleanup() == 0  # nothing left registered


async def test_no_cleanup_timeout_lets_on_destroy_finish(tmp_path) -> None:
    journal: list = []
    env = local(tmp_path, hooks=[Journal("slow", journal, destroy_seconds=0.3)])
    env.cleanup_timeout_seconds = None
    session = await agents.Agent(model="m", environment=env).start_session()
    await session.close()
    assert session.destroy_failures == []
    assert journal == [("slow", "on_create"), ("slow", "on_destroy")]
    assert leftovers(tmp_path) == []


async def test_force_cleanup_stops_the_on_destroy_hooks_at_once(tmp_path, caplog) -> None:
    journal: list = []
    env = local(tmp_path, hooks=[Journal("slow", journal, destroy_seconds=20)])
    session = await agents.Agent(model="m", environment=env).start_session()
    forced: list[int] = []
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="runner"):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(session.close)
            while journal[-1] != ("slow", "on_destroy"):
                await anyio.sleep(0.01)
            forced.append(force_cleanup())
    assert time.monotonic() - started < 10
    assert forced == [1]
    expected = HookFailure(
        "cleanup", "on_destroy", "CleanupTimeout", "stopped by a second interrupt"
    )
    assert session.destroy_failures == [expected]
    assert [r.getMessage() for r in caplog.records] == [f"{expected} (session {session.id})"]
    assert leftovers(tmp_path) == []
    assert force_cleanup() == 0


async def test_a_failed_start_s_unwinding_keeps_to_cleanup_timeout_seconds(tmp_path) -> None:
    journal: list = []
    hooks = [
        Journal("slow", journal, destroy_seconds=5),
        Journal("bad", journal, fail_on="on_create"),
    ]
    env = local(tmp_path, hooks=hooks)
    env.cleanup_timeout_seconds = 0.3
    started = time.monotonic()
    with pytest.raises(ValueError, match="bad refused to start"):
        await agents.Agent(model="m", environment=env).start_session()
    assert time.monotonic() - started < 3
    assert journal[-1] == ("slow", "on_destroy")
    assert leftovers(tmp_path) == []


async def test_on_destroy_failures_are_logged_with_the_traceback(tmp_path, caplog) -> None:
    env = local(tmp_path, hooks=[Journal("x", [], fail_on="on_destroy")])
    session = await agents.Agent(model="m", environment=env).start_session()
    with caplog.at_level(logging.ERROR, logger="runner"):
        await session.close()
    (record,) = caplog.records
    assert record.getMessage() == (
        f"sandbox hook x.on_destroy failed: ValueError: x could not clean up (session {session.id})"
    )
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "x could not clean up"


# --- resume_sandbox (runner serve, after a restart) ----------------------------------------


async def a_sandbox(env: DangerousLocalSandbox) -> LocalSandbox:
    return await env.create(session_id="sess_" + "1" * 32, expires_at=None)


async def test_resume_runs_the_on_create_hooks_not_yet_done(tmp_path) -> None:
    journal: list = []
    hooks = [Journal("a", journal), Journal("b", journal), UsesTicket()]
    env = local(tmp_path, hooks=hooks)
    sandbox = await a_sandbox(env)
    inputs = {"ci.ticket": Ticket(number=3)}
    try:
        resumed = await resume_sandbox(sandbox, plan_hooks(env), inputs, completed={0})
        assert resumed is sandbox
        assert journal == [("b", "on_create")]
        assert await sandbox.read_file("ticket.txt") == b"3"
        assert await sandbox.read_file("b.txt") == b"b"
    finally:
        await sandbox.delete()


async def test_a_failed_resume_unwinds_the_hooks_done_before_and_after_the_stop(
    tmp_path,
) -> None:
    journal: list = []
    hooks = [
        Journal("a", journal),
        Journal("b", journal),
        Journal("c", journal, fail_on="on_create"),
    ]
    env = local(tmp_path, hooks=hooks)
    sandbox = await a_sandbox(env)
    events: list[dict[str, Any]] = []
    with agents.listen(events.append), pytest.raises(ValueError, match="c refused to start"):
        await resume_sandbox(sandbox, plan_hooks(env), {}, completed=[0])
    assert journal == [
        ("b", "on_create"),
        ("c", "on_create"),
        ("b", "on_destroy"),
        ("a", "on_destroy"),
    ]
    assert {e["session_id"] for e in checked(events)} == {sandbox.session_id}
    assert leftovers(tmp_path) == []


async def test_a_failed_resume_keeps_to_its_cleanup_timeout(tmp_path) -> None:
    journal: list = []
    hooks = [
        Journal("slow", journal, destroy_seconds=5),
        Journal("bad", journal, fail_on="on_create"),
    ]
    env = local(tmp_path, hooks=hooks)
    sandbox = await a_sandbox(env)
    started = time.monotonic()
    with pytest.raises(ValueError, match="bad refused"):
        await resume_sandbox(sandbox, plan_hooks(env), {}, cleanup_timeout_seconds=0.3)
    assert time.monotonic() - started < 3
    assert journal[-1] == ("slow", "on_destroy")
    assert leftovers(tmp_path) == []


# --- a sandbox that cannot be deleted ---------------------------------------------------------


class UndeletableSandbox(LocalSandbox):
    async def delete(self) -> None:
        await super().delete()
        raise OSError("the engine went away")


class UndeletableLocal(DangerousLocalSandbox):
    backend = "undeletable"

    async def create(self, *, session_id: str, expires_at: float | None) -> LocalSandbox:
        sandbox = await super().create(session_id=session_id, expires_at=expires_at)
        sandbox.__class__ = UndeletableSandbox
        return sandbox


def deletion_failure(caplog, session_id: str) -> logging.LogRecord:
    (record,) = [r for r in caplog.records if r.getMessage().startswith("deleting")]
    assert record.getMessage() == (
        f"deleting the sandbox of session {session_id} failed: OSError: the engine went away"
    )
    assert isinstance(record.exc_info[1], OSError)
    return record


async def test_a_failed_start_whose_sandbox_cannot_be_deleted_raises_the_hook_error(
    tmp_path, caplog
) -> None:
    (tmp_path / "sandboxes").mkdir()
    env = UndeletableLocal(temp_dir=tmp_path / "sandboxes", hooks=[Fails(ValueError("no"))])
    events: list[dict[str, Any]] = []
    with (
        caplog.at_level(logging.ERROR, logger="runner"),
        agents.listen(events.append),
        pytest.raises(ValueError, match="no"),
    ):
        await agents.Agent(model="m", environment=env).start_session()
    session_id = checked(events)[0]["session_id"]
    deletion_failure(caplog, session_id)


async def test_a_failed_resume_whose_sandbox_cannot_be_deleted_raises_the_hook_error(
    tmp_path, caplog
) -> None:
    (tmp_path / "sandboxes").mkdir()
    env = UndeletableLocal(temp_dir=tmp_path / "sandboxes", hooks=[Fails(ValueError("no"))])
    sandbox = await a_sandbox(env)
    with caplog.at_level(logging.ERROR, logger="runner"), pytest.raises(ValueError, match="no"):
        await resume_sandbox(sandbox, plan_hooks(env), {})
    deletion_failure(caplog, sandbox.session_id)
