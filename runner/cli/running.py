"""Running whole sessions: one (``run_once``) or many at a time (``run_many``).

What ``runner run`` does, as library functions: start a session, run the
prompt if there is one, close the session, and sum it all up as an exit code
and messages instead of exceptions, because a CI job wants an outcome per
session, not a traceback.  The CLI only prints what these return: a
``RunOutcome`` becomes the ``--json`` ``result`` event, and a ``CloseTrace``
listening to a session's events says, after an interrupt, what its cleanup
really did.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..core.events import listen, scrubbed
from ..core.output import listen_output

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class RunOutcome:
    """How one session went: an exit code (0 ok, 1 failed, 2 usage) and why."""

    exit_code: int = EXIT_OK
    text: str | None = None
    messages: list[str] = field(default_factory=list)
    duration_seconds: float = 0.0
    session_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    @property
    def error(self) -> str | None:
        """Why it failed, as one text (the messages, one per line); None on success."""
        if self.ok:
            return None
        return "\n".join(self.messages) or f"exited {self.exit_code}"

    def as_event(self, kind: str = "result", **fields: Any) -> dict[str, Any]:
        """This outcome as a ``--json`` event (``result`` or ``set_result``); ``fields``
        add to it or replace its values (the CLI's ``result`` gives the whole
        command's duration)."""
        return {
            "event": kind,
            "time": time.time(),
            "session_id": self.session_id,
            "exit_code": self.exit_code,
            "duration_seconds": self.duration_seconds,
            "text": self.text,
            "error": self.error,
            "messages": list(self.messages),
            **fields,
        }


_DESTROY_ENDINGS = {"hook_finished": "ok", "hook_failed": "failed", "hook_cancelled": "stopped"}


@dataclass
class CloseTrace:
    """An event listener that records what one session's cleanup really did.

    After an interrupt the run has no outcome to report, only what happened
    on the way out; :meth:`describe` says it from the events (which
    ``on_destroy`` hooks ran and how, whether the sandbox was deleted), not
    from what the lifecycle is supposed to do.
    """

    session_id: str | None = None
    sandbox_created: bool = False
    sandbox_deleted: bool = False
    #: Hooks whose on_create completed, in order: the ones owed an on_destroy.
    created: list[str] = field(default_factory=list)
    #: on_destroy of each hook that started one, in run order: ok, failed or stopped.
    destroyed: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "session_starting":
            self.session_id = event["session_id"]
        elif kind == "sandbox_created":
            self.sandbox_created = True
        elif kind == "sandbox_deleted":
            self.sandbox_deleted = True
        elif kind == "hook_finished" and event["point"] == "on_create":
            self.created.append(event["hook"])
        elif kind in _DESTROY_ENDINGS and event["point"] == "on_destroy":
            self.destroyed.append((event["hook"], _DESTROY_ENDINGS[kind]))

    def describe(self) -> str:
        """What the cleanup did, e.g. ``on_destroy ran for b (ok), a (failed); the
        sandbox was deleted``."""
        if self.session_id is None:
            return "no session had started, so nothing was created"
        if not self.sandbox_created:
            return "no sandbox had been created, so no hook ran"
        parts = [self._hooks_text()]
        ran = {hook for hook, _ in self.destroyed}
        skipped = [hook for hook in reversed(self.created) if hook not in ran]
        if skipped:
            parts.append(f"on_destroy did not run for {', '.join(skipped)}")
        parts.append(f"the sandbox was {'' if self.sandbox_deleted else 'NOT '}deleted")
        return "; ".join(parts)

    def _hooks_text(self) -> str:
        if self.destroyed:
            ran = ", ".join(f"{hook} ({status})" for hook, status in self.destroyed)
            return f"on_destroy ran for {ran}"
        if self.created:
            return "no on_destroy ran"
        return "no on_destroy ran (no hook had completed on_create)"


def _usage_errors() -> tuple[type[BaseException], ...]:
    from ..config.templates import TemplateSecurityError
    from ..core.errors import (
        MissingExtraError,
        SandboxUnavailableError,
        SdkError,
        SessionInputError,
    )
    from ..models.chat_completions import MissingCredentialsError

    return (
        SessionInputError,
        TemplateSecurityError,
        SdkError,
        SandboxUnavailableError,
        MissingExtraError,
        MissingCredentialsError,
    )


async def run_once(
    agent: Any, session_inputs: Mapping[str, Any] | None = None, *, prompt: str | None = None
) -> RunOutcome:
    """Start a session, run ``prompt`` if given, close it; never raises for a failure.

    Cancellation still propagates (after the session closed), so a caller
    can tell an interrupted run from a failed one.
    """
    from ..core.errors import SandboxSetupError
    from ..models.protocol import Completed

    outcome = RunOutcome()
    hook_errors: dict[tuple[str, str], str] = {}

    def remember(event: dict[str, Any]) -> None:
        if event["event"] == "hook_failed":  # its message has secrets scrubbed
            hook_errors[(event["hook"], event["point"])] = event["error"]
        elif event["event"] == "session_starting":
            outcome.session_id = event["session_id"]

    started = time.perf_counter()
    session: Any = None
    with listen(remember):
        try:
            if prompt is not None:
                agent.resolve_model()  # a model that cannot run fails before any sandbox
            session = await agent.start_session(session_inputs=session_inputs)
            async with session:
                if prompt is not None:
                    result = await session.run(prompt)
                    if isinstance(result, Completed):
                        outcome.text = result.text
                    else:
                        outcome.exit_code = EXIT_FAILED
                        outcome.messages.append(f"turn failed: {result.error}")
        except _usage_errors() as exc:
            outcome.exit_code = EXIT_USAGE
            outcome.messages.append(str(exc))
        except SandboxSetupError as exc:
            outcome.exit_code = EXIT_FAILED
            outcome.messages.append(str(exc))
        except Exception as exc:
            outcome.exit_code = EXIT_FAILED
            hook = getattr(exc, "runner_hook", None)
            if hook:
                error = hook_errors.get(hook, str(exc))
                outcome.messages.append(
                    f"hook {hook[0]}.{hook[1]} failed: {type(exc).__name__}: {error}"
                )
            else:
                outcome.messages.append(f"run failed: {type(exc).__name__}: {exc}")
        finally:
            outcome.duration_seconds = time.perf_counter() - started
    if session is not None and session.destroy_failures:
        outcome.messages.extend(str(failure) for failure in session.destroy_failures)
        if outcome.exit_code == EXIT_OK:
            refused = any(f.error_type == "UnsafeTemplateError" for f in session.destroy_failures)
            outcome.exit_code = EXIT_USAGE if refused else EXIT_FAILED
    # The answer and the messages may quote a secret (the agent read a file).
    outcome.messages = [scrubbed(message) for message in outcome.messages]
    if outcome.text is not None:
        outcome.text = scrubbed(outcome.text)
    return outcome


async def run_many(
    agent_for: Callable[[int], Any],
    input_sets: Sequence[Mapping[str, Any]],
    *,
    prompt: str | None = None,
    concurrency: int = 4,
    listener_for: Callable[[int], Callable[[dict[str, Any]], None]] | None = None,
    output_for: Callable[[int], Callable[[str, str], None]] | None = None,
    every_line: bool = True,
) -> list[RunOutcome]:
    """One session per input set, at most ``concurrency`` at a time, in a task group.

    ``agent_for(index)`` gives the agent of each set (the CLI compiles the
    file once per set, so each set saves into its own output folder);
    ``listener_for(index)`` may return a progress listener for that set,
    ``output_for(index)`` a listener of its commands' output lines
    (``core.output.listen_output``; ``every_line`` as there).
    Outcomes come back in input order.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    limiter = anyio.CapacityLimiter(concurrency)
    outcomes: list[RunOutcome | None] = [None] * len(input_sets)

    async def one(index: int) -> None:
        async with limiter:
            with contextlib.ExitStack() as stack:
                if listener_for is not None:
                    stack.enter_context(listen(listener_for(index)))
                if output_for is not None:
                    lines = listen_output(output_for(index), every_line=every_line)
                    stack.enter_context(lines)
                outcomes[index] = await run_once(agent_for(index), input_sets[index], prompt=prompt)

    async with anyio.create_task_group() as tg:
        for index in range(len(input_sets)):
            tg.start_soon(one, index)
    return [outcome for outcome in outcomes if outcome is not None]
