"""The host side of a sandbox's persistent exec channel.

One ``docker exec`` runs ``_exec_helper.py`` for the whole life of the
container; requests and answers travel over its attached stream, so a
command costs a few milliseconds instead of the Engine API's three calls
(create, start, inspect: ~50 ms here).  Any number of requests may be in
flight: each carries an id, and a reader thread hands every answer to the
request waiting for it.

If the helper cannot start (no python3 in the image) or dies, the channel
says so with ``ChannelError`` and the sandbox goes back to one exec per
command: it never hangs, because every wait has a deadline.

Everything read from the container may be forged by the agent, so an answer
is used only if it answers a request in flight (ids are random, so none can
be guessed) and has exactly the fields and types the helper sends, with
lengths that fit its body (``check_answer``).  Anything else ends the
channel: the request in flight gets ``ChannelError`` at once, and the
sandbox goes back to one exec per command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any


@functools.cache
def helper_source() -> str:
    """The helper's code, read once, when the first channel starts."""
    return resources.files("runner.sandboxes").joinpath("_exec_helper.py").read_text("utf-8")


START_TIMEOUT_SECONDS = 15.0
#: Beyond a command's own timeout, how long to wait for its answer before
#: declaring the helper lost.
ANSWER_GRACE_SECONDS = 15.0


class ChannelError(Exception):
    """The helper is unavailable or stopped answering; use per-command exec."""


@dataclass
class _Pending:
    request: dict[str, Any]  # what was asked: its answer is checked against it
    done: threading.Event = field(default_factory=threading.Event)
    header: dict[str, Any] | None = None
    body: bytes = b""


