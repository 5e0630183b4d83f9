"""Secrets in every form the runner produces (issue 25, item 8).

A reviewer found three ways a secret reached the output unmasked, each shown
here through the real CLI on the local sandbox, with real bash printing it:

- a secret ending in a newline (or CR LF) was scrubbed only with its newline,
  so `tr -d '\\n'`, `head -c` or base64 of the trimmed text showed it;
- a `secret: true` input passed through a filter (`{{ s.token | upper }}`) is
  a word the runner rendered itself, yet it was printed as it is;
- a secret that is not UTF-8 was decoded with U+FFFD from the command's
  output and matched none of its forms (and a secret file that is not UTF-8
  could not be used at all).

Each test asserts that no form of the secret reaches stdout, stderr, the
`--json` events, or any file the runner writes besides a `save:` the file
asked for.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI


def runner(*args: str, cwd: Path, env: dict) -> tuple[int, str]:
    """Exit code and everything printed (stdout + stderr), bytes kept as bytes
    would be shown (undecodable ones as surrogates, so nothing is hidden)."""
    result = subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd), "LC_ALL": "C.UTF-8", **env},
        timeout=120,
    )
    text = (result.stdout + result.stderr).decode("utf-8", "surrogateescape")
    return result.returncode, text


def outputs(tmp_path: Path, config: Path, env: dict, *extra: str) -> list[tuple[int, str]]:
    """`run` (with progress), `run --json` and `render`, each with ``extra``."""
    return [
        runner(*command, str(config), *extra, cwd=tmp_path, env=env)
        for command in (
            ["run", "--output-dir", "out"],
            ["run", "--json", "--output-dir", "out-json"],
            ["render"],
        )
    ]


def written_by_the_runner(tmp_path: Path, *, besides: set[str]) -> str:
    """Every file under ``tmp_path`` but the test's own and the saves it asked for."""
    found = []
    for path in sorted(tmp_path.rglob("*")):
        relative = str(path.relative_to(tmp_path))
        if path.is_file() and relative not in besides and not relative.startswith("keys/"):
            found.append(path.read_bytes().decode("utf-8", "surrogateescape"))
    return "\n".join(found)


def assert_nowhere(text: str, fragments: dict[str, str]) -> None:
    for how, fragment in fragments.items():
        assert fragment not in text, f"{how} leaked ({fragment!r}) in: {text[-3000:]!r}"


def assert_both_hooks_failed(results: list[tuple[int, str]], masked: str) -> None:
    """`run` and `run --json` exit 1, report the failing on_create and
    on_destroy, and show ``masked`` where the secret's forms were printed."""
    (code, progress), (json_code, stream) = results[:2]
    assert (code, json_code) == (1, 1), progress + stream
    assert "hook leaky.on_create failed" in progress and "keep.on_destroy" in progress, progress
    events = [json.loads(line) for line in stream.splitlines() if line.startswith("{")]
    failed = {(e["hook"], e["point"]) for e in events if e["event"] == "step_failed"}
    assert failed == {("leaky", "on_create"), ("keep", "on_destroy")}, stream
    for text in (progress, stream):
        assert masked in text, text


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(textwrap.dedent(body))
    return path


# --- (a) a secret with a trailing newline ------------------------------------

ENV_NL = "tok-Trail-Secret-42\n"
FILE_CRLF = "file-Crlf-Secret-77"  # the file holds it followed by CR LF

PRINT_TRIMMED = (
    "printf '%s|' \"$(printf %s \"$S\" | tr -d '\\r\\n')\" "  # trimmed by tr
    '"$(printf %s "$S" | head -c 19)" '  # cut by head: 19 bytes, no newline
    '"$(printf %s "$S" | tr -d \'\\r\\n\' | base64)" '  # base64 of the trimmed text
    "\"$(printf %s \"$S\" | tr -d '\\r\\n' | od -An -c | tr -d ' \\n')\" >&2; "
    "printf '%q|' \"${S%$'\\n'}\" \"${S%$'\\r'}\" >&2; exit 3"
)


def trimmed_forms(secret: str) -> dict[str, str]:
    return {
        "trimmed": secret,
        "first 12": secret[:12],
        "base64": base64.b64encode(secret.encode()).decode(),
    }


