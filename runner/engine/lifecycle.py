"""The sandbox lifecycle: the one implementation every hook runs through.

Python-class hooks and hooks compiled from YAML both end up here.  The rules
(README, "The lifecycle"), in the order they happen:

1. Inputs first: ``plan_hooks`` reads every hook's ``Depends`` when the agent
   is built; ``resolve_inputs`` validates the session's values before any
   sandbox exists.
2. Create the sandbox (the backend leaves nothing behind if that fails).
3. ``on_create`` of each hook in list order, each with a fresh context;
   then the sandbox is handed to the agent (``Sandbox.hand_to_agent``: on
   Docker its tools run as another uid than the hooks').
4. If an ``on_create`` raises: later hooks do not run, the hooks that
   completed get ``on_destroy`` in reverse order (errors logged), the sandbox
   is deleted, and the hook's own exception propagates.
5. Close: every process the sandbox's commands left running is killed (the
   agent's: nothing it started may run beside a hook), the workspace is
   handed back to the hooks with a new HOME, then ``on_destroy`` of
   every hook in reverse order, each exactly once, errors logged and skipped
   past; then the sandbox is deleted, always.
   Cleanup is shielded from cancellation, so Ctrl-C or a cancelled task still
   runs it to the end, within limits: the ``on_destroy`` hooks together get
   the environment's ``cleanup_timeout_seconds``, and ``force_cleanup()``
   (the CLI's second Ctrl-C) stops them at once; the sandbox is deleted either
   way.  No hook and no sandbox can make a close wait forever.

Snapshots (``core.snapshot_keys``): when the leading hooks are cacheable and the backend
can snapshot (Docker), a session whose key is known starts from the
snapshot and skips those hooks' ``on_create`` (their ``on_destroy`` still
runs); otherwise the sandbox is committed right after the last of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from ..core.errors import AgentsError
from ..core.events import emit
from ..core.hooks import SandboxCallbackContext, SandboxHook
from ..core.redaction import scrub
from ..core.snapshot_keys import SnapshotError, SnapshotWarning, cached_prefix, snapshots_enabled
from ..sandboxes.base import Sandbox, SandboxEnvironment
from .dependencies import Dependency, method_dependencies
from .inputs import SessionInput, secret_strings

logger = logging.getLogger("runner")

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


def _cached_inputs(plan: LifecyclePlan, inputs: Mapping[str, SessionInput]) -> dict[str, Any]:
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


async def _call_hook(
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


async def _destroy_all(
    plans: Iterable[HookPlan],
    sandbox: Sandbox,
    inputs: Mapping[str, SessionInput],
    *,
    into: list[HookFailure],
) -> None:
    """``on_destroy`` of each plan in the order given; log failures, go on.

    Failures are appended to ``into`` as they happen, so a cleanup cut short
    still reports the ones before the cut.
    """
    failures = into
    secrets = secret_strings(inputs.values())
    for plan in plans:
        try:
            await _call_hook(plan, "on_destroy", sandbox, inputs)
        except Exception as exc:
            failure = HookFailure(
                plan.name, "on_destroy", type(exc).__name__, scrub(str(exc), secrets)
            )
            failures.append(failure)
            # The traceback repeats the message, so it is left out when that held a
            # secret; and for an error raised on purpose (a step that failed, a file
            # that was not there), whose message already says what to do.
            traceback = failure.message == str(exc) and not isinstance(exc, AgentsError)
            logger.error(
                "%s (session %s)",
                failure,
                sandbox.session_id,
                exc_info=exc if traceback else None,
                extra=REPORTED,
            )


#: The cleanups under way; ``force_cleanup`` cancels their ``on_destroy`` hooks.
_cleanups: set[anyio.CancelScope] = set()


def force_cleanup() -> int:
    """Stop every ``on_destroy`` still running (the sandboxes are deleted next).

    For a second Ctrl-C: the user chose not to wait for the hooks.  Returns
    how many cleanups were cut short.
    """
    for scope in list(_cleanups):
        scope.cancel()
    return len(_cleanups)


async def _destroy_then_delete(
    plans: Iterable[HookPlan],
    sandbox: Sandbox,
    inputs: Mapping[str, SessionInput],
    *,
    timeout: float | None,
    end_processes: bool = False,
) -> list[HookFailure]:
    """Shielded cleanup: the hooks within ``timeout`` (or until forced), then delete.

    With ``end_processes`` (a close, after the agent may have run), every
    process the sandbox's commands left running is killed first, so nothing
    the agent started runs beside an ``on_destroy`` (issue 26): it could read
    a step's ``secrets:`` from /proc, change files just before a hook uses
    them, or hold every pid.  Then the hooks get a new, empty ``HOME``.  If
    either fails, no ``on_destroy`` runs.
    """
    failures: list[HookFailure] = []
    with anyio.CancelScope(shield=True):
        try:
            if end_processes and not await _end_processes(sandbox, failures):
                plans = ()  # the agent's processes may be alive: no hook's secret meets them
            elif end_processes and not await _fresh_home(sandbox, failures):
                plans = ()  # the hooks would read the agent's dotfiles
            with anyio.CancelScope(deadline=_deadline(timeout)) as hooks_scope:
                _cleanups.add(hooks_scope)
                try:
                    await _destroy_all(plans, sandbox, inputs, into=failures)
                finally:
                    _cleanups.discard(hooks_scope)
            if hooks_scope.cancelled_caught:
                why = (
                    "stopped by a second interrupt"
                    if hooks_scope.cancel_called and not _past(hooks_scope.deadline)
                    else f"did not finish within cleanup_timeout_seconds={timeout:g}"
                )
                failure = HookFailure("cleanup", "on_destroy", "CleanupTimeout", why)
                failures.append(failure)
                logger.error("%s (session %s)", failure, sandbox.session_id, extra=REPORTED)
        finally:
            await _delete(sandbox)
    return failures


#: How long killing the agent's processes before ``on_destroy`` may take.
END_PROCESSES_SECONDS = 60.0
#: How long a hand-over of the workspace between the hooks and the agent may
#: take (a chown of every file: ~10k files a second on a slow disk).
HANDOVER_SECONDS = 600.0


async def _end_processes(sandbox: Sandbox, failures: list[HookFailure]) -> bool:
    """Kill what the sandbox's commands left running; False (a failure
    recorded and logged) if that could not be done."""
    try:
        with anyio.fail_after(END_PROCESSES_SECONDS):
            killed = await sandbox.end_processes()
    except Exception as exc:
        failure = HookFailure(
            "cleanup",
            "on_destroy",
            type(exc).__name__,
            f"the processes left running in the sandbox could not be stopped "
            f"({str(exc) or 'timed out'}), so no on_destroy hook ran (one would run beside them)",
        )
        failures.append(failure)
        logger.error("%s (session %s)", failure, sandbox.session_id, extra=REPORTED)
        return False
    if killed:
        logger.info(
            "killed %d process(es) left running in session %s before on_destroy",
            killed,
            sandbox.session_id,
        )
    return True


async def _fresh_home(sandbox: Sandbox, failures: list[HookFailure]) -> bool:
    """Hand the workspace back to the hooks (``Sandbox.hand_to_hooks``: on
    Docker, what the agent wrote becomes the hooks' uid's) and give the
    ``on_destroy`` hooks a new, empty ``HOME`` (the agent's is its own:
    ``.gitconfig`` or user site-packages would run its code in a hook);
    False (a failure recorded and logged) if either failed."""
    try:
        with anyio.fail_after(HANDOVER_SECONDS):
            await sandbox.hand_to_hooks()
        with anyio.fail_after(END_PROCESSES_SECONDS):
            await sandbox.fresh_home()
    except Exception as exc:
        failure = HookFailure(
            "cleanup",
            "on_destroy",
            type(exc).__name__,
            "could not hand the workspace back to the hooks or give them a new HOME "
            f"({str(exc) or 'timed out'}), so no on_destroy hook ran (one would read the "
            "agent's files as its own)",
        )
        failures.append(failure)
        logger.error("%s (session %s)", failure, sandbox.session_id, extra=REPORTED)
        return False
    return True


def _deadline(timeout: float | None) -> float:
    return anyio.current_time() + timeout if timeout else float("inf")


def _past(deadline: float) -> bool:
    return anyio.current_time() >= deadline


async def _delete(sandbox: Sandbox) -> None:
    emit("sandbox_deleting", session_id=sandbox.session_id)
    await sandbox.delete()
    emit("sandbox_deleted", session_id=sandbox.session_id)


async def open_sandbox(
    environment: SandboxEnvironment,
    plan: LifecyclePlan,
    inputs: Mapping[str, SessionInput],
    *,
    session_id: str,
    expires_at: float | None,
    on_created: Callable[[Sandbox], None] | None = None,
) -> Sandbox | None:
    """Create the sandbox and run every ``on_create``; unwind completely on failure.

    ``on_created(sandbox)`` is called once the sandbox exists, before any
    ``on_create`` (``runner serve`` records where the sandbox is, so a
    restarted server can find it again).
    """
    if not environment.creates_sandbox:
        return None
    emit("sandbox_creating", session_id=session_id, backend=environment.backend)
    started = time.perf_counter()
    key: str | None = None
    sandbox: Any = None
    if plan.cached and snapshots_enabled() and environment.can_snapshot:
        key = await environment.snapshot_key(hooks=plan.cached, inputs=_cached_inputs(plan, inputs))
        sandbox = await environment.create_from_snapshot(
            key, session_id=session_id, expires_at=expires_at
        )
    if sandbox is None:
        sandbox = await environment.create(session_id=session_id, expires_at=expires_at)
    emit(
        "sandbox_created",
        session_id=session_id,
        backend=environment.backend,
        duration_seconds=time.perf_counter() - started,
    )
    if on_created is not None:
        on_created(sandbox)
    snapshot = getattr(sandbox, "snapshot_image", None) if key else None
    if snapshot is not None:
        emit("snapshot_used", session_id=session_id, key=key, image_id=snapshot)
    completed: list[HookPlan] = []
    try:
        for index, hook_plan in enumerate(plan.hooks):
            if snapshot is None or index >= len(plan.cached):
                await _call_hook(hook_plan, "on_create", sandbox, inputs)
            completed.append(hook_plan)  # a skipped cached hook still gets on_destroy
            if key is not None and snapshot is None and index + 1 == len(plan.cached):
                await _save_snapshot(environment, sandbox, key)
        await _hand_to_agent(sandbox)
    except BaseException:
        try:
            await _destroy_then_delete(
                reversed(completed),
                sandbox,
                inputs,
                timeout=environment.cleanup_timeout_seconds,
            )
        except Exception as exc:
            logger.error(
                "deleting the sandbox of session %s failed: %s: %s",
                session_id,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
        raise
    return sandbox


async def resume_sandbox(
    sandbox: Sandbox,
    plan: LifecyclePlan,
    inputs: Mapping[str, SessionInput],
    *,
    completed: Collection[int] = (),
    cleanup_timeout_seconds: float | None = None,
) -> Sandbox:
    """Finish opening a sandbox that a stopped process had created.

    ``on_create`` runs for each hook whose position is not in ``completed``
    (those finished before the stop), in list order; on failure the same
    unwinding as :func:`open_sandbox`: ``on_destroy`` of every hook whose
    ``on_create`` completed, then the sandbox is deleted.
    """
    done: list[HookPlan] = []
    try:
        for index, hook_plan in enumerate(plan.hooks):
            if index not in completed:
                await _call_hook(hook_plan, "on_create", sandbox, inputs)
            done.append(hook_plan)
        await _hand_to_agent(sandbox)
    except BaseException:
        try:
            await _destroy_then_delete(
                reversed(done), sandbox, inputs, timeout=cleanup_timeout_seconds
            )
        except Exception as exc:
            logger.error(
                "deleting the sandbox of session %s failed: %s: %s",
                sandbox.session_id,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
        raise
    return sandbox


async def _hand_to_agent(sandbox: Sandbox) -> None:
    """After the last ``on_create``: the sandbox is the agent's from now
    (``Sandbox.hand_to_agent``); a failure unwinds like a failed hook."""
    with anyio.fail_after(HANDOVER_SECONDS):
        await sandbox.hand_to_agent()


async def _save_snapshot(environment: SandboxEnvironment, sandbox: Sandbox, key: str) -> None:
    """Commit the sandbox for later sessions; a failure costs only the cache."""
    started = time.perf_counter()
    try:
        image = await environment.save_snapshot(sandbox, key)
    except Exception as exc:
        logger.warning(
            "could not save a snapshot of session %s: %s: %s",
            sandbox.session_id,
            type(exc).__name__,
            exc,
        )
        return
    emit(
        "snapshot_saved",
        session_id=sandbox.session_id,
        key=key,
        image_id=image,
        duration_seconds=time.perf_counter() - started,
    )


async def close_sandbox(
    sandbox: Sandbox,
    plan: LifecyclePlan,
    inputs: Mapping[str, SessionInput],
    *,
    cleanup_timeout_seconds: float | None = None,
) -> list[HookFailure]:
    """Run every ``on_destroy`` in reverse, then delete the sandbox, whatever happens.

    Returns the ``on_destroy`` failures (already logged), so a caller such as
    the CLI can fail the run: an artifact that was not saved is a failure.
    """
    return await _destroy_then_delete(
        reversed(plan.hooks),
        sandbox,
        inputs,
        timeout=cleanup_timeout_seconds,
        end_processes=True,
    )
