"""The attacker's test of the live progress: a step that prints its secret in
pieces and in the encoded forms the redactor knows shows none of them.

Output lines reach the progress while the step runs (``core.output``), so a
secret printed in two writes, a pause between them, arrives in two chunks;
neither piece matches a secret.  The progress must show it only as a whole
line, scrubbed like the events.  Checked through the real CLI: under ``-v``
in a log and on a pseudo-terminal (a log without ``-v`` shows no output
content at all).
"""

from __future__ import annotations

import base64
import os
import subprocess
import textwrap
from pathlib import Path
from urllib.parse import quote

from conftest import RUNNER_CLI
from terminal import run_on_a_terminal

SECRET = "hunter2-Secret Value/93+x"
HALVES = (SECRET[:10], SECRET[10:])

#: What the step prints: the secret in two writes, the second only once the
#: runner has read the first from the pipe (FIONREAD says the pipe is
#: empty: no guess at timing), so the halves reach it as two chunks; then
#: base64, hex, URL-encoded and printf %q forms, each on a line of its own,
#: and a marker that must show.
WAIT_UNTIL_READ = (
    "import fcntl, struct, termios, time\n"
    "while struct.unpack('i', fcntl.ioctl(1, termios.FIONREAD, bytes(4)))[0]:\n"
    "    time.sleep(0.01)"
)
STEP = textwrap.dedent(
    """\
    printf 'first: %s' "${S:0:10}"
    python3 -c "WAIT"
    printf '%s :last\\n' "${S:10}"
    printf '%s' "$S" | base64 -w0; echo
    printf '%s' "$S" | od -An -tx1 | tr -d ' \\n'; echo
    python3 -c 'import os, urllib.parse; print(urllib.parse.quote(os.environ["S"], safe=""))'
    printf '%q\\n' "$S"
    echo visible-marker
    """
)


def forms() -> dict[str, str]:
    raw = SECRET.encode()
    return {
        "raw": SECRET,
        "first half": HALVES[0],
        "second half": HALVES[1],
        "base64": base64.b64encode(raw).decode(),
        "hex": raw.hex(),
        "url": quote(SECRET, safe=""),
        "printf %q": SECRET.replace(" ", "\\ "),
    }


def config(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            secrets:
              token: {from_env: TEST_TOKEN}
            agent:
              model: local-model
              environment:
                sandbox: local
                hooks:
                  - name: leaky
                    on_create:
                      - name: prints its secret
                        secrets: {S: token}
                        run: |
            """
        )
        + textwrap.indent(STEP.replace("WAIT", WAIT_UNTIL_READ), " " * 26)
    )
    return path


def assert_no_form(shown: str) -> None:
    for name, form in forms().items():
        assert form not in shown, f"the {name} of the secret reached the progress: {shown}"
    assert "visible-marker" in shown, shown
    # the whole line, scrubbed
    assert "first: *** :last" in shown, shown


def test_a_log_shows_no_form_of_a_secret_printed_in_pieces(tmp_path: Path) -> None:
    path = config(tmp_path)
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", "-v", str(path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path), "TEST_TOKEN": SECRET},
    )
    out, err = process.communicate(timeout=120)
    shown = (err + out).decode()
    assert process.returncode == 0, shown
    assert_no_form(shown)


def test_a_terminal_shows_no_form_of_a_secret_printed_in_pieces(tmp_path: Path) -> None:
    path = config(tmp_path)
    code, shown = run_on_a_terminal(
        ["run", "-v", str(path)],
        tmp_path,
        env={"TEST_TOKEN": SECRET},
    )
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert_no_form(text)
