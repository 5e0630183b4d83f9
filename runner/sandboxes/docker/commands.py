"""Running one command in a Docker sandbox: over the exec channel where
there is one, else one ``docker exec`` under ``timeout``, as the sandbox
user (dropped inside the container where the image can, ``_as_user``).

A command's result says what happened to it in the terms a shell would:
its timeout (124), the exec channel lost under it (255, as ssh), the
kernel's out-of-memory killer (137, with a line that says so; the
container's ``oom_kill`` count tells it from a plain SIGKILL), a command
that could not even start (126).  A mixin of ``DockerSandbox``, split from
``container`` (issue 27).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar, cast

from ...core.events import decode_output
from ...core.output import output_lines
from ..base import (
    TIMEOUT_EXIT_CODE,
    SandboxExecutionResult,
    check_env,
    check_timeout,
)
from .channel import ANSWER_GRACE_SECONDS, ChannelError, ExecChannel
from .engine import DockerClient
from .exec import PROBE_SECONDS, drop_argv, exec_capped, probe_drop
from .files import _NoChannel
from .live_output import ChannelOutput
from .owners import WORKSPACE

T = TypeVar("T")

#: Exit status of a command whose exec channel was lost mid-way (as ssh).
CHANNEL_LOST_EXIT_CODE = 255
#: Exit status of a command killed by the kernel's out-of-memory killer (SIGKILL).
OOM_EXIT_CODE = 128 + 9
#: Prints the container's ``oom_kill N`` (cgroup v2, else v1).
OOM_KILLS_COMMAND = (
    "cat /sys/fs/cgroup/memory.events 2>/dev/null"
    " || cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; true"
)
#: Starts the rest of its arguments with oom_score_adj 1000, as the helpers
#: start the sandbox user's commands (the per-command path).
RAISE_OOM_SCORE = 'echo 1000 2>/dev/null >/proc/self/oom_score_adj; exec "$@"'
#: Seconds between timeout's TERM and its KILL for a command that ignores TERM.
KILL_GRACE_SECONDS = 2
#: How long past a command's timeout the host waits before it stops waiting
#: (the in-container ``timeout`` gets KILL_GRACE_SECONDS of it to act first).
HOST_GRACE_SECONDS = 5.0


class SandboxCommands:
    """``execute`` and ``execute_as_root`` (see the module's docstring)."""

    # Set by DockerSandbox.__init__.
    client: DockerClient
    shell: str
    default_exec_timeout_seconds: float
    output_cap_bytes: int
    memory: str | None
    home: str | None
    _oom_kills: int | None
    _reopen_channel: bool
    _drop: str | None
    _drop_probed: bool

    if TYPE_CHECKING:

        @property
        def container_id(self) -> str: ...

        def _ids(self, *, root: bool = False) -> list[int] | None: ...

        def _path(self, path: str) -> str: ...

        async def _on_channel(
            self,
            work: Callable[[ExecChannel], T],
            awaitable: Callable[[ExecChannel], Awaitable[T]] | None = None,
        ) -> T | _NoChannel: ...

    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        return await self._execute(command, timeout_seconds, env, cwd, root=False)

    async def execute_as_root(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        """``execute`` as root, whatever ``user`` is: for the setup script,
        which the author wrote (it installs packages), never for the agent."""
        return await self._execute(command, timeout_seconds, env, cwd, root=True)

    async def _execute(
        self,
        command: str,
        timeout_seconds: float | None,
        env: Mapping[str, str] | None,
        cwd: str | None,
        *,
        root: bool,
    ) -> SandboxExecutionResult:
        timeout = check_timeout(timeout_seconds, name="timeout_seconds")
        timeout = timeout or self.default_exec_timeout_seconds
        workdir = self._path(cwd) if cwd else WORKSPACE
        if self.home is not None and not root:  # the hooks' own (a step's env: still wins)
            env = {"HOME": self.home, **(env or {})}
        started = time.perf_counter()
        request = {
            "op": "exec",
            "argv": [self.shell, "-c", command],
            "cwd": workdir,
            "env": check_env(env),
            "timeout": timeout,
            "cap": self.output_cap_bytes,
            "user": self._ids(root=root),
        }
        # The output as it comes, for the live progress, when someone listens;
        # not a root command's: the runner's own (the hand-over, the process
        # sweep, the OOM probe) are no step's output (review 24's U4).
        lines = None if root else output_lines()
        live = ChannelOutput(lines) if lines is not None else None
        if live is not None:
            request["stream"] = True
        try:
            answer = await self._on_channel(
                lambda channel: channel.request(
                    request,
                    timeout=timeout + ANSWER_GRACE_SECONDS,
                    kill_after=timeout,
                    on_output=live,
                ),
                lambda channel: channel.request_async(
                    request, timeout=timeout + ANSWER_GRACE_SECONDS, on_output=live
                ),
            )
        except ChannelError as exc:
            # Not re-run: it may have done part of its work.
            if await self._lost_to_oom():
                # The helper went to the out-of-memory killer: said as the
                # kernel's SIGKILL of a command is (137), and the next
                # command gets a new helper.
                self._reopen_channel = True
                limit = f" (memory limit {self.memory})" if self.memory else ""
                return SandboxExecutionResult(
                    exit_code=OOM_EXIT_CODE,
                    stdout="",
                    stderr=f"runner: out of memory{limit}: the kernel's out-of-memory killer "
                    "ended the sandbox's exec helper during this command; the command may or "
                    "may not have completed, and may still run\n",
                    duration_seconds=time.perf_counter() - started,
                )
            # 255, as ssh reports a lost connection.
            return SandboxExecutionResult(
                exit_code=CHANNEL_LOST_EXIT_CODE,
                stdout="",
                stderr=f"the sandbox's exec channel was lost during this command ({exc}); "
                "it may or may not have completed\n",
                duration_seconds=time.perf_counter() - started,
            )
        finally:
            if live is not None:
                live.close()  # its last line, if it had no newline
        if not isinstance(answer, _NoChannel):
            header, body = answer
            if "error" in header:  # it could not even start (no pids left, ...), as a shell
                return SandboxExecutionResult(  # that cannot fork: 126, not an exception
                    exit_code=126,
                    stdout="",
                    stderr=f"runner: could not start the command: {header['message']}\n",
                    duration_seconds=time.perf_counter() - started,
                )
            stdout, stderr = body[: header["stdout_len"]], body[header["stdout_len"] :]
            return SandboxExecutionResult(
                exit_code=header["exit_code"],
                stdout=decode_output(stdout),  # scrubbed of non-UTF-8 secrets first
                stderr=self._explain_kill(header["exit_code"], header["timed_out"])
                + decode_output(stderr),
                timed_out=header["timed_out"],
                duration_seconds=time.perf_counter() - started,
                output_truncated=header["stdout_total"] != len(stdout)
                or header["stderr_total"] != len(stderr),
            )
        # timeout runs as root where the image can drop (the agent cannot stop
        # it); the user's command is the OOM killer's first choice, as over the
        # channel (it raises its own score after the drop; root's keep 0).
        argv = [self.shell, "-c", command]
        if self._ids(root=root) is not None:
            argv = [self.shell, "-c", RAISE_OOM_SCORE, "sh", *argv]
        argv, user = await self._as_user(argv, root=root)
        argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), f"{timeout:g}", *argv]
        exit_code, stdout, stderr, truncated = await self.client.call(
            exec_capped,
            self.container_id,
            argv,
            check_env(env),
            workdir,
            self.output_cap_bytes,
            timeout + HOST_GRACE_SECONDS,
            user,
            abandon_on_cancel=True,
        )
        duration = time.perf_counter() - started
        abandoned = exit_code is None
        # 124 from GNU timeout; 143/137 from busybox's, which sends TERM (then
        # KILL) and exits with the command's own status.
        timed_out = abandoned or (
            exit_code in (TIMEOUT_EXIT_CODE, 128 + 15, 128 + 9) and duration >= timeout
        )
        note = (
            f"runner: the command outlived its {timeout:g} s timeout by "
            f"{HOST_GRACE_SECONDS:g} s (something in the sandbox stopped it from being "
            "killed there); the runner stopped waiting for it\n"
            if abandoned
            else self._explain_kill(cast(int, exit_code), timed_out)
        )
        return SandboxExecutionResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else cast(int, exit_code),
            stdout=decode_output(stdout),  # scrubbed of non-UTF-8 secrets first
            stderr=note + decode_output(stderr),
            timed_out=timed_out,
            duration_seconds=duration,
            output_truncated=truncated,
        )

    async def _oom_kill_count(self, *, over_channel: bool = True) -> int | None:
        """How many processes the out-of-memory killer has killed in the
        container (cgroup v2's memory.events, v1's memory.oom_control), read
        as root over the channel or through ``docker exec``; None if unknown."""
        try:
            if over_channel:
                result = await self.execute_as_root(
                    OOM_KILLS_COMMAND, timeout_seconds=PROBE_SECONDS
                )
                output = result.stdout
            else:
                _, out, _, _ = await self.client.call(
                    exec_capped,
                    self.container_id,
                    ["sh", "-c", OOM_KILLS_COMMAND],
                    {},
                    "/",
                    1 << 16,
                    PROBE_SECONDS,
                    "0:0",
                )
                output = out.decode("utf-8", "replace")
        except Exception:  # no answer (the engine, a full container): unknown
            return None
        found = re.search(r"^oom_kill ([0-9]+)$", output, re.MULTILINE)
        return int(found.group(1)) if found else None

    async def _lost_to_oom(self) -> bool:
        """Whether the out-of-memory killer killed something since the last
        look (the channel's start): then it is what ended the channel."""
        count = await self._oom_kill_count(over_channel=False)
        if count is None:
            return False
        before, self._oom_kills = self._oom_kills or 0, count
        return count > before

    def _explain_kill(self, exit_code: int, timed_out: bool) -> str:
        """A line for a command SIGKILLed by something other than its timeout:
        in a memory-capped container, that is the kernel's out-of-memory killer."""
        if exit_code != 128 + 9 or timed_out:
            return ""
        limit = f" (memory limit {self.memory})" if self.memory else ""
        return f"runner: the command was killed (SIGKILL), most likely out of memory{limit}\n"

    async def _as_user(self, argv: list[str], *, root: bool = False) -> tuple[list[str], str]:
        """``argv`` and the ``docker exec --user`` that run it as the sandbox
        user on the per-command path: started as root and dropped inside
        where the image has setpriv or nsenter (see ``drop_argv``: the agent
        can then stop nothing of the exec itself), else ``--user``, which
        leaves runc's init process to the agent (SECURITY.md says so)."""
        ids = self._ids(root=root)
        if ids is None:
            return argv, "0:0"
        if not self._drop_probed:
            self._drop = await self.client.call(probe_drop, self.container_id)
            self._drop_probed = True
        if self._drop is None:
            return argv, f"{ids[0]}:{ids[1]}"
        return [*drop_argv(self._drop, ids[0], ids[1]), *argv], "0:0"
