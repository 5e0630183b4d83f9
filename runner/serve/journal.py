"""The step journal: a finished step is recorded before the next begins, and
a step recorded as finished is not run again.

Two granularities, both keyed by the hook's position in the environment's
hook list (names may repeat):

- each step of a YAML hook (``StepsHook``): its ``run`` is wrapped so that it
  first looks the step up in the journal (found: the step finished before a
  stop; its recorded details are returned, as a replay, without running it)
  and records the step's details as soon as it succeeds;
- each hook point as a whole (``hook_finished`` events), so a Python hook
  whose ``on_create`` completed before a stop is not called again.

- ``runner.now()`` and ``runner.sleep()`` called by a hook: the n-th call of
  each in a hook point is recorded (the time; the moment the sleep ends), so
  a hook point that runs again after a restart sees the recorded time, and
  sleeps only what is left of a sleep that had started.
- each ``ctx.sandbox`` call of a Python hook (``JournaledSandbox``): the n-th
  call of a hook point is recorded with its result, so a hook point cut off
  by a restart gets the results of the calls it had finished without running
  them again (a call that differs from the recorded one at its place stops
  the hook: its code is not deterministic, see ``ReplayMismatchError``);
- each model reply and each tool call of the turn in flight
  (``JournaledModel``, and ``JournaledSandbox`` for the tools), so a turn cut
  off by a restart goes on from where it was.  A turn's records are dropped
  when it ends, in the transaction that stores the conversation.

What is recorded is scrubbed of the session's secrets, like every event: a
replayed result shows ``***`` where a secret was.  A call that raised is not
recorded (it runs again), nor is a file read larger than
``MAX_RECORDED_READ`` (it is read again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from ..config.steps import Paths, StepsHook
from ..core.clock import current_clock
from ..core.events import scrubbed
from ..core.hooks import SandboxCallbackContext
from ..engine.hook_points import LifecyclePlan, hook_sandbox
from ..models.protocol import ModelReply, ToolCall
from ..sandboxes.base import Sandbox, SandboxExecutionResult
from .store.base import TURN, WHOLE_HOOK, Store

#: A file read larger than this is not recorded: it is read again at replay.
MAX_RECORDED_READ = 1 << 20


#: Awaited before an ``on_create`` step that has not finished runs: a
#: draining server parks the session there (``SessionWork.between_steps``).
BeforeStep = Callable[[str], Awaitable[None]]


def journal_steps(plan: LifecyclePlan, store: Store, before_step: BeforeStep | None = None) -> None:
    """Wrap every step of every YAML hook of ``plan`` (a per-session compile)."""
    for hook_index, hook_plan in enumerate(plan.hooks):
        hook = hook_plan.hook
        if not isinstance(hook, StepsHook):
            continue
        for point, steps in (("on_create", hook.create_steps), ("on_destroy", hook.destroy_steps)):
            gate = before_step if point == "on_create" else None
            for step_index, step in enumerate(steps):
                # An instance attribute shadows the class's method: this session only.
                step.run = _journaled(store, hook_index, point, step_index, step.run, gate)  # type: ignore[method-assign]


def _journaled(
    store: Store, hook: int, point: str, step: int, run: Any, before: BeforeStep | None
) -> Any:
    async def run_once(
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        recorded = await store.read(store.finished_step, ctx.session_id, hook, point, step)
        if recorded is not None:
            return recorded
        await store.settle(ctx.session_id)  # what came before is durable before this runs
        if before is not None:
            await before(ctx.session_id)
        details = await run(ctx, context, paths, secrets)
        # Committed with the step's events, before the next step begins.
        await store.finish_step_async(ctx.session_id, hook, point, step, details)
        return details

    return run_once


def _hook_index(store: Store, plan: LifecyclePlan, session_id: str, event: dict) -> int | None:
    """The position of the hook an event is about: the first of its name whose
    point has not finished."""
    done = store.finished_hooks(session_id, event["point"])
    for index, hook_plan in enumerate(plan.hooks):
        if hook_plan.name == event["hook"] and index not in done:
            return index
    return None


#: The position of each hook running now, found at its ``hook_started``, by
#: ``(session, point, hook name)``: its ``hook_finished`` needs no second look-up.
_running: dict[tuple[str, str, str], int | None] = {}


def record_hook_point(store: Store, plan: LifecyclePlan, session_id: str, event: dict) -> None:
    """Journal a ``hook_finished`` event as its hook point being done.

    Queued, not waited for (the event listener cannot await): it commits
    before the session's next step, sandbox call or model call
    (``Store.settle``) or its next durable write, whichever comes first.  A
    Python hook's effects outside ``ctx.sandbox`` do not wait for it: a crash
    in those few milliseconds runs the finished hook point again."""
    key = (session_id, event["point"], event["hook"])
    index = _running.pop(key) if key in _running else _hook_index(store, plan, session_id, event)
    if index is not None:
        store.finish_step_soon(session_id, index, event["point"], WHOLE_HOOK, {})


def follow_hook_clock(
    store: Store,
    plan: LifecyclePlan,
    session_id: str,
    event: dict,
    sandbox: Sandbox | None = None,
) -> None:
    """Give the hook about to run a replaying clock and (a Python hook, given
    the session's ``sandbox``) a journaling sandbox; take both away when it ends.

    Called by the session's event listener, which runs inside the hook's own
    task and context (``emit`` calls listeners synchronously), so the clock
    set at ``hook_started`` is the one the hook's ``runner.now()`` sees, and
    the sandbox the one the lifecycle hands it as ``ctx.sandbox``.
    """
    if event["event"] == "hook_started":
        index = _hook_index(store, plan, session_id, event)
        _running[(session_id, event["point"], event["hook"])] = index
        if index is not None:
            current_clock.set(ReplayClock(store, session_id, index, event["point"]))
            # A YAML hook's steps are journaled one by one (journal_steps):
            # its calls are not numbered across steps a replay skips.
            if sandbox is not None and not isinstance(plan.hooks[index].hook, StepsHook):
                point = event["point"]
                hook_sandbox.set(
                    JournaledSandbox(
                        sandbox,
                        store,
                        session_id,
                        hook=index,
                        point=f"{point}:sandbox",
                        scope=f"hook {event['hook']}.{point}",
                    )
                )
    else:
        if event["event"] != "hook_finished":  # hook_finished: record_hook_point's
            _running.pop((session_id, event["point"], event["hook"]), None)
        current_clock.set(None)
        hook_sandbox.set(None)


class ReplayClock:
    """``runner.now()``/``runner.sleep()`` of one hook point, journaled by call number."""

    def __init__(self, store: Store, session_id: str, hook: int, point: str) -> None:
        self.store = store
        self.session_id = session_id
        self.hook = hook
        self.point = point
        self.calls = {"now": 0, "sleep": 0}

    def _next(self, kind: str) -> tuple[str, int]:
        number = self.calls[kind]
        self.calls[kind] += 1
        return f"{self.point}:{kind}", number

    def now(self) -> datetime:
        key, number = self._next("now")
        recorded = self.store.finished_step(self.session_id, self.hook, key, number)
        if recorded is not None:
            return datetime.fromtimestamp(recorded["time"], UTC)
        moment = datetime.now(UTC)
        self.store.finish_step(
            self.session_id, self.hook, key, number, {"time": moment.timestamp()}
        )
        return moment

    async def sleep(self, seconds: float) -> None:
        key, number = self._next("sleep")
        recorded = self.store.finished_step(self.session_id, self.hook, key, number)
        if recorded is None:
            recorded = {"until": time.time() + seconds}
            await self.store.finish_step_async(self.session_id, self.hook, key, number, recorded)
        await anyio.sleep(max(0.0, recorded["until"] - time.time()))


class ReplayMismatchError(RuntimeError):
    """A replayed hook point made another call than the one recorded at its
    place: its code is not deterministic up to that call (the replay rule),
    so its recorded results cannot be trusted for what follows."""


def _fingerprint(kind: str, *arguments: Any) -> str:
    """What identifies a call in the journal: its kind and a digest of its
    arguments, scrubbed first (a digest of a short secret could be reversed)."""
    text = json.dumps([kind, *scrubbed(list(arguments))], default=repr)
    return f"{kind}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _describe(kind: str, first: Any) -> str:
    shown = scrubbed(first) if isinstance(first, str) else first
    return f"{kind}({shown!r:.60})"


class JournaledSandbox(Sandbox):
    """The session's sandbox, with each call recorded by its number in a scope
    (one hook point, or the turn in flight): when the scope runs again after
    a restart, the n-th call returns the n-th recorded result.

    Calls are numbered in the order they start; concurrent calls from one
    hook point would number differently on a second run, so a hook point that
    runs sandbox calls concurrently is not replayable call by call (its
    calls then run again: ``ReplayMismatchError`` stops it if they differ).
    """

    def __init__(
        self, inner: Sandbox, store: Store, session_id: str, *, hook: int, point: str, scope: str
    ) -> None:
        self.inner = inner
        self.store = store
        self.journal_session = session_id
        self.hook = hook
        self.point = point
        self.scope = scope
        self.calls = 0
        self.session_id = inner.session_id
        self.workspace = inner.workspace
        self.default_exec_timeout_seconds = inner.default_exec_timeout_seconds
        self.max_file_bytes = inner.max_file_bytes

    def __getattr__(self, name: str) -> Any:  # root, container_id, ...: the real sandbox's
        return getattr(self.inner, name)

    def _recorded(self, fingerprint: str, described: str) -> tuple[int, dict | None]:
        number = self.calls
        self.calls += 1
        recorded = self.store.finished_step(self.journal_session, self.hook, self.point, number)
        if recorded is not None and recorded.get("call") != fingerprint:
            raise ReplayMismatchError(
                f"{self.scope}: sandbox call {number + 1} was {recorded.get('described')} before "
                f"the restart and is {described} now; a hook point that runs again must make "
                "the same calls in the same order (take time and randomness from runner.now() "
                "and the journal, not the clock)"
            )
        return number, recorded

    async def _record(self, number: int, fingerprint: str, described: str, result: dict) -> None:
        await self.store.finish_step_async(
            self.journal_session,
            self.hook,
            self.point,
            number,
            {"call": fingerprint, "described": described, **result},
        )

    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        fingerprint = _fingerprint("execute", command, timeout_seconds, dict(env or {}), cwd)
        described = _describe("execute", command)
        number, recorded = self._recorded(fingerprint, described)
        if recorded is not None:
            return SandboxExecutionResult(**recorded["result"])
        await self.store.settle(self.journal_session)
        result = await self.inner.execute(
            command, timeout_seconds=timeout_seconds, env=env, cwd=cwd
        )
        fields = {
            "exit_code": result.exit_code,
            "stdout": scrubbed(result.stdout),
            "stderr": scrubbed(result.stderr),
            "timed_out": result.timed_out,
            "duration_seconds": result.duration_seconds,
            "output_truncated": result.output_truncated,
        }
        await self._record(number, fingerprint, described, {"result": fields})
        return result

    async def read_file(self, path: str) -> bytes:
        fingerprint = _fingerprint("read_file", path)
        described = _describe("read_file", path)
        number, recorded = self._recorded(fingerprint, described)
        if recorded is not None and "data" in recorded:
            return base64.b64decode(recorded["data"])
        await self.store.settle(self.journal_session)
        data = await self.inner.read_file(path)
        kept = (
            {"data": base64.b64encode(scrubbed(data)).decode()}
            if len(data) <= MAX_RECORDED_READ
            else {}
        )
        await self._record(number, fingerprint, described, kept)
        return data

    async def read_file_limited(self, path: str, limit: int) -> bytes:
        fingerprint = _fingerprint("read_file_limited", path, limit)
        described = _describe("read_file", path)
        number, recorded = self._recorded(fingerprint, described)
        if recorded is not None and "data" in recorded:
            return base64.b64decode(recorded["data"])
        await self.store.settle(self.journal_session)
        data = await self.inner.read_file_limited(path, limit)
        kept = (
            {"data": base64.b64encode(scrubbed(data)).decode()}
            if len(data) <= MAX_RECORDED_READ
            else {}
        )
        await self._record(number, fingerprint, described, kept)
        return data

    async def write_file(self, path: str, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        # The digest of the scrubbed content: one of a short secret could be reversed.
        fingerprint = _fingerprint("write_file", path, hashlib.sha256(scrubbed(raw)).hexdigest())
        described = _describe("write_file", path)
        number, recorded = self._recorded(fingerprint, described)
        if recorded is not None:
            return
        await self.store.settle(self.journal_session)
        await self.inner.write_file(path, data)
        await self._record(number, fingerprint, described, {})

    async def save_file(self, path: str, target: Path) -> int:
        fingerprint = _fingerprint("save_file", path, str(target))
        described = _describe("save_file", path)
        number, recorded = self._recorded(fingerprint, described)
        if recorded is not None and Path(target).exists():
            return int(recorded["size"])
        await self.store.settle(self.journal_session)
        size = await self.inner.save_file(path, target)
        await self._record(number, fingerprint, described, {"size": size})
        return size

    async def delete(self) -> None:  # the session's, not a hook's: never replayed
        await self.inner.delete()


class JournaledModel:
    """The agent's model for the turn in flight: its n-th reply is recorded
    (scrubbed), and returned instead of asking the model again when the turn
    runs again after a restart."""

    def __init__(self, model: Any, store: Store, session_id: str) -> None:
        self.model = model
        self.store = store
        self.session_id = session_id
        self.calls = 0

    async def complete(self, messages: Any, tools: Any) -> ModelReply:
        number = self.calls
        self.calls += 1
        recorded = self.store.finished_step(self.session_id, TURN, "turn:model", number)
        if recorded is not None:
            return ModelReply(
                text=recorded["text"],
                tool_calls=tuple(ToolCall(*call) for call in recorded["tool_calls"]),
                finish_reason=recorded["finish_reason"],
                refusal=recorded["refusal"],
            )
        await self.store.settle(self.session_id)
        reply = await self.model.complete(messages, tools)
        await self.store.finish_step_async(
            self.session_id,
            TURN,
            "turn:model",
            number,
            scrubbed(
                {
                    "text": reply.text,
                    "tool_calls": [[c.id, c.name, c.arguments] for c in reply.tool_calls],
                    "finish_reason": reply.finish_reason,
                    "refusal": reply.refusal,
                }
            ),
        )
        return reply


def journal_turn(store: Store, session_id: str) -> Any:
    """A ``Session.turn_wrapper``: the turn's model replies and tool calls journaled."""

    def wrap(model: Any, sandbox: Sandbox | None) -> tuple[Any, Sandbox | None]:
        journaled = (
            None
            if sandbox is None
            else JournaledSandbox(
                sandbox, store, session_id, hook=TURN, point="turn:sandbox", scope="the turn"
            )
        )
        return JournaledModel(model, store, session_id), journaled

    return wrap