class ExecChannel:
    """A started helper process and the stream to it.  Thread-safe."""

    def __init__(self, api: Any, container_id: str, *, max_body_bytes: int = 64 << 20) -> None:
        self.api = api
        #: The largest answer body accepted; a bigger one (a command writing
        #: forged frames into the helper's stdout) ends the channel.
        self.max_body_bytes = max_body_bytes
        self.container_id = container_id
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._dead: str | None = None
        self._stderr = bytearray()
        self._socket: socket.socket | None = None
        self._stream: Any = None
        self._reader: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self._dead is None

    def start(self) -> None:
        """Start the helper and wait for its first answer (blocking)."""
        exec_id = self.api.exec_create(
            self.container_id,
            ["python3", "-u", "-c", helper_source()],
            stdin=True,
            stdout=True,
            stderr=True,
            user="0:0",  # out of the sandbox user's reach: it cannot signal or trace root
        )["Id"]
        stream = self.api.exec_start(exec_id, socket=True)
        self._stream = stream  # closed with the socket: it holds a reference to it
        self._socket = getattr(stream, "_sock", stream)
        self._reader = threading.Thread(
            target=self._read_loop, name=f"exec-channel-{self.container_id[:12]}", daemon=True
        )
        self._reader.start()
        header, _ = self.request({"op": "ping"}, timeout=START_TIMEOUT_SECONDS)
        if "error" in header:
            raise ChannelError(f"the helper failed to start: {header['message'][:500]}")
        self.found: dict[str, bool] = header["found"]
        #: Whether the helper made itself non-dumpable, out of the commands'
        #: reach (see ``seal`` in the helper).
        self.sealed: bool = header["sealed"]

    def request(
        self, header: dict[str, Any], body: bytes = b"", *, timeout: float
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait (blocking) for its answer."""
        if header["op"] not in ANSWER_FIELDS:
            raise ValueError(f"unknown op {header['op']!r}")
        deadline = time.monotonic() + timeout
        pending = _Pending(header)
        with self._lock:  # checked and registered together: _fail sees it or we see _dead
            if self._dead is not None:
                raise ChannelError(self._dead)
            # Random, not sequential: a command that reaches the helper's
            # stream cannot guess the id of a request in flight.
            request_id = secrets.randbits(64)
            while request_id in self._pending:
                request_id = secrets.randbits(64)
            self._pending[request_id] = pending
        data = json.dumps({**header, "id": request_id}).encode("utf-8")
        frame = struct.pack(">I", len(data)) + data + struct.pack(">Q", len(body))
        try:
            with self._write_lock:
                self._send(frame, deadline)
                if body:
                    self._send(body, deadline)
        except (OSError, TimeoutError) as exc:
            self._fail(f"writing to the helper failed: {exc}")
        if not pending.done.wait(max(0.0, deadline - time.monotonic())):
            self._fail(f"the helper did not answer within {timeout:g}s")
        with self._lock:
            self._pending.pop(request_id, None)
        if pending.header is None:
            raise ChannelError(self._dead or "the helper stopped")
        return pending.header, pending.body

    def _send(self, data: bytes, deadline: float) -> None:
        """Send all of ``data`` before ``deadline``: a stopped helper cannot
        block us (or, through the write lock, every later request)."""
        assert self._socket is not None
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the helper stopped reading")
            _, writable, _ = select.select([], [self._socket], [], left)
            if writable:
                sent = self._socket.send(view[: 1 << 20], socket.MSG_DONTWAIT)
                view = view[sent:]

    def close(self) -> None:
        self._fail("closed")
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
            self._socket.close()
        if self._stream is not None and self._stream is not self._socket:
            with contextlib.suppress(OSError):
                self._stream.close()

    # --- reading ---------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        with self._lock:
            if self._dead is None:
                detail = self._stderr.decode("utf-8", "replace").strip()[-500:]
                self._dead = reason + (f" (helper stderr: {detail})" if detail else "")
            pending = list(self._pending.values())
        for item in pending:
            item.done.set()

    def _read_loop(self) -> None:
        """Demultiplex Docker's stream frames, then parse the helper's frames."""
        buffer = bytearray()
        try:
            while True:
                stream_type, payload = self._docker_frame()
                if stream_type == 2:
                    self._stderr += payload
                    del self._stderr[:-4000]
                    continue
                buffer += payload
                while True:
                    message = _take_frame(buffer, max_body=self.max_body_bytes)
                    if message is None:
                        break
                    self._deliver(*message)
        except (OSError, EOFError) as exc:
            self._fail(f"the helper's stream ended ({type(exc).__name__})")
        except ValueError as exc:
            # Its text may quote the forger: keep it short in logs and results.
            self._fail(f"a forged or malformed answer ended the channel: {str(exc)[:300]}")
        except Exception as exc:  # never a dead reader and requests left waiting
            self._fail(f"reading the helper's answers failed: {type(exc).__name__}: {exc}")

    def _deliver(self, header: Any, body: bytes) -> None:
        """Hand an answer to its request, or raise ValueError if it answers
        none in flight (forged: honest ids are random and answered once) or
        is not what the helper sends."""
        request_id = header.get("id") if isinstance(header, dict) else None
        if type(request_id) is not int:
            raise ValueError("an answer without a request id")
        with self._lock:
            pending = self._pending.get(request_id)
            if pending is None or pending.header is not None:
                raise ValueError(f"an answer to no request in flight (id {request_id})")
            check_answer(pending.request, header, body)
            pending.header, pending.body = header, body
        pending.done.set()

    def _docker_frame(self) -> tuple[int, bytes]:
        header = self._recv_exact(8)
        stream_type = header[0]
        size = struct.unpack(">I", header[4:])[0]
        return stream_type, self._recv_exact(size)

    def _recv_exact(self, size: int) -> bytes:
        assert self._socket is not None
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self._socket.recv(min(size - len(chunks), 1 << 20))
            if not chunk:
                raise EOFError
            chunks += chunk
        return bytes(chunks)


#: No honest answer header comes near this size.
MAX_HEADER_BYTES = 64 << 10


def _take_frame(buffer: bytearray, *, max_body: int) -> tuple[dict[str, Any], bytes] | None:
    """Remove and return one complete helper frame from ``buffer``, if there is one.

    Sizes are checked as soon as they are known, before anything is buffered
    for them: oversized frames raise ValueError, which ends the channel.
    """
    if len(buffer) < 4:
        return None
    header_size = struct.unpack(">I", buffer[:4])[0]
    if header_size > MAX_HEADER_BYTES:
        raise ValueError(f"an answer header of {header_size} bytes")
    body_at = 4 + header_size + 8
    if len(buffer) < body_at:
        return None
    body_size = struct.unpack(">Q", buffer[4 + header_size : body_at])[0]
    if body_size > max_body:
        raise ValueError(f"an answer body of {body_size} bytes")
    if len(buffer) < body_at + body_size:
        return None
    try:
        header = json.loads(bytes(buffer[4 : 4 + header_size]).decode("utf-8"))
    except RecursionError as exc:  # JSON nested thousands deep
        raise ValueError("an answer header nested too deep") from exc
    body = bytes(buffer[body_at : body_at + body_size])
    del buffer[: body_at + body_size]
    return header, body


#: The fields of each kind of answer, with their exact types (``bool`` is an
#: ``int`` subclass, so types are compared exactly, not with isinstance).
ANSWER_FIELDS: dict[str, dict[str, type]] = {
    "ping": {"id": int, "ok": bool, "pid": int, "found": dict, "sealed": bool},
    "exec": {
        "id": int,
        "exit_code": int,
        "timed_out": bool,
        "stdout_total": int,
        "stdout_len": int,
        "stderr_total": int,
    },
    "read": {"id": int, "ok": bool, "size": int},
    "write": {"id": int, "ok": bool},
}
#: Any op may fail instead (the helper's exception).
ERROR_FIELDS: dict[str, type] = {"id": int, "error": str, "message": str}
#: What the helper prints in a stream's cut output besides the kept bytes
#: ("[... N bytes omitted ...]").
CUT_MARKER_BYTES = 64


def check_answer(request: dict[str, Any], header: dict[str, Any], body: bytes) -> None:
    """Raise ValueError unless ``header`` and ``body`` are an answer the
    helper could have sent to ``request``: nothing missing, nothing extra,
    every type exact, every length possible.  Callers then use the fields
    without further checks."""
    op = request["op"]
    failed = "error" in header
    fields = ERROR_FIELDS if failed else ANSWER_FIELDS[op]
    if header.keys() != fields.keys():
        raise ValueError(f"{op} answer with fields {sorted(header)}, not {sorted(fields)}")
    for name, kind in fields.items():
        if type(header[name]) is not kind:
            raise ValueError(f"{op} answer with {name} of type {type(header[name]).__name__}")
    if header.get("ok") is False:
        raise ValueError(f"{op} answer with ok false")
    if failed or op in ("ping", "write"):
        if body:
            raise ValueError(f"{op} answer with a body")
    elif op == "exec":
        _check_exec(header, len(body))
    elif len(body) > request["max_bytes"] or not 0 <= header["size"] < 1 << 63:
        raise ValueError(f"read answer of {len(body)} bytes (asked {request['max_bytes']})")
    if op == "ping" and not failed:
        found = header["found"]
        flags = all(type(value) is bool for value in found.values())
        if found.keys() != {"bash", "timeout", "sleep"} or not flags:
            raise ValueError("ping answer with other found flags")


def _check_exec(header: dict[str, Any], body_size: int) -> None:
    """An exec answer's numbers must be ones a real command could give."""
    code, stdout_len = header["exit_code"], header["stdout_len"]
    if not 0 <= code <= 255 or (header["timed_out"] and code != 124):
        raise ValueError(f"exit code {code} (timed out: {header['timed_out']})")
    if not 0 <= stdout_len <= body_size:
        raise ValueError(f"stdout of {stdout_len} bytes in a body of {body_size}")
    for name, kept in (("stdout", stdout_len), ("stderr", body_size - stdout_len)):
        total = header[f"{name}_total"]
        # All of it was kept, or it was cut: then at most the cut marker more.
        cut = min(kept, total) > 0 and kept <= total + CUT_MARKER_BYTES
        if not (kept == total or cut) or total >= 1 << 63:
            raise ValueError(f"{name} of {kept} bytes kept out of {total}")
