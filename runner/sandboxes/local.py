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
  it (``..``, an absolute path elsewhere) or has a symlink in it is refused
  with ``PermissionError``, and so is anything but a regular file.  They open
  each path component relative to the workspace's directory descriptor with
  ``O_NOFOLLOW``, so a command swapping a directory for a symlink while a
  file is being opened cannot lead them out either.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from ..core.events import decode_output
from ..core.output import OutputLines, output_lines
from .base import (
    MAX_FILE_BYTES,
    READ_LIMIT,
    TIMEOUT_EXIT_CODE,
    FileTooLargeError,
    Sandbox,
    SandboxEnvironment,
    SandboxExecutionResult,
    check_env,
    check_timeout,
)
from .watchdog import watched

if TYPE_CHECKING:
    from ..core.hooks import SandboxHook

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

    @classmethod
    def from_options(
        cls, spec: Mapping[str, Any], common: Mapping[str, Any]
    ) -> DangerousLocalSandbox:
        """A YAML file that says ``sandbox: local`` chose it: no warning here
        (the CLI says it once, when the file did not choose it)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DangerousLocalWarning)
            return cls(**common)

    async def reattach(self, record: Mapping[str, Any], *, session_id: str) -> LocalSandbox:
        from ..core.errors import SandboxUnavailableError

        root = Path(str(record.get("root") or ""))
        if not record.get("root") or not (root / "workspace").is_dir():
            raise SandboxUnavailableError(f"workspace {root / 'workspace'} no longer exists")
        return self._sandbox(root, session_id)

    async def discard(self, record: Mapping[str, Any], *, session_id: str) -> bool:
        root = record.get("root")
        if not root or not Path(root).is_dir():
            return False
        await anyio.to_thread.run_sync(partial(shutil.rmtree, root, ignore_errors=True))
        return True

    @classmethod
    async def recover(
        cls, records: Sequence[Mapping[str, Any]], *, owner: str, sessions: set[str] | None
    ) -> list[str]:
        roots = [Path(r["root"]) for r in records if r.get("root")]
        if not roots:
            return []
        killed = await anyio.to_thread.run_sync(kill_left_running, roots)
        if not killed:
            return []
        return [
            f"killed {len(killed)} process(es) the stopped server's commands left running: "
            + ", ".join(map(str, killed))
        ]

    def _sandbox(self, root: Path, session_id: str) -> LocalSandbox:
        return LocalSandbox(
            root=root,
            session_id=session_id,
            shell=self.shell,
            env=self.env,
            default_exec_timeout_seconds=self.default_exec_timeout_seconds,
        )

    async def create(self, *, session_id: str, expires_at: float | None) -> LocalSandbox:
        root = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=self.temp_dir))
        try:
            for name in ("workspace", "home", "tmp"):
                (root / name).mkdir(mode=0o700)
            return self._sandbox(root, session_id)
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
        #: Every read_file/write_file path is opened relative to this descriptor.
        self._workspace_fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def record(self) -> dict[str, Any]:
        return {"root": str(self.root)}

    async def gone(self) -> str | None:
        if not Path(self.workspace).is_dir():
            return f"workspace {self.workspace} no longer exists"
        return None

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
        lines = output_lines()  # the live progress's last line, when someone listens
        timed_out = False
        # Shielded: a cancellation (a DELETE during on_create) that came while
        # asyncio connected the pipes of a process already running left its
        # group unknown here, and asyncio killed the leader alone: the
        # command ran on, orphaned (a loaded CI machine's red).  Now it
        # arrives at the next await, where the group is known and killed.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                # The group's leader kills it at the timeout if this process is
                # gone by then (a server killed mid-step): see watchdog.
                watched([self.shell, "-c", command], timeout),
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
                    tg.start_soon(_drain, process.stdout, stdout, lines, "stdout")
                    tg.start_soon(_drain, process.stderr, stderr, lines, "stderr")
                    await process.wait()
            # Also when the watchdog acted first (this process was too slow).
            timed_out = deadline.cancelled_caught or (
                process.returncode == -signal.SIGKILL and time.perf_counter() - started >= timeout
            )
        finally:
            if lines is not None:
                lines.close()
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
            # Scrubbed of the session's secrets that are not UTF-8 before decoding.
            stdout=decode_output(bytes(stdout)),
            stderr=decode_output(bytes(stderr)),
            timed_out=timed_out,
            duration_seconds=time.perf_counter() - started,
        )

    async def read_file(self, path: str) -> bytes:
        return await anyio.to_thread.run_sync(self._read, path, self.max_file_bytes, MAX_FILE_BYTES)

    async def read_file_limited(self, path: str, limit: int) -> bytes:
        if limit >= self.max_file_bytes:
            return await self.read_file(path)
        return await anyio.to_thread.run_sync(self._read, path, limit, READ_LIMIT)

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        await anyio.to_thread.run_sync(self._write, path, payload)

    def _read(self, path: str, limit: int, of: str) -> bytes:
        """At most ``limit`` bytes, or ``FileTooLargeError``: refused from the
        size of what was opened, and the read itself stops one byte past the
        limit (a file growing meanwhile)."""
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused next).
        with open(self._open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as stream:
            _check_regular(stream.fileno(), path)
            size = os.fstat(stream.fileno()).st_size
            if size > limit:
                raise FileTooLargeError(path, size, limit, of)
            data = stream.read(limit + 1)
            if len(data) > limit:
                raise FileTooLargeError(path, None, limit, of)
            return data

    def _write(self, path: str, payload: bytes) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK
        with open(self._open(path, flags, make_parents=True), "wb") as stream:
            _check_regular(stream.fileno(), path)
            stream.write(payload)

    def _open(self, path: str, flags: int, *, make_parents: bool = False) -> int:
        """A descriptor for ``path``, opened one component at a time below the
        workspace descriptor, none of them followed if it is a symlink.

        Checking a resolved path and then opening it would leave a window in
        which a command swaps a directory for a symlink to the host; here every
        step is one ``openat`` of one name in an already opened directory.
        """
        if self._workspace_fd < 0:
            raise RuntimeError("the sandbox was deleted")
        *parents, name = self._parts(path)
        current = self._workspace_fd
        try:
            for part in parents:
                if make_parents:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=current)
                child = _open_below(
                    current, part, os.O_RDONLY | os.O_NONBLOCK, path, directory=True
                )
                if current != self._workspace_fd:
                    os.close(current)
                current = child
            return _open_below(current, name, flags, path)
        finally:
            if current != self._workspace_fd:
                os.close(current)

    def _parts(self, path: str) -> list[str]:
        """The names leading from the workspace to ``path`` (``..`` resolved in
        the text, never through a symlink), or ``PermissionError``."""
        for base in (self.workspace, os.path.realpath(self.workspace)):
            full = os.path.normpath(os.path.join(base, path))
            if full.startswith(base + os.sep):
                return full[len(base) + 1 :].split(os.sep)
            if full == base:
                raise IsADirectoryError(errno.EISDIR, "the workspace is a directory", path)
        raise PermissionError(f"{path!r} is outside the sandbox workspace")

    async def mark_processes(self) -> frozenset[int]:
        """The process groups of earlier commands that still have a process."""
        self._process_groups = {g for g in self._process_groups if _group_exists(g)}
        return frozenset(self._process_groups)

    async def end_processes(self, *, since: frozenset[int] | None = None) -> int:
        """Kill the process groups of the commands that left something running
        (since the mark ``since``, or all of them).  A process that left its
        group (``setsid``) is not found: this backend isolates nothing."""
        groups = {g for g in self._process_groups if since is None or g not in since}
        killed = {g for g in groups if _group_exists(g)}
        for group in killed:
            _kill_group(group)
        self._process_groups -= groups
        await _wait_until_dead(killed)
        return len(killed)

    async def delete(self) -> None:
        """Kill what the session's commands left running, then remove the directory.

        Only the process groups of commands that left something running are
        still remembered here (see ``execute``).
        """
        groups = set(self._process_groups)
        for group in groups:
            _kill_group(group)
        self._process_groups.clear()
        await _wait_until_dead(groups)
        if self._workspace_fd >= 0:
            os.close(self._workspace_fd)
            self._workspace_fd = -1
        await anyio.to_thread.run_sync(_remove_tree, self.root)


def _open_below(dir_fd: int, name: str, flags: int, path: str, *, directory: bool = False) -> int:
    """``name`` opened in ``dir_fd`` with O_NOFOLLOW; a symlink is a PermissionError.

    On one name, O_NOFOLLOW fails with ELOOP exactly when it is a symlink, so
    the answer cannot race (O_DIRECTORY would blur it into ENOTDIR: a
    ``directory`` is checked after opening instead).
    """
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionError(
                f"{path!r}: {name!r} is a symlink; read_file and write_file follow none "
                "(one could lead out of the sandbox workspace)"
            ) from None
        raise
    if directory and not stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    return fd


def _check_regular(fd: int, path: str) -> None:
    """Only regular files: a FIFO or a device could block or never end."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not stat.S_ISREG(mode):
        raise OSError(f"{path!r} is not a regular file")


