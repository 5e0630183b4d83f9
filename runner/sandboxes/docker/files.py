"""Files in and out of a Docker sandbox, with the sandbox user's rights.

Over the exec channel where there is one (pieces of ``FILE_CHUNK_BYTES``, a
read gathered into one buffer sized from the first piece's header), else
one ``docker exec`` of ``cat`` per file move, under ``timeout``, spooled
through a host temporary file.  Every move has a deadline per piece and a
whole-file one; a read stops at its limit while it reads.  A mixin of
``DockerSandbox``, split from ``container`` (issue 27).
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ..base import MAX_FILE_BYTES, READ_LIMIT, FileTooLargeError, SparseWriter, write_sparse
from .channel import ChannelError, ExecChannel
from .engine import DockerClient
from .exec import (
    CREATE_SCRIPT,
    FILE_DEADLINE_SECONDS,
    READ_SCRIPT,
    WRITE_SCRIPT,
    drain,
    exec_file,
    file_error,
)

if TYPE_CHECKING:
    from pathlib import Path

    import docker

T = TypeVar("T")

#: How much of a file one piece over the channel carries.
FILE_CHUNK_BYTES = 16 << 20


class _NoChannel:
    """What ``_on_channel`` returns when the sandbox has no channel."""


NO_CHANNEL = _NoChannel()


class FileMoves:
    """``read_file``, ``save_file`` and ``write_file`` (see the module's docstring)."""

    # Set by DockerSandbox.__init__.
    client: DockerClient
    max_file_bytes: int
    file_piece_seconds: float

    if TYPE_CHECKING:

        @property
        def container_id(self) -> str: ...

        def _ids(self, *, root: bool = False) -> list[int] | None: ...

        def _path(self, path: str) -> str: ...

        async def _as_user(
            self, argv: list[str], *, root: bool = False
        ) -> tuple[list[str], str]: ...

        async def _on_channel(
            self,
            work: Callable[[ExecChannel], T],
            awaitable: Callable[[ExecChannel], Awaitable[T]] | None = None,
        ) -> T | _NoChannel: ...

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
