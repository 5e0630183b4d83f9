"""``MistralCloudSandbox``: one session's live cloud instance, its commands and files.

Commands run through the executor's ``run`` endpoint under GNU ``timeout``,
because the SDK's own timeout only stops waiting and leaves the command
running.  The executor reads a command's stdout to the end before its stderr,
so a command writing more than a pipe's worth (64 KiB) to stderr would block
until killed; and the SDK repeats a request that met a 5xx or a dropped
connection, which would run a command twice.  So each command runs inside a
small wrapper (``wrap_command``) under an id of its own: its output goes to
files in the instance, printed once it has ended (stdout, then stdout closed,
then stderr), and a repeated request for the same id waits for the first run's
result instead of running it again.  A missing ``cwd`` is reported by the
wrapper as exit 126, like the other backends (the executor would answer 400).
``prepare`` leaves a marker file in the instance; an instance without it has
started afresh and lost its files (a deep sleep when ``idle_timeout_seconds``
is set, or a platform restart), and every later command is a
``SandboxUnavailableError`` saying so, never run on the empty instance.

The platform puts the executor's secret in the instance's environment
(``SANDBOX_SECRET``, which is why it cannot be a sandbox ``env=`` name); the
wrapper unsets it so that commands and their output do not carry it (any
process can still read it from the executor's own environment: this keeps it
out of transcripts, it is not a boundary).  The executor's file write makes
no parent directories, so ``write_file`` makes them first with a command.

Files are written through the SDK's filesystem API (text) or as base64 text
decoded by a command (binary), and read back as base64 through a command,
since the filesystem API returns text only.  Any SDK or transport error of a
command or a file call is a ``SandboxUnavailableError``; a sandbox the
platform already deleted (its TTL) counts as deleted at close.
"""

from __future__ import annotations

import base64
import posixpath
import secrets
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from ...core.errors import SandboxUnavailableError
from ..base import (
    READ_LIMIT,
    TIMEOUT_EXIT_CODE,
    FileTooLargeError,
    Sandbox,
    SandboxExecutionResult,
    check_env,
    check_timeout,
)
from .api import close_clients, one_line

WORKSPACE = "/workspace"
KILL_GRACE_SECONDS = 2
#: Extra seconds the client waits beyond a command's own timeout.
CLIENT_SLACK_SECONDS = 15
#: Where the wrapper keeps each command's output until it is sent.
RUNS_DIR = "/tmp/.runner-runs"
#: Exit code of a command whose ``cwd`` does not exist (as in the other backends).
MISSING_CWD_EXIT_CODE = 126
#: The environment variable the SDK sets to the executor's secret.
EXECUTOR_SECRET_VARIABLE = "SANDBOX_SECRET"
#: Exit code and stderr line of the wrapper when the instance lost the marker
#: file ``prepare`` left: it started afresh (a deep sleep, a platform restart).
RESTARTED_EXIT_CODE = 125
RESTARTED_MESSAGE = "runner: this cloud instance restarted and lost its files"


def wrap_command(
    command: str,
    *,
    run_id: str,
    shell: str,
    timeout: float,
    cwd: str,
    cwd_label: str | None = None,
    forget: Sequence[str] = (),
    marker: str | None = None,
) -> str:
    """The shell text that runs ``command`` once per ``run_id`` with its outputs in files.

    A first request runs it and records stdout, stderr and the exit code; a
    repeated request (the SDK's retry) waits for that record.  Both then print
    stdout, close it (the executor then reads stderr), print stderr and exit
    with the code.  ``cwd_label`` is how a missing ``cwd`` is named in the
    message; ``forget`` names earlier runs whose records can go.  With
    ``marker`` (the file ``prepare`` made), an instance without it is one
    that started afresh: the wrapper runs nothing and says so.
    """
    run = f"{RUNS_DIR}/{run_id}"
    q_cwd = shlex.quote(cwd)
    missing = shlex.quote(f"cannot change directory to {cwd_label or cwd}: no such directory")
    cleanup = "".join(f" {shlex.quote(f'{RUNS_DIR}/{old}')}" for old in forget)
    restarted = (
        f"[ -f {shlex.quote(marker)} ] || "
        f"{{ echo {shlex.quote(RESTARTED_MESSAGE)} >&2; exit {RESTARTED_EXIT_CODE}; }}; "
        if marker
        else ""
    )
    return (
        f"unset {EXECUTOR_SECRET_VARIABLE}; "
        + restarted
        + (f"rm -rf{cleanup}; " if cleanup else "")
        + f"mkdir -p {RUNS_DIR} && chmod 700 {RUNS_DIR} || exit 125; "
        f"if mkdir {run} 2>/dev/null; then "
        f"( cd {q_cwd} 2>/dev/null || {{ echo {missing} >&2; exit {MISSING_CWD_EXIT_CODE}; }}; "
        f"exec timeout -k {KILL_GRACE_SECONDS} {timeout:g} {shell} -c {shlex.quote(command)} ) "
        f"</dev/null >{run}/out 2>{run}/err; "
        f"echo $? >{run}/code.new && mv {run}/code.new {run}/code; "
        f"else while [ ! -f {run}/code ]; do sleep 0.2; done; fi; "
        f"cat {run}/out; exec 1>&-; cat {run}/err >&2; exit $(cat {run}/code)"
    )


