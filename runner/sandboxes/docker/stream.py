"""The attached socket of one ``docker exec``: Docker's stream frames undone
on the way in, every write bounded by a deadline on the way out.

Docker multiplexes an attached exec's stdout and stderr over one socket,
each payload behind an 8-byte header (stream type, size).  The exec channel
wants the helper's stdout only; its stderr is kept aside (the last few KiB)
to explain a helper that died.  A write waits for room with ``select`` and
never past its deadline: a helper that stops reading cannot block the
runner (or, through the channel's write lock, every later request).

This module knows nothing of the helper's own frames: ``channel`` reads
them from ``stdout()`` and sends its requests through ``send``.  Split from
``channel`` (issue 27).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from typing import Any

#: Docker's stream type of the attached process's stderr.
STDERR = 2
#: How much of the helper's stderr is kept to explain its end.
STDERR_KEPT_BYTES = 4000
#: The most one ``send`` or ``recv`` call moves.
PIECE_BYTES = 1 << 20


class AttachedStream:
    """The socket ``exec_start(socket=True)`` returned.  Reads come from one
    thread (the channel's reader); writes are serialised by the caller."""

    def __init__(self, stream: Any) -> None:
        #: Closed with the socket: it holds a reference to it.
        self._stream = stream
        self.socket: socket.socket = getattr(stream, "_sock", stream)
        #: The tail of what the helper wrote to its stderr.
        self.stderr = bytearray()

    def stdout(self) -> bytearray:
        """The next payload of the helper's stdout (its stderr is kept aside).
        Raises ``EOFError`` or ``OSError`` when the stream ends."""
        while True:
            stream_type, payload = self._docker_frame()
            if stream_type != STDERR:
                return payload
            self.stderr += payload
            del self.stderr[:-STDERR_KEPT_BYTES]

    def send(self, data: bytes | memoryview, deadline: float) -> None:
        """Send all of ``data`` before ``deadline`` (``time.monotonic()``);
        raise ``TimeoutError`` if the helper stops reading."""
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the helper stopped reading")
            _, writable, _ = select.select([], [self.socket], [], left)
            if writable:
                sent = self.socket.send(view[:PIECE_BYTES], socket.MSG_DONTWAIT)
                view = view[sent:]

    def send_nowait(self, data: bytes | memoryview) -> int:
        """Send what fits now; how many bytes went (``BlockingIOError``: none)."""
        return self.socket.send(data, socket.MSG_DONTWAIT)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        if self._stream is not self.socket:
            with contextlib.suppress(OSError):
                self._stream.close()

    def _docker_frame(self) -> tuple[int, bytearray]:
        header = self._recv_exact(8)
        stream_type = header[0]
        size = struct.unpack(">I", header[4:])[0]
        return stream_type, self._recv_exact(size)

    def _recv_exact(self, size: int) -> bytearray:
        """``size`` bytes of the stream, received straight into one buffer
        (a file's piece arrives in frames of ~32 KiB: no chunks joined)."""
        received = bytearray(size)
        view = memoryview(received)
        got = 0
        while got < size:
            count = self.socket.recv_into(view[got:], min(size - got, PIECE_BYTES))
            if not count:
                raise EOFError
            got += count
        return received
