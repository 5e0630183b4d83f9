"""``DockerSandbox``: one session's container, seen from the inside out.

Runs commands (over the exec channel, else one ``docker exec`` each under
``timeout``) and moves files with the sandbox user's rights.  The
environment that creates these (options, pool, snapshots) is in ``docker``;
the channel in ``channel``; the per-command path in ``exec``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import re
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from ...core.errors import SandboxUnavailableError
from ...core.events import decode_output, emit
from ..base import (
    MAX_FILE_BYTES,
    READ_LIMIT,
    TIMEOUT_EXIT_CODE,
    FileTooLargeError,
    Sandbox,
    SandboxExecutionResult,
    SparseWriter,
    check_env,
    check_timeout,
    write_sparse,
)
from .channel import ANSWER_GRACE_SECONDS, ChannelError, ExecChannel
from .engine import DockerClient, remove_container, short_error
from .exec import (
    CREATE_SCRIPT,
    FILE_DEADLINE_SECONDS,
    FILE_PIECE_SECONDS,
    PROBE_SECONDS,
    READ_SCRIPT,
    WRITE_SCRIPT,
    drain,
    drop_argv,
    exec_capped,
    exec_file,
    file_error,
    probe,
    probe_drop,
)

if TYPE_CHECKING:
    from pathlib import Path

    import docker
    from docker.models.containers import Container

T = TypeVar("T")
logger = logging.getLogger("runner")

WORKSPACE = "/workspace"
SANDBOX_UID = SANDBOX_GID = 1000
SANDBOX_HOME = "/home/sandbox"
#: Files travel over the exec channel in pieces of this size.
FILE_CHUNK_BYTES = 16 << 20
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


#: Lists (``list``) or kills (``kill``) a user's processes but those kept, as
#: root; see ``DockerSandbox.end_processes``.
PROCESSES_SCRIPT = r"""
# $1: list | kill; $2: the uid; then the processes to keep, as PID:START
# (START: the 22nd field of /proc/PID/stat, its start time in clock ticks
# since boot: a reused pid never matches), with every process they fork
# later (a hook's service that starts a worker after the mark).  Builtins
# only (read, kill, a glob): with the pids limit reached, nothing else
# could start.
what=$1 uid=$2
shift 2
keep=" $* "
set -f
# procs: the uid's live processes, neither kept nor descended from a kept
# one, as PID:START, in L
procs() {
    L= K=' '
    set +f
    for d in /proc/[0-9]*; do
        set -f
        u= s=
        while read -r k a b rest; do
            case $k in
            State:) s=$a ;;
            Uid:) u="$a $b" && break ;;
            esac
        done 2>/dev/null <"$d/status"
        case $s in Z | X | '') continue ;; esac
        case " $u " in *" $uid "*) ;; *) continue ;; esac
        read -r line 2>/dev/null <"$d/stat" || continue
        set -- ${line##*) }
        [ $# -ge 20 ] || continue
        pp=$2
        shift 19
        p=${d#/proc/}
        case $keep in *" $p:$1 "*) K="$K$p " && continue ;; esac
        L="$L $p:$1:$pp"
    done
    set -f
    # the descendants of kept processes, parent by parent (K: kept pids)
    more=1
    while [ "$more" = 1 ]; do
        more=0 rest=
        for e in $L; do
            case $K in
            *" ${e##*:} "*) K="$K${e%%:*} " more=1 ;;
            *) rest="$rest $e" ;;
            esac
        done
        L=$rest
    done
    rest=
    for e in $L; do rest="$rest ${e%:*}"; done
    L=$rest
}
procs
if [ "$what" = list ]; then
    echo "procs:$L"
    exit 0
fi
# kill: round after round, until a round finds none it has not killed
# (what one forked while the last round ran is found by the next; a killed
# process never runs its own code again, even before it is gone)
killed=0 round=0 hit=' '
while :; do
    new=0
    for e in $L; do
        case $hit in *" $e "*) continue ;; esac
        kill -9 "${e%%:*}" 2>/dev/null && killed=$((killed + 1))
        hit="$hit$e " new=1
    done
    [ "$new" = 1 ] || break
    round=$((round + 1))
    [ "$round" -le 1000 ] || exit 1
    procs