async def _drain(
    stream: anyio.abc.ByteReceiveStream | None,
    sink: bytearray,
    lines: OutputLines | None,
    name: str,
) -> None:
    if stream is None:
        return
    async for chunk in stream:
        sink.extend(chunk)
        if lines is not None:
            lines.feed(name, chunk)


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


#: How long ``delete`` and ``end_processes`` wait for the processes they
#: killed to be gone.  SIGKILL is queued at once, but a process dies only
#: when it next runs: on a loaded machine that is after ``killpg`` returns,
#: and "nothing of the sandbox runs" must hold when they return.
KILLED_WAIT_SECONDS = 5.0


async def _wait_until_dead(groups: set[int]) -> None:
    """Return once no process of ``groups`` runs (or after ``KILLED_WAIT_SECONDS``)."""
    deadline = time.monotonic() + KILLED_WAIT_SECONDS
    while (groups := _groups_running(groups)) and time.monotonic() < deadline:
        await anyio.sleep(0.01)


def _groups_running(groups: set[int]) -> set[int]:
    """Those of ``groups`` with a process that is not a zombie (a killed
    process its new parent has not reaped yet runs nothing).  Without
    ``/proc`` a group counts while any member, zombies too, is left."""
    left = {g for g in groups if _group_exists(g)}
    if not left or not os.path.isdir("/proc"):
        return left
    running = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "stat"), "rb") as stat_file:
                fields = stat_file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        state, group = fields[0], int(fields[2])
        if group in left and state != b"Z":
            running.add(group)
    return running


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


def kill_left_running(roots: list[Path]) -> list[int]:
    """Kill the commands a stopped server left running in the local sandboxes
    at ``roots``; return the processes found.

    ``LocalSandbox`` keeps the process groups of its commands in memory only,
    so after a SIGKILL they are found again by what every command of the
    sandbox gets and its children inherit: ``HOME`` set to the sandbox's
    ``home/`` (Linux ``/proc``; only this user's processes can be read; on a
    system without ``/proc`` nothing is found).  A group whose leader is such
    a process (each command starts its own) is killed whole, any other match
    alone; never this server's own group.  The cut-off step (or a turn's
    cut-off tool call) then runs again, with nothing of the first run left.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    homes = {
        f"HOME={prefix}{os.sep}home".encode()
        for root in roots
        for prefix in (str(root), os.path.realpath(root))
    }
    found: set[int] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:  # gone meanwhile, or another user's
            continue
        if homes & environ:
            found.add(int(entry.name))
    ours = os.getpgrp()
    for pid in sorted(found):
        with contextlib.suppress(OSError):
            group = os.getpgid(pid)
            if group in found and group != ours:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    return sorted(found)
