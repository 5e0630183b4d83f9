"""The hooks' two points, ``on_create`` and ``on_destroy``: what each reads,
planned once per environment, and one call of one of them.

``plan_hooks`` reads every hook's ``Depends`` when the agent is built (a
wrong signature is an ``SdkError`` then, not mid-session) and says which
leading hooks a snapshot can stand in for.  ``call_hook`` runs one point
with its inputs and a fresh context, between the ``hook_*`` events, and
marks a failure with the hook's name.  The order the points run in, and
what a failure undoes, are ``lifecycle``'s and ``cleanup``'s.  Split from
``lifecycle`` (issue 27).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from ..core.events import emit
from ..core.hooks import SandboxCallbackContext, SandboxHook
from ..core.redaction import scrub
from ..core.snapshot_keys import SnapshotError, SnapshotWarning, cached_prefix
from ..sandboxes.base import Sandbox, SandboxEnvironment
from .dependencies import Dependency, method_dependencies
from .inputs import SessionInput, secret_strings

HookPoint = Literal["on_create", "on_destroy"]

#: What the hook about to run is given as ``ctx.sandbox``, if not the sandbox
#: itself: set by a ``hook_started`` listener (listeners run in the hook's own
#: task, so the value is that hook point's).  ``runner serve`` gives a Python
#: hook a sandbox that journals each call, so a hook point cut off by a
#: restart replays the calls it had finished instead of running them again.
hook_sandbox: contextvars.ContextVar[Sandbox | None] = contextvars.ContextVar(
    "hook_sandbox", default=None
)


@dataclass(frozen=True)
class HookPlan:
    """A hook and the session inputs each of its two points needs."""

    hook: SandboxHook
    dependencies: Mapping[HookPoint, tuple[Dependency, ...]]

    @property
    def name(self) -> str:
        return self.hook.display_name


@dataclass(frozen=True)
class LifecyclePlan:
    """Everything known about an environment's hooks before any session starts."""

    hooks: tuple[HookPlan, ...]
    #: The definitions of the leading cacheable hooks (``_cache.cached_prefix``).
    cached: tuple[Any, ...] = ()

    @property
    def dependencies(self) -> list[Dependency]:
        return [d for plan in self.hooks for point in plan.dependencies.values() for d in point]


def plan_hooks(environment: SandboxEnvironment) -> LifecyclePlan:
    """Read the hooks' signatures once; a wrong one is an ``SdkError`` now, not mid-session."""
    plans = []
    if environment.creates_sandbox:
        for hook in environment.hooks:
            dependencies: dict[HookPoint, tuple[Dependency, ...]] = {}
            for point in ("on_create", "on_destroy"):
                consumer = f"sandbox hook {hook.display_name}.{point}"
                method = getattr(hook, point)
                dependencies[point] = tuple(method_dependencies(method, consumer=consumer))
            plans.append(HookPlan(hook, dependencies))
    cached = tuple(cached_prefix([p.hook for p in plans]))
    for hook_plan in plans[: len(cached)]:
        for dependency in hook_plan.dependencies["on_create"]:
            if dependency.input_class.__secret__:
                raise SnapshotError(
                    f"hook {hook_plan.name} is cached but its on_create reads the secret input "
                    f"{dependency.input_id!r}: secrets must never be part of a snapshot"
                )
    if cached and not environment.can_snapshot:
        names = ", ".join(p.name for p in plans[: len(cached)])
        warnings.warn(
            SnapshotWarning(
                f"hook {names} is cached (cache = True), but the {environment.backend} "
                "sandbox cannot snapshot a workspace: its on_create runs in every session"
            ),
            stacklevel=3,
        )
    return LifecyclePlan(tuple(plans), cached)


def cached_inputs(plan: LifecyclePlan, inputs: Mapping[str, SessionInput]) -> dict[str, Any]:
    """The values the cached hooks' ``on_create`` reads: part of the snapshot key."""
    return {
        d.input_id: inputs[d.input_id].to_dict()
        for hook_plan in plan.hooks[: len(plan.cached)]
        for d in hook_plan.dependencies["on_create"]
    }


#: Marks a log record of a failure the session also reports (its
#: ``destroy_failures``, a ``hook_failed`` event): ``runner run`` shows
#: those itself and leaves such records out (``cli/run.py``).
REPORTED = {"runner_reported": True}


@dataclass(frozen=True)
class HookFailure:
    """An ``on_destroy`` that raised: logged, skipped past, and reported at close."""

    hook: str
    point: HookPoint
    error_type: str
    message: str

    def __str__(self) -> str:
        return f"sandbox hook {self.hook}.{self.point} failed: {self.error_type}: {self.message}"


async def call_hook(
    plan: HookPlan,
    point: HookPoint,
    sandbox: Sandbox,
    inputs: Mapping[str, SessionInput],
) -> None:
    """Run one hook point.  A failure is reported (secrets scrubbed) and re-raised,
    marked with ``runner_hook = (name, point)`` so callers can say which hook it was."""
    kwargs: dict[str, Any] = {
        d.parameter: d.input_class.from_value(inputs[d.input_id], consumer=d.consumer)
        for d in plan.dependencies[point]
    }
    emit("hook_started", session_id=sandbox.session_id, hook=plan.name, point=point)
    given = hook_sandbox.get() or sandbox
    hook_sandbox.set(None)  # this hook's only: never the next one's, whatever happens
    ctx = SandboxCallbackContext(sandbox=given, session_id=sandbox.session_id)
    started = time.perf_counter()
    try:
        await getattr(plan.hook, point)(ctx, **kwargs)
    except anyio.get_cancelled_exc_class():
        emit(
            "hook_cancelled",
            session_id=sandbox.session_id,
            hook=plan.name,
            point=point,
            duration_seconds=time.perf_counter() - started,
        )
        raise
    except Exception as exc:
        if getattr(exc, "runner_hook", None) is None:
            with contextlib.suppress(AttributeError, TypeError):
                exc.runner_hook = (plan.name, point)  # type: ignore[attr-defined]
        emit(
            "hook_failed",
            session_id=sandbox.session_id,
            hook=plan.name,
            point=point,
            duration_seconds=time.perf_counter() - started,
            error_type=type(exc).__name__,
            error=scrub(str(exc), secret_strings(inputs.values())),
        )
        raise
    emit(
        "hook_finished",
        session_id=sandbox.session_id,
        hook=plan.name,
        point=point,
        duration_seconds=time.perf_counter() - started,
    )