class MistralCloudSandbox(Sandbox):
    """One session's live cloud sandbox."""

    def __init__(
        self, *, remote: Any, session_id: str, default_exec_timeout_seconds: float
    ) -> None:
        self.remote = remote
        self.session_id = session_id
        self.workspace = WORKSPACE
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self.shell = "sh"
        self._deleted = False
        self._delete_lock = anyio.Lock()
        #: Runs whose records the next command removes (their results arrived).
        self._finished_runs: list[str] = []
        #: A file only this instance's first start has (see ``wrap_command``).
        self._marker: str | None = None

    def record(self) -> dict[str, Any]:
        """What a server stores to find this instance again (``MistralSandbox.reattach``):
        ids, name, marker file and shell; no token, no executor secret."""
        return {
            "instance_id": self.remote.service_id,
            "app_id": self.remote.app_id,
            "instance_name": self.remote.name,
            "marker": self._marker,
            "shell": self.shell,
        }

    async def prepare(self) -> None:
        """Make the workspace and the marker file, and find the shell (bash if present)."""
        marker = f"{RUNS_DIR}/instance-{secrets.token_hex(8)}"
        result = await self._run(
            f"mkdir -p {WORKSPACE} && : > {marker} && {{ command -v bash || true; }}",
            timeout=60,
            cwd="/",
        )
        if result["code"] != 0:
            raise SandboxUnavailableError(
                f"the cloud sandbox cannot create {WORKSPACE}: {result['stderr'].strip()}"
            )
        if result["stdout"].strip():
            self.shell = "bash"
        self._marker = marker

    async def _run(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str,
        env: Mapping[str, str] | None = None,
        cwd_label: str | None = None,
    ) -> dict[str, Any]:
        """Run ``command`` at most once (see ``wrap_command``); SDK errors become ours."""
        run_id = secrets.token_hex(8)
        wrapped = wrap_command(
            command,
            run_id=run_id,
            shell=self.shell,
            timeout=timeout,
            cwd=cwd,
            cwd_label=cwd_label,
            forget=self._finished_runs,
            marker=self._marker,
        )
        try:
            result = await self.remote.exec(
                wrapped,
                cwd="/",
                env=dict(env) if env else None,
                timeout=int(timeout + CLIENT_SLACK_SECONDS),
                stream=False,
            )
        except Exception as exc:  # the SDK's SandboxError family, httpx, JSON
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status < 500:
                what = "did not run the command"  # refused: it never started
            else:  # a 5xx, a dropped connection or a timeout: maybe after it ran
                what = (
                    "did not run the command or its answer was lost (it may have run, "
                    "once: a repeated request never runs it again)"
                )
            raise SandboxUnavailableError(
                f"the cloud sandbox {what} ({type(exc).__name__}: {one_line(exc)})"
            ) from exc
        if result.exit_code == RESTARTED_EXIT_CODE and result.stderr.strip() == RESTARTED_MESSAGE:
            raise SandboxUnavailableError(
                "the cloud sandbox restarted and lost its files (a deep sleep after "
                "idle_timeout_seconds, or a platform restart): the command was not run; "
                "start a new session"
            )
        self._finished_runs = [run_id]
        return {"code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(WORKSPACE, path))

    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        timeout = check_timeout(timeout_seconds, name="timeout_seconds")
        timeout = timeout or self.default_exec_timeout_seconds
        started = time.perf_counter()
        result = await self._run(
            command,
            timeout=timeout,
            cwd=self._path(cwd) if cwd else WORKSPACE,
            env=check_env(env),
            cwd_label=cwd,
        )
        duration = time.perf_counter() - started
        timed_out = result["code"] in (TIMEOUT_EXIT_CODE, 128 + 9) and duration >= timeout
        return SandboxExecutionResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else result["code"],
            stdout=result["stdout"],
            stderr=result["stderr"],
            timed_out=timed_out,
            duration_seconds=duration,
        )

    async def read_file(self, path: str) -> bytes:
        target = shlex.quote(self._path(path))
        result = await self._run(
            f"if [ -d {target} ]; then echo directory; exit 3; fi; base64 < {target}",
            timeout=120,
            cwd=WORKSPACE,
        )
        if result["code"] == 3 and result["stdout"].strip() == "directory":
            raise IsADirectoryError(21, "Is a directory", path)
        if result["code"] != 0:
            raise FileNotFoundError(2, "No such file in the sandbox", path)
        return base64.b64decode(result["stdout"])

    async def read_file_limited(self, path: str, limit: int) -> bytes:
        """At most ``limit`` bytes: ``head -c LIMIT+1`` in the instance, so no
        more than that comes back, whatever the file is."""
        target = shlex.quote(self._path(path))
        result = await self._run(
            f"if [ -d {target} ]; then echo directory; exit 3; fi; "
            f"{{ head -c {int(limit) + 1} | base64; }} < {target}",
            timeout=120,
            cwd=WORKSPACE,
        )
        if result["code"] == 3 and result["stdout"].strip() == "directory":
            raise IsADirectoryError(21, "Is a directory", path)
        if result["code"] != 0:
            raise FileNotFoundError(2, "No such file in the sandbox", path)
        data = base64.b64decode(result["stdout"])
        if len(data) > limit:
            raise FileTooLargeError(path, None, limit, READ_LIMIT)
        return data

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        target = self._path(path)
        made = await self._run(
            f"mkdir -p {shlex.quote(posixpath.dirname(target))}", timeout=60, cwd=WORKSPACE
        )
        if made["code"] != 0:
            raise OSError(f"cannot write {path} in the sandbox: {made['stderr'].strip()}")
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            await self._write_text(target, text, path)
            return
        # Binary: the filesystem API carries text only, so send base64 text
        # and decode it in place.
        staging = f"{target}.runner-upload.b64"
        await self._write_text(staging, base64.b64encode(payload).decode("ascii"), path)
        result = await self._run(
            f"base64 -d {shlex.quote(staging)} > {shlex.quote(target)}; status=$?; "
            f"rm -f {shlex.quote(staging)}; exit $status",
            timeout=120,
            cwd=WORKSPACE,
        )
        if result["code"] != 0:
            raise OSError(f"cannot write {path} in the sandbox: {result['stderr'].strip()}")

    async def _write_text(self, target: str, text: str, path: str) -> None:
        """The SDK's file write; what the instance refused is an OSError, the rest ours."""
        from koyeb.sandbox.filesystem import SandboxFilesystemError

        try:
            await self.remote.filesystem.write_file(target, text)
        except SandboxFilesystemError as exc:
            if exc.__cause__ is None:  # the executor answered with an error
                raise OSError(f"cannot write {path} in the sandbox: {exc}") from exc
            raise SandboxUnavailableError(
                f"the cloud sandbox did not take {path} ({type(exc.__cause__).__name__}: {exc})"
            ) from exc
        except Exception as exc:
            raise SandboxUnavailableError(
                f"the cloud sandbox did not take {path} ({type(exc).__name__}: {exc})"
            ) from exc

    async def delete(self) -> None:
        """Delete the instance; one the platform already removed (its TTL) counts as deleted."""
        async with self._delete_lock:
            if self._deleted:
                return
            with anyio.CancelScope(shield=True):
                try:
                    await self.remote.delete()
                except Exception as exc:
                    if getattr(exc, "status", None) != 404:
                        raise SandboxUnavailableError(
                            f"the cloud sandbox could not be deleted ({type(exc).__name__}: "
                            f"{exc}); the platform deletes it at its TTL"
                        ) from exc
                finally:
                    await close_clients(self.remote)
            self._deleted = True
