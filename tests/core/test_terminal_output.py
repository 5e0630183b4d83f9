"""Sandbox text never reaches the runner's terminal raw.

A failing step's stderr, step titles and hook error messages are printed in
the human progress lines of ``runner run`` on stderr.  Printed raw, a hostile
sandbox could retitle the terminal (OSC), clear it, move the cursor, reorder
text with bidi overrides, or print a fake ``    [1] tests passed ok`` line.
These tests run the real CLI on the local sandbox and check that stderr holds
only visible escapes, one event per line, while ``--json`` still carries the
exact original text.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

from runner.core.progress import ProgressPrinter, terminal_safe

FAKE = "    [1] tests passed ok"

# What the hostile step writes on stderr, as the Python string the runner reads
# (the step's printf writes these bytes; the C1 CSI and U+202E as UTF-8).
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2J\r" + FAKE + "\n" + FAKE + "\nstill\ttabbed\x7f \x9b31m \u202eevil"
)
HOSTILE_PRINTF = (
    r"\033]0;pwned\007\033[2J\r" + FAKE + r"\n" + FAKE + r"\nstill\ttabbed\177 \302\233"
    r"31m \342\200\256evil\n"
)

STEP = f"printf '{HOSTILE_PRINTF}' >&2; exit 1"

# Raw bytes/characters that must never reach the terminal.
RAW_CONTROLS = ["\x1b", "\x07", "\r", "\x7f", "\x9b", "\u202e", "\t"]


def runner(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[bytes]:
    # Bytes, not text: the check is on what a terminal would receive.
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd), **(env or {})},
        timeout=120,
    )


def write_config(tmp_path: Path, hooks: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        "version: 1\n"
        "agent:\n"
        "  name: hostile\n"
        "  model: m\n"
        "  environment:\n"
        "    sandbox: local\n"
        "    hooks:\n" + textwrap.indent(textwrap.dedent(hooks), "      ")
    )
    return path


def assert_terminal_safe(stderr_bytes: bytes) -> str:
    """The checks every run's stderr must pass; returns it decoded."""
    for byte in (b"\x1b", b"\x07", b"\r", b"\x7f", b"\t", b"\xc2\x9b", b"\xe2\x80\xae"):
        assert byte not in stderr_bytes, f"raw {byte!r} reached the terminal"
    stderr = stderr_bytes.decode()
    for line in stderr.split("\n"):
        # The fake line is neither a line of its own nor the start of one.
        assert not line.startswith(FAKE.rstrip()), stderr
        assert line.strip() != FAKE.strip(), stderr
    return stderr


@pytest.fixture
def hostile_config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path,
        f"""\
        - name: seed
          on_create:
            - run: {json.dumps(STEP)}
        """,
    )


def test_a_failing_steps_stderr_is_escaped_in_progress_and_messages(hostile_config) -> None:
    result = runner("run", str(hostile_config), cwd=hostile_config.parent)
    assert result.returncode == 1, result.stderr
    stderr = assert_terminal_safe(result.stderr)
    # Shown, not dropped: every control as a visible escape, on one line.
    shown = r"\x1b]0;pwned\x07\x1b[2J\r" + FAKE + r"\n" + FAKE + r"\nstill\ttabbed\x7f \x9b31m "
    shown += r"\u202eevil"
    failed = [line for line in stderr.splitlines() if "seed.on_create FAILED" in line]
    assert len(failed) == 1 and failed[0].endswith(shown), stderr
    final = [line for line in stderr.splitlines() if line.startswith("runner: hook seed.")]
    assert len(final) == 1 and final[0].endswith(shown), stderr
    # The step's title: the printf command itself (its first 80 characters).
    assert f"    [1] {STEP[:80]} FAILED (" in stderr


def test_json_events_keep_the_exact_original_text(hostile_config) -> None:
    result = runner("run", str(hostile_config), "--json", cwd=hostile_config.parent)
    assert result.returncode == 1, result.stderr
    assert_terminal_safe(result.stderr)
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    failed = next(e for e in events if e["event"] == "step_failed")
    # The runner drops the output's final newline, nothing else.
    assert failed["error"] == "command exited 1: " + HOSTILE
    hook_failed = next(e for e in events if e["event"] == "hook_failed")
    assert hook_failed["error"].endswith(HOSTILE)
    # JSON escapes the controls itself: stdout holds no raw control byte either.
    assert b"\x1b" not in result.stdout and b"\r" not in result.stdout


