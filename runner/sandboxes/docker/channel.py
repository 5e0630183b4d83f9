"""The host side of a sandbox's persistent exec channel.

One ``docker exec`` runs ``helpers/exec_helper.py`` for the whole life of the
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

Two helpers speak the same answers.  ``helpers/exec_helper.py`` needs a python3,
even ``python3-minimal`` (it carries a JSON codec for a Python without
``json``); ``helpers/exec_helper.sh`` needs only a POSIX shell and coreutils or
busybox (dash, ash), for images with busybox, Alpine, or no Python at all.
One exec starts whichever fits (``CHOOSER``): the Python helper where it
can run (it is the faster), else the shell one; the helper's first line
says which (``kind``).  Requests to the shell helper
are text a shell can read with builtins (``shell_request``), and as a shell
cannot time a command and wait for it at once, the runner sends it ``kill``
when a request's deadline passes.

This module keeps the requests in flight and matches answers to them; the
attached socket (Docker's stream frames, deadline-bound writes) is
``stream``'s, a request's record ``inflight``'s, and the frames' encoding
and checks ``protocol``'s.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from .inflight import Incoming, Pending
from .protocol import (
    ANSWER_FIELDS,
    check_answer,
    check_output,
    python_request,
    shell_request,
    shell_strings,
    take_head,
)
from .stream import AttachedStream

logger = logging.getLogger("runner")


@functools.cache
def helper_source(name: str = "exec_helper.py") -> str:
    """A helper's code, read once, when the first channel starts."""
    return resources.files("runner.sandboxes").joinpath("helpers", name).read_text("utf-8")


#: Starts a helper: ``sh -c CHOOSER sh KIND PYTHON_SOURCE SHELL_SOURCE``.
#: The Python helper exits with 3 when the standard library lacks a module
#: it cannot do without (python3-minimal has all of them); 126 and 127 mean
#: no python3 at all.  Its argument says whether ``LC_CTYPE`` was set before
#: python3 started: where it was not, Python sets it (PEP 538), and the
#: helper takes it out again so that commands get the container's own
#: environment (as ``docker exec`` gives it; a bash with ``LC_CTYPE`` set
#: also starts 0.3 ms slower, loading the locale).
CHOOSER = """\
if [ "$1" != shell ]; then
    python3 -u -c "$2" "${LC_CTYPE+set}"
    code=$?
    if [ "$1" = python ]; then exit "$code"; fi
    case $code in 3 | 126 | 127) ;; *) exit "$code" ;; esac
fi
echo shell
exec sh -c "$3"
"""
#: Which helper ``ExecChannel`` may start.
HELPERS = ("auto", "python", "shell")


START_TIMEOUT_SECONDS = 15.0
#: Beyond a command's own timeout, how long to wait for its answer before
#: declaring the helper lost.
ANSWER_GRACE_SECONDS = 15.0


class ChannelError(Exception):
    """The helper is unavailable or stopped answering; use per-command exec."""


