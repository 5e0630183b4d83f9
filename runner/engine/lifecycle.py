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

This module keeps the order (open, resume, close); the hooks' plan and one
call of a hook point are ``hook_points``'s, and the close's shielded
cleanup (rules 4 and 5) is ``cleanup``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import anyio

from ..core.events import emit
from ..core.snapshot_keys import snapshots_enabled
from ..sandboxes.base import Sandbox, SandboxEnvironment
from .cleanup import HANDOVER_SECONDS, destroy_then_delete
from .hook_points import HookFailure, HookPlan, LifecyclePlan, cached_inputs, call_hook
from .inputs import SessionInput

logger = logging.getLogger("runner")


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
        key = await environment.snapshot_key(hooks=plan.cached, inputs=cached_inputs(plan, inputs))
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
                await call_hook(hook_plan, "on_create", sandbox, inputs)
            completed.append(hook_plan)  # a skipped cached hook still gets on_destroy
            if key is not None and snapshot is None and index + 1 == len(plan.cached):
                await _save_snapshot(environment, sandbox, key)
        await _hand_to_agent(sandbox)
    except BaseException:
        try:
            await destroy_then_delete(
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
                await call_hook(hook_plan, "on_create", sandbox, inputs)
            done.append(hook_plan)
        await _hand_to_agent(sandbox)
    except BaseException:
        try:
            await destroy_then_delete(
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
    return await destroy_then_delete(
        reversed(plan.hooks),
        sandbox,
        inputs,
        timeout=cleanup_timeout_seconds,
        end_processes=True,
    )
