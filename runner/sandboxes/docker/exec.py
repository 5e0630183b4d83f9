"""The per-command path: one ``docker exec`` per command or file move.

Used where the exec channel's helper cannot run (an image without a full
python3) or after it was lost.  Each call has a deadline kept on the host:
the ``timeout`` inside the container is the agent's to stop.  Files move
through ``cat`` run as the sandbox user (``READ_SCRIPT``, ``CREATE_SCRIPT``,
``WRITE_SCRIPT``), never through the Engine's archive API, which reads and
writes as root and follows the agent's links.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docker

#: The image probe at start: a few ``command -v`` calls.
PROBE_SECONDS = 30.0
#: How long one piece of a file (one whole file on the per-command path) may take.
FILE_DEADLINE_SECONDS = 300.0
#: How long the sandbox user's processes may take over one piece of a file
#: (16 MiB over the channel; on the per-command path, how long the move may
#: go without a byte) before the move is stopped and fails: the agent can
#: stop its own processes (``kill -STOP -1``), and a stopped one must not
#: hold a move, and a close's ``on_destroy`` budget, for long.
FILE_PIECE_SECONDS = 60.0


#: The per-command path's file moves, as the sandbox user: ``sh -c SCRIPT sh
#: PATH [MAX]``.  Exit statuses name the failure (see ``exec_file``).  A read
#: takes at most MAX bytes (the limit and one byte): the runner refuses the
#: file past its limit, and no more than that ever leaves the sandbox.
READ_SCRIPT = """\
if [ -d "$1" ]; then exit 121; fi
if [ -e "$1" ] && [ ! -f "$1" ]; then exit 122; fi
exec head -c "$2" -- "$1"
"""
#: Writes come in two execs: the first creates (or empties) the file, so a
#: refusal comes back at once; only then does the second take the bytes.
CREATE_SCRIPT = """\
if [ -d "$1" ]; then exit 121; fi
if [ -e "$1" ] && [ ! -f "$1" ]; then exit 122; fi
mkdir -p -- "${1%/*}/" && : > "$1"
"""
WRITE_SCRIPT = 'exec cat > "$1"'

_SCRIPT_ERRORS = {
    121: (IsADirectoryError, errno.EISDIR, "Is a directory"),
    122: (OSError, errno.EINVAL, "not a regular file"),
}
#: Otherwise the error ``cat``, ``mkdir`` or the shell printed (GNU and busybox
#: say the same words; the sandbox has no translations of them).
_MESSAGE_ERRORS = (
    ("No such file or directory", FileNotFoundError, errno.ENOENT),
    ("Permission denied", PermissionError, errno.EACCES),
    ("Not a directory", NotADirectoryError, errno.ENOTDIR),
)


class Capped:
    """Keeps the first and last ``cap // 2`` bytes of a stream, counts all of it.

    The host's copy of the helper's ``Capped`` (``helpers/exec_helper.py``
    runs in the container and is never imported here): both cap output the
    same way, and tests/sandboxes/test_capped.py holds them to it.
    """

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def value(self) -> bytes:
        if self.total <= len(self.head) + len(self.tail):
            return bytes(self.head + self.tail)
        omitted = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {omitted} bytes omitted ...]\n".encode()
        return bytes(self.head) + marker + bytes(self.tail)


def file_error(header: dict[str, Any], path: str) -> OSError:
    kinds = {
        "FileNotFoundError": FileNotFoundError,
        "IsADirectoryError": IsADirectoryError,
        "PermissionError": PermissionError,
        "NotADirectoryError": NotADirectoryError,
        "TimeoutError": TimeoutError,  # the sandbox user's process was stopped
    }
    kind = kinds.get(header["error"], OSError)
    return kind(f"{path}: {header['message']}")


def probe(client: docker.DockerClient, container_id: str, workdir: str) -> dict[str, bool] | None:
    """Which of bash, timeout and sleep the image has; None if the container
    is not running."""
    from docker.errors import APIError

    script = "for c in bash timeout sleep; do command -v $c >/dev/null && echo $c; done"
    try:
        _code, stdout, _err, _cut = exec_capped(
            client, container_id, ["sh", "-c", script], {}, workdir, 1 << 16, PROBE_SECONDS
        )
    except APIError as exc:
        if exc.status_code == 409:  # "container ... is not running"
            return None
        raise
    present = stdout.decode("utf-8", errors="replace").split()
    return {name: name in present for name in ("bash", "timeout", "sleep")}


#: Which tool, run as root, becomes another user without a shell of its own
#: in between: setpriv (util-linux), else nsenter with no namespace (also
#: busybox's); the same test the shell helper makes.
DROP_PROBE = (
    'if [ "$(setpriv --reuid=65534 --regid=65534 --clear-groups -- id -u 2>/dev/null)" = 65534 ]; '
    "then echo setpriv; "
    'elif [ "$(nsenter -S 65534 -G 65534 -- id -u 2>/dev/null)" = 65534 ]; then echo nsenter; fi'
)


def probe_drop(client: docker.DockerClient, container_id: str) -> str | None:
    """``"setpriv"``, ``"nsenter"`` or None: how a root exec becomes the
    sandbox user in this image (see ``drop_argv``)."""
    _code, stdout, _err, _cut = exec_capped(
        client, container_id, ["sh", "-c", DROP_PROBE], {}, "/", 1 << 10, PROBE_SECONDS
    )
    kind = stdout.decode("ascii", errors="replace").strip()
    return kind if kind in ("setpriv", "nsenter") else None


def drop_argv(kind: str, uid: int, gid: int) -> list[str]:
    """The argv prefix that runs the rest as ``uid:gid`` with no groups.

    The per-command path starts its execs as root and drops with this,
    rather than ``docker exec --user``: with ``--user``, runc's own init
    process runs as the sandbox user before the command does, and the agent
    (same uid) can stop it with ``kill -STOP -1``; runc, the shim and every
    later Engine call on the container (deletion included) then wait for it
    forever.  As root, nothing of the exec itself is the agent's to stop.
    """
    if kind == "setpriv":
        return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    return ["nsenter", "-S", str(uid), "-G", str(gid), "--"]


def exec_capped(
    client: docker.DockerClient,
    container_id: str,
    argv: list[str],
    env: dict[str, str],
    workdir: str,
    cap: int,
    deadline_seconds: float,
    user: str = "0:0",
) -> tuple[int | None, bytes, bytes, bool]:
    """One exec, its output streamed and capped (head and tail) as the helper does.

    The deadline is kept here, on the host: the ``timeout`` inside the
    container is the agent's to stop or replace.  When it passes, the output
    stream is closed and the exit code is None (the command may still run;
    it goes with the container).
    """
    api = client.api
    exec_id = api.exec_create(
        container_id,
        argv,
        stdout=True,
        stderr=True,
        environment=env or None,
        workdir=workdir,
        user=user,
    )["Id"]
    out, err = Capped(cap), Capped(cap)
    stream = api.exec_start(exec_id, stream=True, demux=True)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        stream.close()  # the blocked read below returns

    timer = threading.Timer(deadline_seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        for stdout, stderr in stream:
            if stdout:
                out.add(stdout)
            if stderr:
                err.add(stderr)
    finally:
        timer.cancel()
        stream.close()
    truncated = out.total > len(out.head) + len(out.tail) or err.total > len(err.head) + len(
        err.tail
    )
    if expired.is_set():
        return None, out.value(), err.value(), truncated
    exit_code = api.exec_inspect(exec_id)["ExitCode"]
    code = exit_code if exit_code is not None else -1
    return code, out.value(), err.value(), truncated


def exec_file(
    client: docker.DockerClient,
    container_id: str,
    script: str,
    path: str,
    user: str,
    data: bytes | None = None,
    *,
    args: tuple[str, ...] = (),
    idle_seconds: float = FILE_PIECE_SECONDS,
    prefix: tuple[str, ...] | list[str] = (),
) -> Iterator[bytes]:
    """Run ``script`` (``READ_SCRIPT``/``WRITE_SCRIPT``) on ``path`` (and
    ``args``) as ``user``, through ``prefix`` (a ``drop_argv``) if any,
    feeding it ``data`` on stdin; yield its stdout as it arrives, then raise
    the ``OSError`` its exit status names.

    Used where there is no helper: ``head``/``cat`` running as the sandbox
    user move the bytes, so the Engine's archive API (which reads and writes
    as root, following the agent's links) is never used.  The whole move has
    a host deadline of ``FILE_DEADLINE_SECONDS``, and fails sooner, with
    ``TimeoutError``, once no byte has moved for ``idle_seconds`` (a process
    the agent stopped).
    """
    api = client.api
    exec_id = api.exec_create(
        container_id,
        [*prefix, "sh", "-c", script, "sh", path, *args],
        stdin=data is not None,
        stdout=True,
        stderr=True,
        user=user,
        workdir="/",
    )["Id"]
    attached = api.exec_start(exec_id, socket=True)
    raw = getattr(attached, "_sock", attached)
    deadline = time.monotonic() + FILE_DEADLINE_SECONDS
    stderr = bytearray()
    try:
        if data is not None:
            view = memoryview(data)
            try:
                for start in range(0, len(data), 1 << 20):
                    raw.settimeout(wait_at_most(deadline, idle_seconds))
                    raw.sendall(view[start : start + (1 << 20)])
                raw.shutdown(socket.SHUT_WR)  # cat sees the end of its input
            except (BrokenPipeError, ConnectionResetError):
                # The script ended early (it refused the file): its status says why.
                with contextlib.suppress(OSError):
                    raw.shutdown(socket.SHUT_WR)
        buffer = _SocketReader(raw, deadline, idle_seconds)
        while True:
            head = buffer.read_exact(8, eof_ok=True)
            if head is None:
                break
            payload = buffer.read_exact(int.from_bytes(head[4:8], "big"))
            assert payload is not None  # without eof_ok, read_exact raises at EOF
            if head[0] == 1:
                yield payload
            elif len(stderr) < 4096:
                stderr += payload[: 4096 - len(stderr)]
    except TimeoutError:
        if time.monotonic() >= deadline - 0.01:
            reason = f"the sandbox did not finish moving the file in {FILE_DEADLINE_SECONDS:g} s"
        else:
            reason = (
                f"the sandbox moved no byte of the file for {idle_seconds:g} s (a process of "
                "the sandbox user's was stopped?); the move was stopped"
            )
        raise TimeoutError(errno.ETIMEDOUT, reason, path) from None
    finally:
        attached.close()
    code = api.exec_inspect(exec_id)["ExitCode"]
    if code == 0:
        return
    if code in _SCRIPT_ERRORS:
        kind, number, text = _SCRIPT_ERRORS[code]
        raise kind(number, text, path)
    message = stderr.decode("utf-8", errors="replace").strip()
    for text, kind, number in _MESSAGE_ERRORS:
        if text in message:
            raise kind(number, text, path)
    raise OSError(errno.EIO, message[-500:] or f"exit status {code}", path)


def wait_at_most(deadline: float, idle_seconds: float) -> float:
    """A socket timeout: until ``deadline``, and no more than ``idle_seconds``."""
    return max(0.01, min(deadline - time.monotonic(), idle_seconds))


class _SocketReader:
    """Exact reads from a socket, each within an overall deadline, and none
    waiting longer than ``idle_seconds`` for its next bytes."""

    def __init__(self, raw: socket.socket, deadline: float, idle_seconds: float) -> None:
        self._raw = raw
        self._deadline = deadline
        self._idle = idle_seconds
        self._buffer = bytearray()

    def read_exact(self, size: int, *, eof_ok: bool = False) -> bytes | None:
        while len(self._buffer) < size:
            self._raw.settimeout(wait_at_most(self._deadline, self._idle))
            chunk = self._raw.recv(max(1 << 16, size - len(self._buffer)))
            if not chunk:
                if eof_ok and not self._buffer:
                    return None
                raise OSError(errno.EIO, "the sandbox's output ended early")
            self._buffer += chunk
        piece = bytes(self._buffer[:size])
        del self._buffer[:size]
        return piece


def drain(pieces: Iterator[bytes]) -> None:
    for _ in pieces:
        pass
