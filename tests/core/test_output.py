"""Command output cut into whole lines for the live progress (core.output).

In-process, with the real splitter and the real scrubbing of the event bus:
the CLI tests (test_progress_live.py, test_progress_secrets.py) show the
same through a real step.
"""

from __future__ import annotations

import contextvars

from runner.core.events import add_secrets
from runner.core.output import MAX_LINE_BYTES, listen_output, output_lines
from runner.core.redaction import secret_text_forms


def lines_of(
    chunks: list[tuple[str, bytes]], secrets: tuple[str, ...] = (), *, every_line: bool = True
) -> list[tuple[str, str]]:
    """What a listener gets for these chunks, in a context of its own."""
    got: list[tuple[str, str]] = []

    def run() -> None:
        for secret in secrets:
            add_secrets(secret_text_forms(secret))
        with listen_output(lambda stream, line: got.append((stream, line)), every_line=every_line):
            splitter = output_lines()
            assert splitter is not None
            for stream, chunk in chunks:
                splitter.feed(stream, chunk)
            splitter.close()

    contextvars.copy_context().run(run)
    return got


def test_nobody_listening_means_no_splitter() -> None:
    assert contextvars.copy_context().run(output_lines) is None


def test_a_line_in_pieces_is_reported_once_whole() -> None:
    assert lines_of([("stdout", b"compil"), ("stdout", b"ing\nlin"), ("stdout", b"king\n")]) == [
        ("stdout", "compiling"),
        ("stdout", "linking"),
    ]


def test_streams_are_cut_apart() -> None:
    chunks = [("stdout", b"out "), ("stderr", b"err\n"), ("stdout", b"line\n")]
    assert lines_of(chunks) == [("stderr", "err"), ("stdout", "out line")]


def test_the_last_line_without_a_newline_comes_when_the_command_ends() -> None:
    assert lines_of([("stdout", b"a\r\nlast")]) == [("stdout", "a"), ("stdout", "last")]


def test_a_secret_in_pieces_is_scrubbed_from_its_whole_line() -> None:
    secret = "hunter2-Secret Value"
    chunks = [("stdout", b"token=hunter2-Se"), ("stdout", b"cret Value ok\n")]
    assert lines_of(chunks, (secret,)) == [("stdout", "token=*** ok")]


def test_a_secret_that_is_not_utf8_is_scrubbed_before_decoding() -> None:
    secret = b"s\xffcret-bytes".decode("utf-8", "surrogateescape")
    got = lines_of([("stdout", b"key s\xff"), ("stdout", b"cret-bytes\n")], (secret,))
    assert got == [("stdout", "key ***")]


def test_an_overlong_line_is_dropped_whole_never_cut() -> None:
    """Cut at the limit, a secret across the cut would match nothing."""
    long = b"x" * (MAX_LINE_BYTES + 10)
    chunks = [("stdout", b"before\n")]
    chunks += [("stdout", long[i : i + 4096]) for i in range(0, len(long), 4096)]
    chunks += [("stdout", b"tail of it\nafter\n")]
    assert lines_of(chunks) == [("stdout", "before"), ("stdout", "after")]


def test_an_overlong_last_line_is_dropped_at_the_end_too() -> None:
    long = b"y" * (MAX_LINE_BYTES + 1)
    assert lines_of([("stdout", b"a\n"), ("stdout", long)]) == [("stdout", "a")]


def test_a_last_line_display_gets_the_last_line_of_each_read() -> None:
    """The live line shows only the newest line: the others of the same read
    are neither scrubbed nor passed on."""
    chunks = [("stdout", b"one\ntwo\nthr"), ("stdout", b"ee\nfour")]
    assert lines_of(chunks, every_line=False) == [
        ("stdout", "two"),
        ("stdout", "three"),
        ("stdout", "four"),
    ]
