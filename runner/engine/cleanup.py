"""Closing a sandbox: every ``on_destroy`` once, then the sandbox deleted,
whatever happens (README, "The lifecycle", rules 4 and 5).

The cleanup is shielded from cancellation, so Ctrl-C or a cancelled task
still runs it to the end, within limits: the ``on_destroy`` hooks together
get the environment's ``cleanup_timeout_seconds``, and ``force_cleanup()``
(the CLI's second Ctrl-C) stops them at once; the sandbox is deleted either
way.  At a close, the processes the agent left are killed and the
workspace is handed back to the hooks first, or no ``on_destroy`` runs.
Each failure is logged and reported, never raised past the next hook.
Split from ``lifecycle`` (issue 27).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import anyio

from ..core.errors import AgentsError
from ..core.events import emit
from ..core.redaction import scrub
from ..sandboxes.base import Sandbox
from .hook_points import REPORTED, HookFailure, HookPlan, call_hook
from .inputs import SessionInput, secret_strings

logger = logging.getLogger("runner")


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
            await call_hook(plan, "on_destroy", sandbox, inputs)
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


async def destroy_then_delete(
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
