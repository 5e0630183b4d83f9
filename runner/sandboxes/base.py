"""The interface every sandbox backend implements.

Two objects per backend, as in the seed documents: the *environment* the user
constructs once and hands to an ``Agent`` (options and hooks, no resources),
and the live :class:`Sandbox` one session gets from ``environment.create()``.
The lifecycle code talks only to these two classes, so it never knows which
backend it drives; backends know nothing of sessions, YAML or the CLI.
"""

from __future__ import annotations

import abc
import errno
import math
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from ..core.hooks import SandboxHook

if TYPE_CHECKING:
    from pathlib import Path

#: Exit status of a command killed because it outlived its timeout (as GNU timeout).
TIMEOUT_EXIT_CODE = 124


@dataclass(frozen=True)
class SandboxExecutionResult:
    """What one ``execute()`` produced.  A non-zero exit is data, not an exception."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_seconds: float = 0.0
    #: True when stdout or stderr was longer than the sandbox keeps; the
    #: middle was replaced by a line saying how many bytes were left out.
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@overload
def check_timeout(value: float, *, name: str) -> float: ...
@overload
def check_timeout(value: None, *, name: str) -> None: ...
def check_timeout(value: float | None, *, name: str) -> float | None:
    """Reject zero, negative, NaN and infinite timeouts with a clear message."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """Environment variables must be str to str, and names must be shell-safe."""
    checked: dict[str, str] = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"environment variable name {key!r} is not valid")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"environment variable {key}: the value must be a str without NUL")
        checked[key] = value
    return checked


class Sandbox(abc.ABC):
    """A live sandbox owned by one session: run commands, read and write files.

    Relative paths are workspace paths; ``execute`` runs ``command`` with the
    sandbox's shell in the workspace and never raises for a non-zero exit.
    """

    session_id: str
    workspace: str
    default_exec_timeout_seconds: float
    #: The largest file ``read_file`` returns and ``save_file`` copies out:
    #: a sandbox file (a sparse 4 GiB one costs the agent nothing) must not
    #: take the runner's memory or the host's disk with it.
    max_file_bytes: int = 1 << 30

    @abc.abstractmethod
    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        """Run ``command`` in the sandbox's shell; kill it at the timeout (exit 124)."""

    @abc.abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The bytes of a sandbox file; ``FileNotFoundError`` if it does not exist."""

    async def read_file_limited(self, path: str, limit: int) -> bytes:
        """The bytes of a sandbox file of at most ``limit`` bytes;
        ``FileTooLargeError`` for a bigger one (its ``size`` is None when the
        read stopped past the limit before the size was known).

        The limit holds inside the read: the built-in backends ask the
        sandbox for at most ``limit + 1`` bytes (``read_file`` of the agent's
        tool uses it), so no path trick and no file size can make it hold
        more.  This default, for other backends, reads the whole file first.
        """
        data = await self.read_file(path)
        if len(data) > limit:
            raise FileTooLargeError(path, len(data), limit, READ_LIMIT)
        return data

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes | str) -> None:
        """Create or replace a sandbox file (parents are created); str is UTF-8."""

    async def save_file(self, path: str, target: Path) -> int:
        """Copy a sandbox file to the host file ``target``; returns its size.

        Backends that can stream override this so the file never sits in
        memory whole (Docker does); this default reads it whole, then refuses
        it over ``max_file_bytes`` before anything is written.
        """
        import anyio

        data = await self.read_file(path)
        if len(data) > self.max_file_bytes:
            raise FileTooLargeError(path, len(data), self.max_file_bytes)
        await anyio.to_thread.run_sync(write_sparse, target, [data])
        return len(data)

    @abc.abstractmethod
    async def delete(self) -> None:
        """Remove the sandbox and everything in it.  Safe to call twice."""

    # --- the processes commands leave running (issue 26) -------------------------

    async def mark_processes(self) -> object | None:
        """What runs in the sandbox now, for a later ``end_processes(since=...)``:
        an opaque value, or None where this backend cannot tell processes
        apart (then ``end_processes`` does nothing)."""
        return None

    async def end_processes(self, *, since: Any = None) -> int | None:
        """Kill what the sandbox's commands left running: with ``since`` (a
        ``mark_processes`` value), only what started after that mark; without,
        every process of the sandbox's commands.  Returns how many were killed,
        or None where this backend cannot (``MistralSandbox``).  The lifecycle
        calls it before ``on_destroy`` and after each agent turn."""
        return None

    async def gone(self) -> str | None:
        """Why the sandbox no longer exists (a container removed or stopped
        from outside, a workspace deleted), or None: it does, or this
        backend cannot tell.  ``runner serve`` asks after a turn, so that a
        session whose sandbox vanished fails instead of waiting on."""
        return None

    def record(self) -> dict[str, Any]:
        """Where this sandbox is, so that another process can find it again
        (``SandboxEnvironment.reattach``); no secret.  Empty: it cannot be."""
        return {}

    async def hand_to_agent(self) -> None:
        """After the last ``on_create``: the agent's tools run from now on, as
        a principal of their own where the backend has one (Docker: another
        uid than the hooks', which gets the workspace; see
        ``sandboxes.docker.owners``).  Nothing here: one principal."""

    async def hand_to_hooks(self) -> None:
        """Before ``on_destroy``, once the agent's processes are killed: the
        hooks run from now on, and own what the agent wrote in the
        workspace.  The reverse of ``hand_to_agent``."""

    async def fresh_home(self) -> str | None:
        """Point ``HOME`` of every later command at a new, empty directory:
        the lifecycle calls it once the agent's processes are gone, before
        ``on_destroy``, so no hook reads the agent's dotfiles found through
        ``$HOME`` (a planted ``~/.gitconfig``, Python user site-packages).
        Returns the directory, or None where the backend keeps one ``HOME``
        (no separate sandbox user: local, ``user: root``, Mistral)."""
        return None


#: What a ``FileTooLargeError`` says the file is over.
MAX_FILE_BYTES = "the sandbox's max_file_bytes"
READ_LIMIT = "the limit of this read"


class OptionError(ValueError):
    """A backend option in YAML that cannot be used: ``key`` names it (None:
    the environment as a whole); ``at_key`` points at the key, not its value."""

    def __init__(self, key: str | None, message: str, *, at_key: bool = False) -> None:
        super().__init__(message)
        self.key = key
        self.at_key = at_key


#: The YAML keys every backend takes (``SandboxEnvironment.options`` adds its own).
COMMON_OPTIONS = frozenset(
    {"sandbox", "hooks", "default_exec_timeout_seconds", "ttl_seconds", "shell", "env"}
)


class FileTooLargeError(OSError):
    """A sandbox file is larger than the sandbox's ``max_file_bytes``, or
    than the limit of a ``read_file_limited``.  ``size``: the file's size, or
    None where the read stopped past ``limit`` before it was known."""

    def __init__(self, path: str, size: int | None, limit: int, of: str = MAX_FILE_BYTES) -> None:
        what = f"the file is {size} bytes, over" if size is not None else "the file is over"
        super().__init__(errno.EFBIG, f"{what} {of} ({limit})", path)
        self.size = size
        self.limit = limit


def write_sparse(target: Path, chunks: Iterable[bytes]) -> int:
    """Write ``chunks`` to ``target``, leaving runs of zeros as holes; the size."""
    with SparseWriter(target) as out:
        for chunk in chunks:
            out.write(chunk)
    return out.size


class SparseWriter:
    """A file written piece by piece, its runs of zeros left as holes.

    A sparse file in the sandbox arrives as real zeros; written as they are,
    its holes would become allocated disk on the host.
    """

    def __init__(self, target: Path) -> None:
        self._out = open(target, "wb")  # noqa: SIM115 - closed by close()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        for start in range(0, len(chunk), _SPARSE_BLOCK):
            block = chunk[start : start + _SPARSE_BLOCK]
            if block.count(0) == len(block):
                self._out.seek(len(block), os.SEEK_CUR)
            else:
                self._out.write(block)
            self.size += len(block)

    def close(self) -> None:
        if not self._out.closed:
            try:
                self._out.truncate(self.size)  # a trailing hole
            finally:
                self._out.close()

    def __enter__(self) -> SparseWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_SPARSE_BLOCK = 64 << 10


class SandboxEnvironment(abc.ABC):
    """Options and hooks for the sandboxes an agent's sessions get.

    ``creates_sandbox`` is False only for ``NoSandbox``: then the lifecycle
    neither creates anything nor runs hooks.
    """

    creates_sandbox: bool = True
    #: The name ``sandbox:`` gives this backend in YAML; records carry it too
    #: (``sandboxes.registry`` maps it back to the class).
    backend: str = ""
    #: The YAML keys this backend takes besides ``COMMON_OPTIONS``.
    options: frozenset[str] = frozenset()
    #: Warm sandboxes kept ready for new sessions (0: none; Docker has a pool).
    pool_size: int = 0
    #: Warm sandboxes kept per snapshot key, started from the snapshot (Docker).
    seeded_pool_size: int = 0
    #: Whether sessions can start from a snapshot of their cached hooks'
    #: ``on_create`` (Docker can: it commits the container; see ``core.snapshot_keys``).
    can_snapshot: bool = False
    #: How long a session's ``on_destroy`` hooks may take together before the
    #: close gives up on them and deletes the sandbox (None: no limit).
    cleanup_timeout_seconds: float | None = 600.0

    def __init__(
        self,
        *,
        hooks: Sequence[SandboxHook] = (),
        default_exec_timeout_seconds: float = 30,
        ttl_seconds: float | None = None,
    ) -> None:
        hook_list = tuple(hooks)
        for hook in hook_list:
            if not isinstance(hook, SandboxHook):
                raise TypeError(
                    f"hooks= takes SandboxHook instances, got {hook!r}"
                    + (" (a class: add parentheses)" if isinstance(hook, type) else "")
                )
        self.hooks: tuple[SandboxHook, ...] = hook_list
        self.default_exec_timeout_seconds = check_timeout(
            default_exec_timeout_seconds, name="default_exec_timeout_seconds"
        )
        self.ttl_seconds = check_timeout(ttl_seconds, name="ttl_seconds")

    def check_available(self) -> None:
        """Raise (e.g. ``MissingExtraError``) if this backend cannot run here at all.

        Cheap and local: called before inputs are resolved and before anything
        is created.
        """

    @abc.abstractmethod
    async def create(self, *, session_id: str, expires_at: float | None) -> Sandbox:
        """Create one ready sandbox; on failure leave nothing behind and raise."""

    def __repr__(self) -> str:
        hooks = ", ".join(type(h).__name__ for h in self.hooks)
        return f"{type(self).__name__}(hooks=[{hooks}])"

    # --- from YAML ---------------------------------------------------------------

    @classmethod
    def from_options(cls, spec: Mapping[str, Any], common: Mapping[str, Any]) -> SandboxEnvironment:
        """The environment a YAML ``environment:`` mapping describes.

        ``common`` holds the ``COMMON_OPTIONS`` already read (hooks, timeouts,
        shell, env); ``spec`` is the whole mapping, for the backend's own keys
        and defaults.  A bad value raises ``OptionError`` naming its key.
        """
        return cls(**common)

    def share_pool(self, source: SandboxEnvironment) -> None:
        """Take warm sandboxes from ``source``'s pool (the same agent's)."""

    def close_pool(self) -> None:
        """Remove the pool's idle sandboxes."""

    # --- durability: sandboxes that outlive their process (``runner serve``) -----

    def make_durable(self, owner: str) -> None:
        """Sandboxes made from now on belong to ``owner`` (a server's database
        id), not to this process: they survive it, and ``recover`` finds them."""

    async def reattach(self, record: Mapping[str, Any], *, session_id: str) -> Sandbox:
        """The sandbox ``Sandbox.record()`` described, again, with this
        environment's settings; ``SandboxUnavailableError`` saying why if it
        is gone, is another session's, or cannot be used any more."""
        from ..core.errors import SandboxUnavailableError

        raise SandboxUnavailableError(f"re-attaching a {self.backend} sandbox is not built")

    async def discard(self, record: Mapping[str, Any], *, session_id: str) -> bool:
        """Delete the sandbox ``record`` names if it is still there and is
        session ``session_id``'s; True if one was deleted.  No hook runs."""
        return False

    async def discard_unrecorded(self, session_id: str) -> list[str]:
        """Delete the sandboxes made for ``session_id`` that were never recorded
        (the process died while creating one); their ids."""
        return []

    @classmethod
    async def recover(
        cls, records: Sequence[Mapping[str, Any]], *, owner: str, sessions: set[str] | None
    ) -> list[str]:
        """Before a restarted server resumes: end what the stopped one left
        running of ``owner``'s sandboxes (for ``sessions``; None: all of the
        owner's) except what ``records`` keep.  Says what was ended."""
        return []

    # --- snapshots (backends with ``can_snapshot``) ------------------------------

    async def snapshot_key(self, *, hooks: Sequence[Any], inputs: Mapping[str, Any]) -> str:
        """The key of the snapshot these cached hooks, with these inputs, make."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot")

    async def create_from_snapshot(
        self, key: str, *, session_id: str, expires_at: float | None
    ) -> Sandbox | None:
        """A sandbox started from the snapshot with ``key``, or None if there is none."""
        return None

    async def save_snapshot(self, sandbox: Sandbox, key: str) -> str:
        """Save ``sandbox`` as the snapshot for ``key``; returns its id."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot")


async def run_setup_script(
    sandbox: Sandbox,
    script: str,
    *,
    timeout: float,
    where: str,
    execute: Callable[..., Awaitable[SandboxExecutionResult]] | None = None,
) -> None:
    """Run a sandbox's ``setup_script``; a non-zero exit is a ``SandboxSetupError``.

    Shared by the container backends; the caller deletes the sandbox on failure.
    ``execute`` runs it instead of ``sandbox.execute`` (Docker runs it as root).
    """
    from ..core.errors import SandboxSetupError

    result = await (execute or sandbox.execute)(script, timeout_seconds=timeout)
    if result.exit_code != 0:
        reason = "timed out" if result.timed_out else f"exited {result.exit_code}"
        raise SandboxSetupError(
            f"setup_script {reason} {where}: {result.stderr.strip()[-2000:] or '(no stderr)'}",
            exit_code=result.exit_code,
            stderr=result.stderr,
        )