done
echo "killed:$killed"
"""
#: How long listing or killing the sandbox user's processes may take.
PROCESSES_SECONDS = 30.0
#: A process as ``PROCESSES_SCRIPT`` names it: PID:START.
_PROCESS = re.compile(r"[0-9]+:[0-9]+")


class DockerSandbox(Sandbox):
    """One session's live container."""

    def __init__(
        self,
        *,
        client: DockerClient,
        container: Container,
        image: str,
        session_id: str,
        shell: str,
        default_exec_timeout_seconds: float,
        user: str = "sandbox",
    ) -> None:
        self.client = client
        self.container = container
        self.session_id = session_id
        #: The session id on the container's label (a pooled container keeps
        #: its ``pool-...`` label once a session adopts it: labels are fixed).
        self.label_session_id = session_id
        self.workspace = WORKSPACE
        self.image = image
        self.shell = shell
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self.user = user
        self._deleted = False
        self._delete_lock: anyio.Lock | None = None  # made in the loop that deletes
        self.channel: ExecChannel | None = None
        #: The snapshot image this container was started from, if any.
        self.snapshot_image: str | None = None
        self.output_cap_bytes = 8 << 20
        self.memory: str | None = None
        #: The container's pids limit (raised for a moment if the agent's
        #: processes took every pid when they are to be killed).
        self.pids_limit: int | None = None
        #: The OOM killer's count when the channel started; whether the next
        #: command reopens the channel (the helper died of out-of-memory).
        self._oom_kills: int | None = None
        self._reopen_channel = False
        self._helper = "auto"
        #: How long the sandbox user's processes may take over one piece of a
        #: file before the move is stopped and fails (both helpers and the
        #: per-command path; see ``FILE_PIECE_SECONDS``).
        self.file_piece_seconds = FILE_PIECE_SECONDS
        #: How the per-command path becomes the sandbox user ("setpriv",
        #: "nsenter", None: neither, so ``docker exec --user``); probed on
        #: first use.
        self._drop: str | None = None
        self._drop_probed = False
        #: ``HOME`` for the sandbox user's later commands (None: the
        #: container's, ``SANDBOX_HOME``); see ``fresh_home``.
        self.home: str | None = None

    @property
    def container_id(self) -> str:
        return self.container.id

    def record(self) -> dict[str, Any]:
        # A pooled container's label names the pool, not the session.
        return {
            "container_id": self.container_id,
            "label_session_id": self.label_session_id or self.session_id,
        }

    def _ids(self, *, root: bool = False) -> list[int] | None:
        """The uid and gid the helper switches to (None: stay root)."""
        if root or self.user == "root":
            return None
        return [SANDBOX_UID, SANDBOX_GID]

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

    async def prepare(self, *, detect_shell: bool) -> None:
        """Find the shell and check the image has what ``execute`` relies on."""
        if self.channel is not None:  # the helper's first answer already told us
            found: dict[str, bool] | None = self.channel.found
        else:
            found = await self.client.call(probe, self.container_id, WORKSPACE)
        if found is None or not found.get("sleep"):
            raise SandboxUnavailableError(
                f"the container from {self.image!r} exited right after it started; the image "
                "needs 'sleep' and a shell, and must not stop on its own"
            )
        if not found.get("timeout"):
            raise SandboxUnavailableError(
                f"image {self.image!r} has no "
                "'timeout' command (GNU coreutils or busybox); the sandbox needs it to enforce "
                "command timeouts"
            )
        if detect_shell and found.get("bash"):
            self.shell = "bash"

    async def hand_over_workspace(self) -> None:
        """Give the workspace and HOME to the sandbox user (as root, once, after
        the setup script, so what it put there is the user's too)."""
        dirs = f"{SANDBOX_HOME} {WORKSPACE}"
        result = await self.execute_as_root(
            f"mkdir -p -- {dirs} && chown -R {SANDBOX_UID}:{SANDBOX_GID} -- {dirs}",
            timeout_seconds=PROBE_SECONDS,
        )
        if result.exit_code != 0:
            raise SandboxUnavailableError(
                f"could not give {WORKSPACE} and {SANDBOX_HOME} to the sandbox user in image "
                f"{self.image!r}: {result.stderr.strip()[-500:]}"
            )

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(WORKSPACE, path))

    async def open_channel(self, helper: str = "auto") -> None:
        """Start the in-container helper (``helper``: see ``HELPERS``) and say
        which one answers; if none can (or on any failure), stay on one
        ``docker exec`` per command, and say why."""
        channel = ExecChannel(
            None,
            self.container_id,
            max_body_bytes=2 * self.output_cap_bytes + FILE_CHUNK_BYTES + (1 << 20),
            helper=helper,
        )
        try:
            await self.client.call(_start_channel, channel)
            if not channel.can_drop and self._ids() is not None:
                raise ChannelError(
                    "the shell helper found neither setpriv nor nsenter in the image, so it "
                    "cannot run commands as the sandbox user"
                )
        except ChannelError as exc:
            channel.close()
            emit("exec_channel_unavailable", session_id=self.session_id, reason=str(exc))
            return
        self.channel = channel
        self._helper = helper
        if self._oom_kills is None:  # what a later loss of the channel is measured against
            self._oom_kills = await self._oom_kill_count()
        emit(
            "exec_channel_started",
            session_id=self.session_id,
            channel=channel.kind,
            reason=channel_reason(helper, channel.kind),
        )

    async def _on_channel(
        self,
        work: Callable[[ExecChannel], T],
        awaitable: Callable[[ExecChannel], Awaitable[T]] | None = None,
    ) -> T | _NoChannel:
        """``work(channel)`` in a worker thread, or ``awaitable(channel)`` on the
        event loop where it can (the Python helper, on asyncio): fewer thread
        hand-offs per command.  ``NO_CHANNEL`` if there is no channel.

        Raises ``ChannelError`` if the channel is lost during the work; later
        calls then go through ``docker exec`` one by one.
        """
        if self.channel is None and self._reopen_channel:
            # The out-of-memory killer took the helper: start it again, once.
            self._reopen_channel = False
            await self.open_channel(self._helper)
        channel = self.channel
        if channel is None:
            return NO_CHANNEL
        try:
            if awaitable is not None and channel.kind == "python" and _on_asyncio():
                return await awaitable(channel)
            return await anyio.to_thread.run_sync(
                partial(work, channel), limiter=_CHANNEL_WAITERS, abandon_on_cancel=True
            )
        except ChannelError as exc:
            self.channel = None
            channel.close()
            logger.warning(
                "exec channel of session %s lost (%s); using one docker exec per command",
                self.session_id,
                exc,
            )
            emit("exec_channel_lost", session_id=self.session_id, reason=str(exc))
            raise

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
        try:
            answer = await self._on_channel(
                lambda channel: channel.request(
                    request, timeout=timeout + ANSWER_GRACE_SECONDS, kill_after=timeout
                ),
                lambda channel: channel.request_async(
                    request, timeout=timeout + ANSWER_GRACE_SECONDS
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

    # --- files: as the sandbox user, over the channel or through `cat` ---------

    def _channel_read(
        self,
        channel: ExecChannel,
        path: str,
        sink: Callable[[bytes], object],
        limit: int | None = None,
        of: str = MAX_FILE_BYTES,
        expect: Callable[[int], object] | None = None,
    ) -> None:
        """A file's bytes over the channel into ``sink`` as they arrive, piece
        by piece (blocking), at most ``limit`` of them (default:
        ``max_file_bytes``); ``FileTooLargeError`` past it.  ``expect`` is
        told the file's size (when within ``limit``) from the first piece's
        header, before any of its bytes reach the sink.

        The limit holds inside the read: each request asks for at most a
        piece, and no more than ``limit + 1`` bytes in all (a small limit is
        one request of ``limit + 1``: the pieces stay a fixed size, whose
        multiples the shell helper's offsets must be); the file is refused
        from its size when opened, known from the first piece, or once more
        than ``limit`` bytes arrived, and the sink never gets more than
        ``limit``."""
        limit = self.max_file_bytes if limit is None else limit
        piece = min(FILE_CHUNK_BYTES, limit + 1)
        offset = 0

        def counted(data: bytes) -> None:
            nonlocal offset
            kept = data[: max(0, limit - offset)]
            offset += len(data)
            if kept:
                sink(kept)

        def sized(header: dict[str, Any]) -> None:
            if expect is not None and header["size"] <= limit:
                expect(header["size"])

        while True:
            asked_at = offset
            header, _ = channel.request(
                {
                    "op": "read",
                    "path": self._path(path),
                    "offset": asked_at,
                    "max_bytes": piece,
                    "user": self._ids(),
                    "deadline": self.file_piece_seconds,
                },
                timeout=FILE_DEADLINE_SECONDS,
                kill_after=self.file_piece_seconds,
                sink=counted,
                on_header=sized if asked_at == 0 else None,
            )
            if "error" in header:
                raise file_error(header, path)
            if header["size"] > limit:
                raise FileTooLargeError(path, header["size"], limit, of)
            if offset > limit:  # it grew while being read
                raise FileTooLargeError(path, None, limit, of)
            if offset - asked_at < piece:
                return

    def _exec_pieces(
        self,
        client: docker.DockerClient,
        runas: tuple[list[str], str],
        path: str,
        limit: int | None = None,
        of: str = "",
    ) -> Iterator[bytes]:
        """The same through ``head -c LIMIT+1`` as the sandbox user (blocking):
        no size is known in advance, so the read stops one byte past the
        limit, and no more than that leaves the sandbox."""
        limit = self.max_file_bytes if limit is None else limit
        read = 0
        for piece in exec_file(
            client,
            self.container_id,
            READ_SCRIPT,
            self._path(path),
            runas[1],
            args=(str(limit + 1),),
            idle_seconds=self.file_piece_seconds,
            prefix=runas[0],
        ):
            read += len(piece)
            if read > limit:
                raise FileTooLargeError(path, None, limit, of or MAX_FILE_BYTES)
            yield piece

    async def read_file(self, path: str) -> bytes:
        return await self._read_bounded(path, self.max_file_bytes, MAX_FILE_BYTES)

    async def read_file_limited(self, path: str, limit: int) -> bytes:
        if limit >= self.max_file_bytes:
            return await self.read_file(path)
        return await self._read_bounded(path, limit, READ_LIMIT)

    async def _read_bounded(self, path: str, limit: int, of: str) -> bytes:
        """At most ``limit`` bytes of the file, so that at its peak only the
        returned bytes are in memory, not the pieces and their join besides.
        Over the channel the size is known from the first piece's header, so
        the pieces go straight into one buffer of that size (``FileBuffer``);
        on the per-command path it is not, and they go through a host
        temporary file, which never holds more than ``limit`` bytes.

        The bytes come back in ``box``, not as the worker thread's result:
        an idle anyio worker keeps its last result alive (until its next
        job, or 10 s), which would keep a copy of a large file after the
        caller dropped it."""
        box: list[bytes] = []
        try:
            done = await self._on_channel(
                partial(self._channel_read_bytes, path=path, limit=limit, of=of, box=box)
            )
        except ChannelError:
            done = NO_CHANNEL  # reading again is harmless
        if not isinstance(done, _NoChannel):
            return box.pop()
        runas = await self._as_user([])

        def read_pieces(client: docker.DockerClient) -> None:
            pieces = self._exec_pieces(client, runas, path, limit, of)
            box.append(spooled(lambda add: drain_into(add, pieces)))

        await self.client.call(read_pieces)
        return box.pop()

    def _channel_read_bytes(
        self, channel: ExecChannel, *, path: str, limit: int, of: str, box: list[bytes]
    ) -> None:
        into = FileBuffer()
        self._channel_read(channel, path, into.write, limit, of, expect=into.expect)
        box.append(into.value())

    def _channel_save(self, channel: ExecChannel, *, path: str, target: Path) -> int:
        with SparseWriter(target) as out:
            self._channel_read(channel, path, out.write)
        return out.size

    async def save_file(self, path: str, target: Path) -> int:
        """Streamed to ``target`` piece by piece, its runs of zeros left as
        holes; refused over ``max_file_bytes``; no ``target`` is left behind
        on failure."""
        try:
            try:
                size = await self._on_channel(partial(self._channel_save, path=path, target=target))
            except ChannelError:
                size = NO_CHANNEL  # copying again is harmless
            if not isinstance(size, _NoChannel):
                return size
            runas = await self._as_user([])
            return await self.client.call(
                lambda client: write_sparse(target, self._exec_pieces(client, runas, path))
            )
        except BaseException:
            target.unlink(missing_ok=True)
            raise

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        target = self._path(path)

        def write_pieces(channel: ExecChannel) -> None:
            view = memoryview(payload)  # pieces are views: no copy of the file
            for offset in range(0, max(1, len(payload)), FILE_CHUNK_BYTES):
                piece = view[offset : offset + FILE_CHUNK_BYTES]
                header, _ = channel.request(
                    {
                        "op": "write",
                        "path": target,
                        "offset": offset,
                        "user": self._ids(),
                        "deadline": self.file_piece_seconds,
                    },
                    piece,
                    timeout=FILE_DEADLINE_SECONDS,
                    kill_after=self.file_piece_seconds,
                )
                if "error" in header:
                    raise file_error(header, path)

        try:
            done = await self._on_channel(write_pieces)
        except ChannelError:
            done = NO_CHANNEL  # writing the whole file again is harmless
        if isinstance(done, _NoChannel):
            prefix, user = await self._as_user([])

            def create_then_write(client: docker.DockerClient) -> None:
                move = partial(exec_file, client, self.container_id)
                idle = self.file_piece_seconds
                drain(move(CREATE_SCRIPT, target, user, idle_seconds=idle, prefix=prefix))
                drain(move(WRITE_SCRIPT, target, user, payload, idle_seconds=idle, prefix=prefix))

            await self.client.call(create_then_write)

    # --- the processes the sandbox user left running (issue 26) ---------------

    async def mark_processes(self) -> frozenset[str] | None:
        """The sandbox user's processes now, as PID:START (None under ``user:
        root``, where the agent's processes are not told apart from root's)."""
        if self._ids() is None:
            return None
        return frozenset((await self._processes("list", ())).split())

    async def fresh_home(self) -> str | None:
        """A new ``HOME`` for the hooks: made by root in ``/tmp`` (mktemp, so
        nothing the agent left there can stand in for it), the sandbox
        user's, mode 700."""
        if self._ids() is not None:
            made = await self.execute_as_root(
                "d=$(mktemp -d /tmp/runner-hooks-home.XXXXXXXX) && chown "
                f'{SANDBOX_UID}:{SANDBOX_GID} "$d" && chmod 700 "$d" && printf %s "$d"',
                timeout_seconds=PROBE_SECONDS,
            )
            if made.exit_code != 0 or not made.stdout.startswith("/tmp/runner-hooks-home."):
                raise SandboxUnavailableError(
                    f"could not make a new HOME for the hooks: {made.stderr.strip()[-300:]}"
                )
            self.home = made.stdout
        return self.home

    async def end_processes(self, *, since: frozenset[str] | None = None) -> int | None:
        """Kill every process of the sandbox user (uid 1000) but those in the
        mark ``since`` and the ones they forked since (a hook's service that
        starts a worker later; the turn's commands descend from the root
        helper, never from a marked process): as root, by uid, round after
        round until none is left, so a loop forking as fast as it can is
        caught too.  ``on_destroy`` comes after a kill with no mark.  Nothing
        under ``user: root``.  Raises ``SandboxUnavailableError`` if it could
        not be done."""
        if self._ids() is None:
            return None
        keep = sorted(p for p in since or () if _PROCESS.fullmatch(p))
        return int(await self._processes("kill", keep))

    async def _processes(self, what: str, keep: Iterable[str]) -> str:
        command = f"set -- {what} {SANDBOX_UID} {' '.join(keep)}\n{PROCESSES_SCRIPT}"
        expected = "procs:" if what == "list" else "killed:"
        result = await self.execute_as_root(command, timeout_seconds=PROCESSES_SECONDS)
        if not result.stdout.startswith(expected):
            # No process could start (the pids limit reached, by the agent's
            # processes): once more, with a little room above the limit.
            async with self._pids_headroom():
                result = await self.execute_as_root(command, timeout_seconds=PROCESSES_SECONDS)
        if result.exit_code != 0 or not result.stdout.startswith(expected):
            raise SandboxUnavailableError(
                f"could not {what} the sandbox user's processes (exit code {result.exit_code}): "
                f"{(result.stderr or result.stdout).strip()[-300:]}"
            )
        return result.stdout[len(expected) :].strip()

    @contextlib.asynccontextmanager
    async def _pids_headroom(self) -> AsyncIterator[None]:
        """The container's pids limit raised by ``PIDS_HEADROOM`` meanwhile."""
        limit = self.pids_limit
        if not limit or limit <= 0:
            yield
            return
        await self.client.call(_update_pids_limit, self.container_id, limit + PIDS_HEADROOM)
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self.client.call(_update_pids_limit, self.container_id, limit)

    def adopt(self, *, session_id: str, client: DockerClient) -> None:
        """Hand a pooled sandbox to a session (and to that session's event loop)."""
        self.session_id = session_id
        self.client = client

    async def delete(self) -> None:
        if self._delete_lock is None:
            self._delete_lock = anyio.Lock()
        async with self._delete_lock:  # a second caller waits, then finds it gone
            if self._deleted:
                return
            if self.channel is not None:
                self.channel.close()
                self.channel = None
            await self.client.call(remove_container, self.container_id)
            self._deleted = True


class _NoChannel:
    """What ``_on_channel`` returns when the sandbox has no channel."""


NO_CHANNEL = _NoChannel()


#: Threads waiting on channel answers hold no Engine connection, so they get
#: their own, larger limiter: a long command must not starve the pool.
_CHANNEL_WAITERS = anyio.CapacityLimiter(256)


def _on_asyncio() -> bool:
    """Whether an asyncio event loop runs this task (``request_async`` needs
    one; anyio's other backend, trio, has none)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class FileBuffer:
    """A file's bytes gathered into one buffer, sized up front from the file's
    size, then handed out as ``bytes`` without a copy: the peak is the file
    once.  ``io.BytesIO`` does both (a write past its end allocates exactly
    that much; ``getvalue()`` returns its own buffer when the length is
    exact).  A file that grew or shrank meanwhile still comes out whole: the
    buffer grows, or is cut to what arrived."""

    def __init__(self) -> None:
        self._buffer = io.BytesIO()
        self._written = 0

    def expect(self, size: int) -> None:
        if size > 0 and self._written == 0:
            self._buffer.seek(size - 1)
            self._buffer.write(b"\0")
            self._buffer.seek(0)

    def write(self, data: bytes) -> None:
        self._buffer.write(data)
        self._written += len(data)

    def value(self) -> bytes:
        self._buffer.truncate(self._written)
        return self._buffer.getvalue()


def spooled(fill: Callable[[Callable[[bytes], None]], object]) -> bytes:
    """The bytes ``fill`` hands, piece by piece, to the function it is given:
    kept in a host temporary file until the end, then read back at once."""
    with tempfile.TemporaryFile(buffering=0) as spool:
        fill(partial(write_all, spool))
        spool.seek(0)
        return spool.readall()


def drain_into(add: Callable[[bytes], None], pieces: Iterable[bytes]) -> None:
    for piece in pieces:
        add(piece)


def write_all(out: Any, data: bytes) -> None:
    """``data`` to a raw (unbuffered) file, whose writes may be partial."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]


def channel_reason(asked: str, kind: str | None) -> str:
    """Why a sandbox's commands go through the helper they do."""
    if asked != "auto":
        return f"exec_channel={asked!r} was asked for"
    if kind == "python":
        return "the image has python3 (full or python3-minimal): the Python helper is the faster"
    return (
        "the image has no python3 that can run the Python helper: "
        "the POSIX shell helper serves commands and files"
    )


#: How many pids above its limit the container gets while the sandbox user's
#: processes are killed, if they had taken every one.
PIDS_HEADROOM = 16


def _update_pids_limit(client: docker.DockerClient, container_id: str, limit: int) -> None:
    """``docker update --pids-limit`` (docker-py's ``update_container`` lacks it)."""
    api = client.api
    url = api._url("/containers/{0}/update", container_id)
    api._raise_for_status(api._post_json(url, data={"PidsLimit": limit}))


def _start_channel(client: docker.DockerClient, channel: ExecChannel) -> None:
    from docker.errors import DockerException

    channel.api = client.api
    try:
        channel.start()
    except DockerException as exc:
        raise ChannelError(f"cannot start the helper: {short_error(exc)}") from exc