def test_a_secret_with_a_trailing_newline_stays_masked_once_trimmed(tmp_path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "crlf.txt").write_bytes(FILE_CRLF.encode() + b"\r\n")
    config = write_config(
        tmp_path,
        f"""\
        version: 1
        secrets:
          token: {{from_env: TEST_TOKEN}}
          crlf: {{from_file: keys/crlf.txt}}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: keep
                on_create: [{{run: "true"}}]
                on_destroy:
                  - run: {json.dumps(PRINT_TRIMMED)}
                    secrets: {{S: crlf}}
              - name: leaky
                on_create:
                  - run: {json.dumps(PRINT_TRIMMED)}
                    secrets: {{S: token}}
        """,
    )
    results = outputs(tmp_path, config, {"TEST_TOKEN": ENV_NL})
    assert_both_hooks_failed(results, "***|***|***|***|")
    everything = "\n".join(text for _, text in results) + written_by_the_runner(
        tmp_path, besides={"agent.yaml"}
    )
    assert_nowhere(everything, trimmed_forms(ENV_NL.strip()))
    assert_nowhere(everything, trimmed_forms(FILE_CRLF))


# --- (b) a secret input through a filter -------------------------------------

INPUT_SECRET = "Sec-Input-value-77"
SECRET_INPUT_CONFIG = """\
    version: 1
    inputs:
      acme.s:
        as: s
        secret: true
        schema: {type: object, properties: {token: {type: string}}, required: [token]}
    agent:
      model: m
      environment:
        sandbox: local
        hooks:
          - name: keep
            on_create:
              - write: note.txt
                content: "{{ s.token | lower }}"
            on_destroy:
              - run: cat note.txt >&2; exit 4
          - name: leaky
            on_create:
              - run: >-
                  printf '%s|' {{ s.token | upper }} {{ s.token | replace('-', '_') }} >&2;
                  printf %s "$U" | base64 >&2; printf '%q|' "$U" >&2; exit 3
                env: {U: '{{ s.token | replace("-", "''") }}'}
    """


def test_a_secret_input_through_a_filter_is_masked(tmp_path) -> None:
    config = write_config(tmp_path, SECRET_INPUT_CONFIG)
    given = ["--input", f"acme.s.token={INPUT_SECRET}"]
    results = outputs(tmp_path, config, {}, *given)
    assert_both_hooks_failed(results, "***|***|")
    quoted = INPUT_SECRET.replace("-", "'")
    everything = "\n".join(text for _, text in results) + written_by_the_runner(
        tmp_path, besides={"agent.yaml"}
    )
    assert_nowhere(
        everything,
        {
            "upper": INPUT_SECRET.upper(),
            "lower": INPUT_SECRET.lower(),
            "replaced": INPUT_SECRET.replace("-", "_"),
            "env value": quoted,
            "env value in base64": base64.b64encode(quoted.encode()).decode(),
            "env value as printf %q quotes it": quoted.replace("'", "\\'"),
        },
    )


# --- (c) secrets that are not UTF-8 ------------------------------------------

#: As the environment holds it (bytes) and as Python reads it (surrogateescape).
ENV_BYTES = b"tokA-Secret\xffB-Secret-tail"
FILE_BYTES = b"BinKey-part1\xfe\xffpart2-BinKey"

PRINT_BYTES = (
    'printf "%s|" "$S" >&2; printf "%q|" "$S" >&2; printf %s "$S" | base64 -w0 >&2; '
    "printf '|' >&2; declare -p S >&2; exit 3"
)


def test_a_secret_that_is_not_utf8_is_masked_as_bytes(tmp_path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "bin.key").write_bytes(FILE_BYTES)
    config = write_config(
        tmp_path,
        f"""\
        version: 1
        secrets:
          token: {{from_env: TEST_TOKEN}}
          bin: {{from_file: keys/bin.key}}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: keep
                on_create:
                  - secret_file: .keys/bin.key
                    secret: bin
                on_destroy:
                  - save: .keys/bin.key
                    to: delivered.key
                  - run: cat .keys/bin.key >&2; printf '|' >&2; {json.dumps(PRINT_BYTES)[1:-1]}
                    secrets: {{S: bin}}
              - name: leaky
                on_create:
                  - run: {json.dumps(PRINT_BYTES)}
                    secrets: {{S: token}}
        """,
    )
    env = {"TEST_TOKEN": ENV_BYTES.decode("utf-8", "surrogateescape")}
    results = outputs(tmp_path, config, env)
    assert_both_hooks_failed(results, "***|$'***'|***|")
    # The file secret reached the sandbox byte for byte (it was refused before).
    assert (tmp_path / "out" / "delivered.key").read_bytes() == FILE_BYTES
    everything = "\n".join(text for _, text in results) + written_by_the_runner(
        tmp_path, besides={"agent.yaml", "out/delivered.key", "out-json/delivered.key"}
    )
    for secret in (ENV_BYTES, FILE_BYTES):
        head, _, tail = secret.decode("latin-1").partition("\xff")
        head = head.rstrip("\xfe")
        assert_nowhere(
            everything,
            {
                "the part before the bad bytes": head,
                "the part after them": tail,
                "base64": base64.b64encode(secret).decode(),
            },
        )


