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

What is *not* journaled yet (docs/serve-design.md): the single
``ctx.sandbox`` calls inside a Python hook, model replies and tool calls of
a turn.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import anyio

from .._hooks import SandboxCallbackContext
from .._lifecycle import LifecyclePlan
from .._time import current_clock
from ..config.steps import Paths, StepsHook
from ._store import WHOLE_HOOK, Store


def journal_steps(plan: LifecyclePlan, store: Store) -> None:
    """Wrap every step of every YAML hook of ``plan`` (a per-session compile)."""
    for hook_index, hook_plan in enumerate(plan.hooks):
        hook = hook_plan.hook
        if not isinstance(hook, StepsHook):
            continue
        for point, steps in (("on_create", hook.create_steps), ("on_destroy", hook.destroy_steps)):
            for step_index, step in enumerate(steps):
                # An instance attribute shadows the class's method: this session only.
                step.run = _journaled(store, hook_index, point, step_index, step.run)  # type: ignore[method-assign]


def _journaled(store: Store, hook: int, point: str, step: int, run: Any) -> Any:
    async def run_once(
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        recorded = store.finished_step(ctx.session_id, hook, point, step)
        if recorded is not None:
            return recorded
        details = await run(ctx, context, paths, secrets)
        store.finish_step(ctx.session_id, hook, point, step, details)
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


def record_hook_point(store: Store, plan: LifecyclePlan, session_id: str, event: dict) -> None:
    """Journal a ``hook_finished`` event as its hook point being done."""
    index = _hook_index(store, plan, session_id, event)
    if index is not None:
        store.finish_step(session_id, index, event["point"], WHOLE_HOOK, {})


def follow_hook_clock(store: Store, plan: LifecyclePlan, session_id: str, event: dict) -> None:
    """Give the hook about to run a replaying clock; take it away when it ends.

    Called by the session's event listener, which runs inside the hook's own
    task and context (``emit`` calls listeners synchronously), so the clock
    set at ``hook_started`` is the one the hook's ``runner.now()`` sees.
    """
    if event["event"] == "hook_started":
        index = _hook_index(store, plan, session_id, event)
        if index is not None:
            current_clock.set(ReplayClock(store, session_id, index, event["point"]))
    else:
        current_clock.set(None)


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
            self.store.finish_step(self.session_id, self.hook, key, number, recorded)
        await anyio.sleep(max(0.0, recorded["until"] - time.time()))