class ExecChannel:
    """A started helper process and the stream to it.  Thread-safe."""

    def __init__(
        self,
        api: Any,
        container_id: str,
        *,
        max_body_bytes: int = 64 << 20,
        helper: str = "auto",
    ) -> None:
        if helper not in HELPERS:
            raise ValueError(f"helper must be one of {HELPERS}, got {helper!r}")
        self.api = api
        self.helper = helper
        #: "python" or "shell": the helper that answered (None before start).
        self.kind: str | None = None
        self._announced = threading.Event()
        #: Starts every request line to the shell helper: bytes of a body read
        #: short could never pass for a request.
        self._token = secrets.token_hex(16).encode()
        #: The largest answer body accepted; a bigger one (a command writing
        #: forged frames into the helper's stdout) ends the channel.
        self.max_body_bytes = max_body_bytes
        self.container_id = container_id
        self._pending: dict[int, Pending] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._dead: str | None = None
        self._stream: AttachedStream | None = None
        self._reader: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self._dead is None

    def start(self) -> None:
        """Start the helper and wait for its first answer (blocking)."""
        argv = [
            "sh",
            "-c",
            CHOOSER,
            "sh",
            self.helper,
            helper_source("exec_helper.py"),
            helper_source("exec_helper.sh"),
        ]
        exec_id = self.api.exec_create(
            self.container_id,
            argv,
            stdin=True,
            stdout=True,
            stderr=True,
            user="0:0",  # out of the sandbox user's reach: it cannot signal or trace root
        )["Id"]
        self._stream = AttachedStream(self.api.exec_start(exec_id, socket=True))
        self._reader = threading.Thread(
            target=self._read_loop, name=f"exec-channel-{self.container_id[:12]}", daemon=True
        )
        self._reader.start()
        if not self._announced.wait(START_TIMEOUT_SECONDS) or self.kind is None:
            self._fail(f"no helper announced itself within {START_TIMEOUT_SECONDS:g}s")
            raise ChannelError(self._dead or "the helper stopped")
        if self.kind == "shell":  # each request line starts with it (see the helper)
            try:
                with self._write_lock:
                    self._send(self._token + b"\n", time.monotonic() + START_TIMEOUT_SECONDS)
            except (OSError, TimeoutError) as exc:
                self._fail(f"writing to the helper failed: {exc}")
                raise ChannelError(self._dead or "the helper stopped") from exc
        header, _ = self.request({"op": "ping"}, timeout=START_TIMEOUT_SECONDS)
        if "error" in header:
            raise ChannelError(f"the helper failed to start: {header['message'][:500]}")
        self.found: dict[str, bool] = header["found"]
        #: Whether it can run commands as another user (the shell helper
        #: needs setpriv or nsenter in the image; the Python one, nothing).
        self.can_drop: bool = header["can_drop"]
        #: Whether the helper made itself non-dumpable, out of the commands'
        #: reach (see ``seal`` in the helper).
        self.sealed: bool = header["sealed"]

    def request(
        self,
        header: dict[str, Any],
        body: bytes | memoryview = b"",
        *,
        timeout: float,
        kill_after: float | None = None,
        sink: Callable[[bytes], object] | None = None,
        on_header: Callable[[dict[str, Any]], object] | None = None,
        on_output: Callable[[str, bytes, bool], object] | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait (blocking) for its answer.

        ``kill_after``: when to tell the shell helper to stop the request
        (default: ``ANSWER_GRACE_SECONDS`` before ``timeout``); the Python
        helper keeps commands' timeouts itself.  ``sink``: a read's body is
        passed to it piece by piece as it arrives (in the reader thread), not
        kept, so a file never sits whole in memory on its way; the answer's
        body is then empty.  ``on_header``: called with the answer's checked
        header before its body arrives.  What either raises is raised here.
        ``on_output``: an exec's output chunks as they come, ``(stream,
        chunk, gap)``, for a request that asks (``"stream": true``); called
        in the reader thread, before the answer is returned.
        """
        if header["op"] not in ANSWER_FIELDS:
            raise ValueError(f"unknown op {header['op']!r}")
        strings = b""
        if self.kind == "shell":  # encoded before anything is registered or sent
            strings, refused = shell_strings(header)
            if refused is not None:  # what the Python helper answers: Popen refuses it
                return refused, b""
        started = time.monotonic()
        deadline = started + timeout
        pending = Pending(header, sink=sink, on_header=on_header, on_output=on_output)
        request_id = self._register(pending)
        frame = self._frame(header, request_id, len(body), strings)
        try:
            with self._write_lock:
                self._send(frame, deadline)
                if body:
                    self._send(body, deadline)
        except (OSError, TimeoutError) as exc:
            self._fail(f"writing to the helper failed: {exc}")
        if self.kind == "shell" and header["op"] != "ping":
            if kill_after is None:
                kill_after = timeout - ANSWER_GRACE_SECONDS
            if not pending.done.wait(max(0.0, started + kill_after - time.monotonic())):
                try:
                    with self._write_lock:
                        line = f" kill {request_id} - 0 0 0\n".encode()
                        self._send(self._token + line, deadline)
                except (OSError, TimeoutError) as exc:
                    self._fail(f"writing to the helper failed: {exc}")
        if not pending.done.wait(max(0.0, deadline - time.monotonic())):
            self._fail(f"the helper did not answer within {timeout:g}s")
        return self._answer(request_id, pending)

    async def request_async(
        self,
        header: dict[str, Any],
        *,
        timeout: float,
        on_output: Callable[[str, bytes, bool], object] | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """``request`` for a bodiless request to the Python helper (``exec``),
        awaited on the event loop: sent from the loop (a non-blocking send of
        a few hundred bytes) and woken by the reader thread, with no worker
        thread between them: two thread wake-ups fewer per command than
        ``request`` in a worker thread.  The send falls back to a worker
        thread when another request holds the stream or it is full.  Needs
        the asyncio event loop (anyio's default backend)."""
        import asyncio

        import anyio

        if header["op"] not in ANSWER_FIELDS:
            raise ValueError(f"unknown op {header['op']!r}")
        if self.kind != "python":
            raise ValueError("request_async is for the Python helper")
        loop = asyncio.get_running_loop()
        woken = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        deadline = time.monotonic() + timeout
        pending = Pending(
            header, on_done=lambda: loop.call_soon_threadsafe(wake), on_output=on_output
        )
        request_id = self._register(pending)
        frame = memoryview(self._frame(header, request_id, 0, b""))
        try:
            if self._write_lock.acquire(blocking=False):
                sent = False
                try:
                    assert self._stream is not None
                    frame = frame[self._stream.send_nowait(frame) :]
                    sent = not frame
                except BlockingIOError:
                    pass
                except OSError as exc:  # the channel ends: the wait below sees it
                    self._fail(f"writing to the helper failed: {exc}")
                    sent = True
                if sent:
                    self._write_lock.release()
                else:  # the stream is full: the rest from a worker thread
                    await anyio.to_thread.run_sync(self._send_and_unlock, frame, deadline)
            else:  # another request is writing (a large file): wait for it elsewhere
                await anyio.to_thread.run_sync(self._send_locked, frame, deadline)
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await woken
        except BaseException:
            with self._lock:  # cancelled: its answer, when it comes, is dropped
                pending.abandoned = True
                if pending.done.is_set():
                    self._pending.pop(request_id, None)
            raise
        if not pending.done.is_set():
            self._fail(f"the helper did not answer within {timeout:g}s")
        return self._answer(request_id, pending)

    def _send_locked(self, data: bytes | memoryview, deadline: float) -> None:
        self._write_lock.acquire()
        self._send_and_unlock(data, deadline)

    def _send_and_unlock(self, data: bytes | memoryview, deadline: float) -> None:
        """Send ``data`` (the write lock held, by this thread or the loop's) and
        release the lock; a failed write ends the channel."""
        try:
            self._send(data, deadline)
        except (OSError, TimeoutError) as exc:
            self._fail(f"writing to the helper failed: {exc}")
        finally:
            self._write_lock.release()

    def _register(self, pending: Pending) -> int:
        """Give ``pending`` a fresh random id and wait for its answer under it."""
        with self._lock:  # checked and registered together: _fail sees it or we see _dead
            if self._dead is not None:
                raise ChannelError(self._dead)
            # Random, not sequential: a command that reaches the helper's
            # stream cannot guess the id of a request in flight.
            request_id = secrets.randbits(64)
            while request_id in self._pending:
                request_id = secrets.randbits(64)
            self._pending[request_id] = pending
        return request_id

    def _frame(
        self, header: dict[str, Any], request_id: int, body_size: int, strings: bytes
    ) -> bytes:
        if self.kind == "shell":
            return self._token + b" " + shell_request(header, request_id, body_size, strings)
        return python_request(header, request_id, body_size)

    def _answer(self, request_id: int, pending: Pending) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            self._pending.pop(request_id, None)
        if pending.header is None:
            raise ChannelError(self._dead or "the helper stopped")
        if pending.sink_error is not None:
            raise pending.sink_error
        return pending.header, pending.body

    def _send(self, data: bytes | memoryview, deadline: float) -> None:
        assert self._stream is not None
        self._stream.send(data, deadline)

    def close(self) -> None:
        self._fail("closed")
        if self._stream is not None:
            self._stream.close()

    # --- reading ---------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        with self._lock:
            if self._dead is None:
                stderr = self._stream.stderr if self._stream is not None else b""
                detail = stderr.decode("utf-8", "replace").strip()[-500:]
                self._dead = reason + (f" (helper stderr: {detail})" if detail else "")
            pending = list(self._pending.values())
        self._announced.set()
        for item in pending:
            item.finish()

    def _read_loop(self) -> None:
        """Demultiplex Docker's stream frames, then parse the helper's frames
        (after its first line, which names it)."""
        buffer = bytearray()
        try:
            stream = self._stream
            assert stream is not None
            while self.kind is None:
                buffer += stream.stdout()
                if b"\n" in buffer:
                    line, _, rest = bytes(buffer).partition(b"\n")
                    if line not in (b"python", b"shell"):
                        raise ValueError(f"the helper announced itself as {line[:40]!r}")
                    if self.helper != "auto" and line.decode() != self.helper:
                        raise ValueError(f"a {line.decode()} helper answered, not {self.helper}")
                    buffer[:] = rest
                    self.kind = line.decode()
                    self._announced.set()
                elif len(buffer) > 16:
                    raise ValueError("the helper did not announce itself")
            incoming: Incoming | None = None
            while True:
                if not buffer:  # the frame's own buffer: no copy
                    buffer = stream.stdout()
                if incoming is None:
                    head = take_head(buffer, max_body=self.max_body_bytes)
                    if head is None:
                        buffer += stream.stdout()
                        continue
                    incoming = self._receive(*head)
                if incoming.left:
                    remainder = incoming.take(memoryview(buffer))
                    buffer = bytearray(remainder)
                if not incoming.left:
                    self._deliver(incoming)
                    incoming = None
        except (OSError, EOFError) as exc:
            self._fail(f"the helper's stream ended ({type(exc).__name__})")
        except ValueError as exc:
            # Its text may quote the forger: keep it short in logs and results.
            self._fail(f"a forged or malformed answer ended the channel: {str(exc)[:300]}")
        except Exception as exc:  # never a dead reader and requests left waiting
            self._fail(f"reading the helper's answers failed: {type(exc).__name__}: {exc}")

    def _receive(self, header: Any, body_size: int) -> Incoming:
        """Check an answer's header, before its body is read; raise ValueError
        if it answers no request in flight (forged: honest ids are random and
        answered once) or is not what the helper sends."""
        request_id = header.get("id") if isinstance(header, dict) else None
        if type(request_id) is not int:
            raise ValueError("an answer without a request id")
        with self._lock:
            pending = self._pending.get(request_id)
            if pending is None or pending.receiving:
                raise ValueError(f"an answer to no request in flight (id {request_id})")
            if "output" in header:  # a chunk of its output, before the answer
                check_output(pending.request, header, body_size)
                return Incoming(pending, header, body_size, output=True)
            check_answer(pending.request, header, body_size)
            pending.receiving = True
        if pending.on_header is not None and "error" not in header:
            try:
                pending.on_header(header)
            except Exception as exc:  # the caller's to raise, as a sink's
                pending.sink_error = exc
        return Incoming(pending, header, body_size)

    def _deliver(self, incoming: Incoming) -> None:
        """Hand a whole answer to the request waiting for it (or an output
        chunk to its ``on_output``)."""
        pending = incoming.pending
        if incoming.output:
            if pending.on_output is not None:
                header = incoming.header
                try:
                    pending.on_output(header["output"], bytes(incoming.body), header["gap"])
                except Exception:  # a display's failure must not end the channel
                    logger.exception("the output listener of a command failed")
            return
        with self._lock:
            pending.header, pending.body = incoming.header, bytes(incoming.body)
            if pending.abandoned:  # nobody waits for it any more
                self._pending.pop(incoming.header["id"], None)
        pending.finish()
