"""``DangerousLocalSandbox``: commands run as host subprocesses, with no isolation.

The zero-setup backend: nothing to install, so examples and tests run
anywhere.  It offers no isolation at all (a command can read and write
whatever your user can), hence the name and the warning.  What it does give:

- a fresh temporary directory per session, with ``workspace/`` (the cwd of
  every command) and ``home/`` (``HOME``, so ``git config --global`` and the
  like never touch your own files), removed when the session closes;
- a small environment: ``PATH`` and locale variables from the host, plus
  ``HOME``, ``TMPDIR`` and the sandbox's ``env=``; the rest of your
  environment (API keys included) is not passed on;
- each command in its own process group, so a timeout kills the command and
  everything it started (exit 124, ``timed_out=True``);
- ``read_file``/``write_file`` confined to the workspace: a path that leaves
  it (``..``, an absolute path elsewhere, a symlink pointing out) is refused
  with ``PermissionError``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .base import (
    TIMEOUT_EXIT_CODE,
    Sandbox,
    SandboxEnvironment,
    SandboxExecutionResult,
    check_env,
    check_timeout,
)

if TYPE_CHECKING:
    from .._hooks import SandboxHook

#: Host variables a local command inherits; everything else is left out.
INHERITED_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_TEMP_PREFIX = "sandbox-runner-local-"


class DangerousLocalWarning(UserWarning):
    """Issued when a DangerousLocalSandbox is built: commands run on the host."""


class DangerousLocalSandbox(SandboxEnvironment):
    """Run each session's commands on this machine, in a throwaway workspace.

    No isolation and no network policy: use it for trusted hooks, examples
    and tests; use ``LocalDockerSandbox`` for anything an agent decides.
    """

    backend = "local"

    def __init__(
        self,
        *,
        hooks: Sequence[SandboxHook] = (),
        default_exec_timeout_seconds: float = 30,
        ttl_seconds: float | None = None,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        temp_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(
            hooks=hooks,
            default_exec_timeout_seconds=default_exec_timeout_seconds,
            ttl_seconds=ttl_seconds,
        )
        self.shell = shell or shutil.which("bash") or shutil.which("sh") or "/bin/sh"
        self.env = check_env(env)
        self.temp_dir = os.fspath(temp_dir) if temp_dir is not None else None
        warnings.warn(
            "DangerousLocalSandbox runs commands on this machine with no isolation; "
            "use LocalDockerSandbox for untrusted work",
            DangerousLocalWarning,
            stacklevel=2,
        )

    async def create(self, *, session_id: str, expires_at: float | None) -> LocalSandbox:
        root = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=self.temp_dir))
        try:
            for name in ("workspace", "home", "tmp"):
                (root / name).mkdir(mode=0o700)
            return LocalSandbox(
                root=root,
                session_id=session_id,
                shell=self.shell,
                env=self.env,
                default_exec_timeout_seconds=self.default_exec_timeout_seconds,
            )
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise


class LocalSandbox(Sandbox):
    """One session's live local workspace."""

    def __init__(
        self,
        *,
        root: Path,
        session_id: str,
        shell: str,
        env: Mapping[str, str],
        default_exec_timeout_seconds: float,
    ) -> None:
        self.root = root
        self.session_id = session_id
        self.workspace = str(root / "workspace")
        self.home = str(root / "home")
        self.shell = shell
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self._base_env = {k: os.environ[k] for k in INHERITED_VARIABLES if k in os.environ}
        self._base_env.setdefault("PATH", os.defpath)
        self._base_env.update({"HOME": self.home, "TMPDIR": str(root / "tmp"), **env})
        self._process_groups: set[int] = set()

    def _path(self, path: str) -> Path:
        """Map a sandbox path to a host path inside the workspace, or refuse it."""
        workspace = Path(self.workspace).resolve()
        candidate = (workspace / path).resolve()
        if candidate != workspace and workspace not in candidate.parents:
            raise PermissionError(f"{path!r} is outside the sandbox workspace")
        return candidate

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
        workdir = self._path(cwd) if cwd else Path(self.workspace)
        full_env = {**self._base_env, **check_env(env)}
        started = time.perf_counter()
        if not workdir.is_dir():  # as a shell would report it, not as an exception
            return SandboxExecutionResult(
                exit_code=126,
                stdout="",
                stderr=f"cannot change directory to {cwd}: no such directory\n",
                duration_seconds=time.perf_counter() - started,
            )
        stdout = bytearray()
        stderr = bytearray()
        timed_out = False
        process = await anyio.open_process(
            [self.shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=full_env,
            start_new_session=True,
        )
        self._process_groups.add(process.pid)
        try:
            with anyio.move_on_after(timeout) as deadline:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process.stdout, stdout)
                    tg.start_soon(_drain, process.stderr, stderr)
                    await process.wait()
            timed_out = deadline.cancelled_caught
        finally:
            # On a timeout (or our own cancellation) the whole group goes, so
            # nothing the command started outlives it holding our pipes.
            if timed_out or process.returncode is None:
                _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.aclose()
            if not _group_exists(process.pid):
                # Forget it now: once empty, its id may be reused by a stranger.
                self._process_groups.discard(process.pid)
        exit_code = TIMEOUT_EXIT_CODE if timed_out else _exit_status(process.returncode)
        return SandboxExecutionResult(
            exit_code=exit_code,
            stdout=stdout.decode("utf-8", errors="replace"),
            stderr=stderr.decode("utf-8", errors="replace"),
            timed_out=timed_out,
            duration_seconds=time.perf_counter() - started,
        )

    async def read_file(self, path: str) -> bytes:
        host_path = self._path(path)
        return await anyio.Path(host_path).read_bytes()

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        host_path = self._path(path)
        await anyio.Path(host_path.parent).mkdir(parents=True, exist_ok=True)
        await anyio.Path(host_path).write_bytes(payload)

    async def delete(self) -> None:
        """Kill what the session's commands left running, then remove the directory.

        Only the process groups of commands that left something running are
        still remembered here (see ``execute``).
        """
        for group in self._process_groups:
            _kill_group(group)
        self._process_groups.clear()
        await anyio.to_thread.run_sync(_remove_tree, self.root)


async def _drain(stream: anyio.abc.ByteReceiveStream | None, sink: bytearray) -> None:
    if stream is None:
        return
    async for chunk in stream:
        sink.extend(chunk)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _exit_status(returncode: int | None) -> int:
    """A shell-style status: a process killed by signal N reports 128 + N."""
    if returncode is None:
        return -1
    return 128 - returncode if returncode < 0 else returncode


def _remove_tree(root: Path) -> None:
    """Remove the session directory, even where a command made files read-only."""

    def make_writable_and_retry(function, path, _exc_info):  # type: ignore[no-untyped-def]
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        function(path)

    if not root.exists():
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(root, onexc=make_writable_and_retry)
    else:
        shutil.rmtree(root, onerror=make_writable_and_retry)