@pytest.mark.parametrize("secret", [ENV_BYTES, FILE_BYTES])
def test_the_forms_of_a_bytes_secret_are_its_bytes_forms(secret) -> None:
    """In-process: what bash prints of a non-UTF-8 value, masked by the forms the
    runner computes from its surrogate-escaped text."""
    from runner.core.events import _secrets, add_secrets, decode_output
    from runner.core.redaction import scrub, secret_text_forms

    text = secret.decode("utf-8", "surrogateescape")
    printed = subprocess.run(
        ["bash", "-c", PRINT_BYTES.replace("exit 3", "")],
        env={"S": text, "LC_ALL": "C"},
        capture_output=True,
    ).stderr
    forms = sorted(secret_text_forms(text), key=len, reverse=True)
    token = _secrets.set(())
    try:
        add_secrets(forms)
        shown = scrub(decode_output(printed), forms)
    finally:
        _secrets.reset(token)
    assert shown == "***|$'***'|***|declare -x S=$'***'\n", shown


#: Tools that URL-encode a secret their own way: jq's @uri and JavaScript's
#: encodeURIComponent keep !'()*, an HTML form writes + for a space, some
#: encoders write lower-case hex.
URL_ENCODERS = {
    # not URL encoders, but the same test: GNU base64 wraps at 76 columns,
    # openssl at 64 (the eleventh review: a long secret leaked wrapped)
    "base64-wrapped": ["base64"],
    "openssl-base64": ["openssl", "base64"],
    # hex and base32 (the twelfth review)
    "xxd-hex": ["xxd", "-p", "-c", "256"],
    "base32": ["base32", "-w", "0"],
    "jq-uri": ["jq", "-Rrj", "@uri"],
    "form-plus": [
        "python3",
        "-c",
        "import sys, urllib.parse as u; print(u.quote_plus(sys.stdin.read()))",
    ],
    "lower-hex": [
        "python3",
        "-c",
        "import re, sys, urllib.parse as u; "
        "print(re.sub('%[0-9A-F]{2}', lambda m: m[0].lower(), u.quote(sys.stdin.read(), safe='')))",
    ],
}