def test_a_python_hooks_error_message_and_an_input_in_a_title_are_escaped(tmp_path) -> None:
    (tmp_path / "bad_hooks.py").write_text(
        textwrap.dedent(
            f"""\
            import runner as agents

            class Explode(agents.SandboxHook):
                async def on_create(self, ctx):
                    raise RuntimeError({HOSTILE!r})
            """
        )
    )
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            inputs:
              t.task:
                as: task
                schema:
                  type: object
                  properties: {title: {type: string}}
                  required: [title]
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: titled
                    on_create:
                      - run: echo {{ task.title }} > TITLE
                  - python: bad_hooks:Explode
                    name: explode
            """
        )
    )
    # A title is the first line of the step, so a newline cuts it; the rest is escaped.
    title = "x\x1b]0;t\x07\u202e\x9by\n" + FAKE
    result = runner("run", str(config), "--input", f"t.task.title={title}", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    stderr = assert_terminal_safe(result.stderr)
    assert r"    [1] echo 'x\x1b]0;t\x07\u202e\x9by" in stderr
    assert r"explode.on_create FAILED" in stderr
    assert r"RuntimeError: \x1b]0;pwned\x07\x1b[2J\r" + FAKE + r"\n" + FAKE in stderr


def test_parallel_progress_and_summary_are_escaped(tmp_path) -> None:
    # A short step name, so the stderr starts within the summary's 100 characters.
    config = write_config(
        tmp_path,
        f"""\
        - name: seed
          on_create:
            - {{name: s, run: {json.dumps(STEP)}}}
        """,
    )
    sets = tmp_path / "sets.yaml"
    sets.write_text("- {}\n- {}\n")
    result = runner("run", str(config), "--input-sets", str(sets), "--parallel", "2", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    stderr = assert_terminal_safe(result.stderr)
    for index in (1, 2):
        assert f"[{index}]   seed.on_create FAILED" in stderr
    rows = [line.split(maxsplit=4) for line in stderr.splitlines() if line.strip()[:1].isdigit()]
    assert [row[:3] for row in rows] == [["1", "failed", "1"], ["2", "failed", "1"]], stderr
    for row in rows:
        assert r"command exited 1: \x1b]0;pwned\x07\x1b[2J\r" in row[4], stderr


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x00\x01\x08\x0b\x0c\x1b\x1f", r"\x00\x01\x08\x0b\x0c\x1b\x1f"),
        ("a\nb\rc\td", r"a\nb\rc\td"),
        ("\x7f\x80\x85\x9b\x9f", r"\x7f\x80\x85\x9b\x9f"),
        ("\u202a\u202b\u202c\u202d\u202e", r"\u202a\u202b\u202c\u202d\u202e"),
        (
            "\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
            r"\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
        ),
        ("\u2028\u2029\udcff", r"\u2028\u2029\udcff"),
        # Printable text is left alone: accents, CJK, emoji with a joiner, backslashes.
        ("ünï 漢字 👩\u200d💻 printf '%s\\n' \xa0", "ünï 漢字 👩\u200d💻 printf '%s\\n' \xa0"),
    ],
)
def test_terminal_safe(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


def test_the_printer_escapes_every_field_and_the_prefix() -> None:
    class Stream:
        text = ""

        def write(self, text: str) -> None:
            self.text += text

        def flush(self) -> None:
            pass

    stream = Stream()
    printer = ProgressPrinter(stream, prefix="[1]\x1b ")  # type: ignore[arg-type]
    printer({"event": "session_starting", "session_id": "s\n", "agent": "a\x1b"})
    printer({"event": "hook_started", "hook": "h\u202e", "point": "on_create"})
    printer({"event": "session_closing", "reason": "r\r" + FAKE})
    assert stream.text.splitlines() == [
        r"[1]\x1b runner: session s\n (agent a\x1b)",
        r"[1]\x1b   h\u202e.on_create",
        r"[1]\x1b   closing (r\r" + FAKE + ")",
    ]
    for char in RAW_CONTROLS:
        assert char not in stream.text


# --- the agent's final answer (issue 26, finding 4) ----------------------------

#: What a model quoting the sandbox may answer: an OSC 52 clipboard write (the
#: base64 of "rm -rf ~"), an OSC 0 title change, a screen clear, a lone CR that
#: would print over a line, a C1 CSI and a bidi override, over two lines.
ANSWER = (
    "Done.\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07\x1b[2J\rfake\nsecond\tline \x9b31m \u202eevil"
)
#: How a terminal shows it: every control escaped, the newline and tab kept.
ANSWER_SHOWN = (
    r"Done.\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07\x1b[2J\rfake" + "\n"
    "second\tline " + r"\x9b31m \u202eevil"
)


def answer_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\n"
        "agent:\n"
        "  name: quoting\n"
        "  model: local-model\n"
        f"  base_url: {base_url}\n"
        "  environment:\n"
        "    sandbox: local\n"
    )
    return path


def run_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    """``runner ARGS`` with its stdout on a pseudo-terminal (so ``isatty`` is
    true, as in an interactive shell): (exit code, what the terminal got, stderr)."""
    import pty
    import select

    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            [*RUNNER_CLI, *args],
            stdout=slave,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, "TMPDIR": str(cwd)},
        )
        os.close(slave)
        slave = -1
        received = bytearray()
        while True:  # the terminal's side, until the runner closes it
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                process.kill()
                raise AssertionError("the runner wrote nothing to the terminal for 120 s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            received += chunk
        stderr = process.stderr.read() if process.stderr else b""
        code = process.wait(timeout=120)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    # The terminal turns each newline into CR LF (onlcr): undo that only.
    return code, bytes(received).replace(b"\r\n", b"\n"), stderr


def assert_no_raw_control(shown: bytes) -> None:
    for byte in (b"\x1b", b"\x07", b"\r", b"\xc2\x9b", b"\xe2\x80\xae"):
        assert byte not in shown, f"raw {byte!r} reached the terminal: {shown!r}"


def test_the_final_answer_reaches_a_terminal_escaped(tmp_path) -> None:
    """Before: the answer was printed raw, and the OSC 52 and OSC 0 sequences
    reached the terminal (a clipboard write and a title change)."""
    from chat_server import ChatServer, assistant

    with ChatServer([assistant(ANSWER)]) as server:
        config = answer_config(tmp_path, server.url)
        code, shown, stderr = run_on_a_terminal(["run", str(config), "--prompt", "go"], tmp_path)
    assert code == 0, stderr
    assert_no_raw_control(shown)
    assert shown.decode() == ANSWER_SHOWN + "\n"


def test_the_final_answer_goes_raw_to_a_file_and_exact_in_json(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    with ChatServer([assistant(ANSWER), assistant(ANSWER)]) as server:
        config = answer_config(tmp_path, server.url)
        plain = runner("run", str(config), "--prompt", "go", cwd=tmp_path)
        as_json = runner("run", str(config), "--prompt", "go", "--json", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    # Byte for byte, CSI sequences included (click.echo stripped those).
    assert plain.stdout == ANSWER.encode() + b"\n"
    assert as_json.returncode == 0, as_json.stderr
    events = [json.loads(line) for line in as_json.stdout.decode().splitlines()]
    assert next(e for e in events if e["event"] == "turn")["text"] == ANSWER
    assert b"\x1b" not in as_json.stdout  # JSON escapes it


def test_parallel_answers_reach_a_terminal_escaped(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    sets = tmp_path / "sets.yaml"
    sets.write_text("- {}\n- {}\n")
    with ChatServer([assistant(ANSWER), assistant(ANSWER)]) as server:
        config = answer_config(tmp_path, server.url)
        args = ["run", str(config), "--prompt", "go", "--input-sets", str(sets), "--parallel", "2"]
        code, shown, stderr = run_on_a_terminal(args, tmp_path)
    assert code == 0, stderr
    assert_no_raw_control(shown)
    assert_terminal_safe(stderr)
    assert shown.decode() == f"[1] {ANSWER_SHOWN}\n[2] {ANSWER_SHOWN}\n"


def test_keep_lines_escapes_the_same_controls_but_newline_and_tab() -> None:
    controls = "".join(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)])
    controls += "\u061c\u200e\u200f\u2028\u2029\u202a\u202e\u2066\u2069\udcff"
    for char in controls:
        if char in "\n\t":
            assert terminal_safe(char, keep_lines=True) == char
        else:
            assert terminal_safe(char, keep_lines=True) == terminal_safe(char), repr(char)