@pytest.mark.parametrize("encoder", URL_ENCODERS.values(), ids=URL_ENCODERS.keys())
def test_a_secret_url_encoded_by_other_tools_is_scrubbed(encoder) -> None:
    """The tenth review: jq's ``@uri`` of a secret with ``!`` in it reached
    ``--json`` unmasked (only Python's ``quote(safe='')`` was a form)."""
    from runner.core.redaction import scrub, secret_text_forms

    secret = "s3cr3t Pass!word(x)*'y'/" * 4  # over 57 bytes: base64 wraps it
    forms = sorted(secret_text_forms(secret), key=len, reverse=True)
    printed = subprocess.run(
        encoder, input=secret, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert printed and printed != secret
    assert scrub(f"token={printed};", forms) == "token=***;"


#: Tools that wrap an encoding, as they print it by default (review 25's B2:
#: only base64's lines were forms; a long secret's base32 or hex came out
#: in lines none of which was masked).
WRAPPING_ENCODERS = {
    "base64": ["base64"],
    "openssl-base64": ["openssl", "base64"],
    "base32": ["base32"],
    "basenc-base16": ["basenc", "--base16"],
    "basenc-base64url": ["basenc", "--base64url"],
    "xxd-p": ["xxd", "-p"],
    "xxd-p-u": ["xxd", "-p", "-u"],  # review 26's B2b
}


@pytest.mark.parametrize("ending", ["", "\n"], ids=["printf", "echo"])
@pytest.mark.parametrize("encoder", WRAPPING_ENCODERS.values(), ids=WRAPPING_ENCODERS.keys())
def test_each_line_of_a_wrapped_encoding_is_masked(encoder, ending) -> None:
    """Output is shown (and scrubbed) a line at a time: every line the tool
    prints is masked, or its last one is under ``MIN_WRAPPED_LINE``; also of
    the secret and echo's newline (review 26's B2b: its last line differs)."""
    from runner.core.redaction import MIN_WRAPPED_LINE, scrub, secret_text_forms

    secret = "s3cr3t Pass!word(x)*'y'/" * 4 + "12345"  # 101 bytes: every tool wraps it
    forms = sorted(secret_text_forms(secret), key=len, reverse=True)
    printed = subprocess.run(
        encoder, input=secret + ending, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(printed) > 1, printed  # it wrapped
    for line in printed:
        assert scrub(line, forms) == "***" or len(line) < MIN_WRAPPED_LINE, (line, printed)


@pytest.mark.parametrize("encoder", [["base64"], ["openssl", "base64"]], ids=["gnu", "openssl"])
def test_each_line_of_a_wrapped_base64_with_plus_and_slash_is_masked(encoder) -> None:
    """A secret whose base64 holds + and / (its URL-safe form differs): each
    line is masked as base64 itself, at its tool's width."""
    from runner.core.redaction import scrub, secret_text_forms

    secret = "???>>>" * 17  # base64 Pz8/Pj4+...: a + and a / in every 8 characters
    forms = sorted(secret_text_forms(secret), key=len, reverse=True)
    printed = subprocess.run(
        encoder, input=secret, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(printed) > 1 and "+" in printed[0] and "/" in printed[0]
    assert [scrub(line, forms) for line in printed] == ["***"] * len(printed)


def test_a_short_last_line_of_a_wrapped_encoding_masks_nothing_else() -> None:
    from runner.core.redaction import MIN_WRAPPED_LINE, scrub, secret_text_forms

    secret = "x" * 31  # xxd -p: a line of 60 hex digits, then "78"
    forms = secret_text_forms(secret)
    assert "78" * 30 in forms and "78" not in forms and MIN_WRAPPED_LINE > 2
    assert scrub("port 7878", sorted(forms, key=len, reverse=True)) == "port 7878"


# --- (d) a multi-line secret (review 21's H7) ---------------------------------

PEM = "-----BEGIN KEY-----\nMIIBVAIBADANBgkqhkiG9w0B\nAQEFAASCAT4wggE6AgEAAkEA\n-----END KEY-----\n"


def test_each_line_of_a_multi_line_secret_is_masked_with_every_line_printed(tmp_path) -> None:
    """Output is scrubbed a line at a time (-v prints every line as it comes):
    no line of a PEM key was a form the scrubber knew, so each came out."""
    config = write_config(
        tmp_path,
        """\
        version: 1
        secrets:
          key: {from_env: TEST_PEM}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: show
                on_create:
                  - run: printf '%s\\n' "$K" >&2; exit 3
                    secrets: {K: key}
        """,
    )
    everything = "\n".join(
        text for _, text in outputs(tmp_path, config, {"TEST_PEM": PEM}, "-v")[:2]
    )
    assert_nowhere(everything, {"line 2": "MIIBVAIBADANBgkqhkiG9w0B", "line 3": "AQEFAASCAT4w"})


@pytest.mark.parametrize(
    "run",
    [
        "printf '%s\\n' {{ s.v | list | join('\\n') }}",
        "{% for c in s.v %}printf '%s\\n' {{ c }}\n{% endfor %}",  # review 22's I6
        "printf '%s\\n' {{ s.v[0:2] }} {{ s.v[2:4] }}",
    ],
)
def test_a_secret_input_split_into_characters_is_refused(tmp_path, run) -> None:
    """``{{ s.v | list | join('\\n') }}`` printed a secret a character a line,
    a word the runner rendered itself."""
    config = write_config(
        tmp_path,
        """\
        version: 1
        inputs:
          acme.s: {as: s, secret: true, schema: {type: object}}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: show
                on_create:
                  - run: RUN
        """.replace("RUN", json.dumps(run)),
    )
    code, text = runner(
        "run", str(config), "--input", 'acme.s={"v": "hunter2secret"}', cwd=tmp_path, env={}
    )
    assert code == 2, text
    # the loop's own text says how often it ran: refused before it renders (review 30)
    assert "too short to mask" in text or "how often it ran" in text
    assert "h\nu\nn" not in text
