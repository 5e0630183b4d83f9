"""The forms a secret gets printed in (``runner/core/redaction.py``), and scrubbing them.

Each secret below holds a character some tool escapes (quote, space, $, backslash,
newline, tab); the test prints it the way bash or Python would and requires that
nothing but the mask is left.  Fast: one bash process per secret.  How the event
bus scrubs every form from what it passes on: ``test_events.py``.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import subprocess
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.core.redaction import MASK, masked, scrub, secret_forms

SECRETS = ["it's", "two words", "pa$$wd", "back\\slash", "line\nbreak", "tab\there", 'q"uote`s']

#: How bash prints "$s": printf %q, declare -p, ${s@Q}, set -x, in that order.
BASH = 'printf "%q\\n" "$s"; declare -p s; printf "%s\\n" "${s@Q}"; (set -x; : "$s") 2>&1'
#: Each printed line once the secret is masked: only quotes around the mask are left.
MASKED = [
    r"\$?'?\*\*\*'?",  # $'...' for a newline or a tab
    r"""declare -x s=("\*\*\*"|\$'\*\*\*')""",  # exported: it came from the environment
    r"\$?'\*\*\*'",
    r"\+ : \$?'?\*\*\*'?",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_what_bash_prints_of_a_secret_is_masked(secret) -> None:
    printed = subprocess.run(
        ["bash", "-c", BASH],
        env={"s": secret, "LC_ALL": "C"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    masked = scrub(printed, sorted(secret_forms(secret), key=len, reverse=True))
    lines = masked.splitlines()
    assert len(lines) == len(MASKED), masked
    for line, pattern in zip(lines, MASKED, strict=True):
        assert re.fullmatch(pattern, line), (secret, printed, masked)


@pytest.mark.parametrize("secret", SECRETS)
def test_what_python_prints_of_a_secret_is_masked(secret) -> None:
    forms = sorted(secret_forms(secret), key=len, reverse=True)
    raw = secret.encode()
    printed = {
        "json": json.dumps(secret),
        "json-unicode": json.dumps(secret, ensure_ascii=False),
        "repr": repr(secret),
        "repr-in-a-list": repr([secret, "x'y"]),
        "shlex": shlex.quote(secret),
        "url": quote(secret, safe=""),
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }
    for how, text in printed.items():
        left = scrub(text, forms).replace(MASK, "")
        # Only quotes, brackets and the list's other item may stay behind.
        assert set(left) <= set("\"'[], xy="), (how, text, left)


def test_scrub_replaces_every_occurrence_of_every_secret() -> None:
    assert scrub("a-secret b-token a-secret", ["a-secret", "b-token"]) == "*** *** ***"


# --- issue 25, item 8: trimmed secrets, rendered words, bytes that are not UTF-8 ---


def test_a_secret_is_masked_with_and_without_its_surrounding_whitespace() -> None:
    from runner.core.redaction import secret_text_forms
    from runner.engine.inputs import SessionInput, secret_strings

    assert secret_text_forms("tok-1\r\n") == secret_forms("tok-1\r\n") | secret_forms("tok-1")
    assert secret_text_forms(" \tab \n") == secret_forms(" \tab \n")  # "ab" is too short
    assert secret_text_forms("a\n") == set()  # and so is the whole text
    assert secret_text_forms("abc") == secret_forms("abc")
    cls = SessionInput.from_json_schema("acme.s", {"type": "object"}, secret=True)
    strings = secret_strings([cls.from_value({"t": "pass-word\n", "n": 12345})])
    assert set(strings) == (
        secret_forms("pass-word\n") | secret_forms("pass-word") | secret_forms("12345")
    )
    assert [len(s) for s in strings] == sorted(map(len, strings), reverse=True)
    printed = "pass-word|cGFzcy13b3Jk|pass-word\\n"  # tr -d, base64 of it, json
    assert scrub(printed, strings) == "***|***|***"


ESCAPED = b"tok\xffen-\x80x".decode("utf-8", "surrogateescape")


def test_the_forms_of_bytes_that_are_not_utf8_are_those_of_the_bytes() -> None:
    from runner.core.redaction import _undecodable_forms, secret_text_forms

    assert _undecodable_forms(ESCAPED) == {
        "tok\\377en-\\200x",  # $'...', the same in both locales here
        "dG9r/2VuLYB4",  # base64 of the bytes (no padding to strip)
        "dG9r_2VuLYB4",  # urlsafe
        "746f6bff656e2d8078",  # hex of the bytes (xxd -p), and upper case
        "746F6BFF656E2D8078",
        "ORXWX73FNYWYA6A=",  # base32 of the bytes
        "ORXWX73FNYWYA6A",
    }
    assert _undecodable_forms("t\u00e9b\tx\udcff") == {
        "t\u00e9b\\tx\\377",  # $'...' in a UTF-8 locale: é kept
        "t\\303\\251b\\tx\\377",  # in the C locale: é as its octal bytes
        "dMOpYgl4/w==",
        "dMOpYgl4/w",
        "dMOpYgl4_w",
        "74c3a9620978ff",
        "74C3A9620978FF",
        "OTB2SYQJPD7Q====",
        "OTB2SYQJPD7Q",
    }
    # é and a lone surrogate outside the escaped range are not bytes that failed to decode
    assert _undecodable_forms("é-secret") == _undecodable_forms("ab\ud800cd") == set()
    assert secret_text_forms(ESCAPED) >= _undecodable_forms(ESCAPED)


def test_only_forms_holding_undecodable_bytes_get_a_bytes_form_longest_first() -> None:
    from runner.core.redaction import secret_bytes_forms

    assert secret_bytes_forms(["é-secret", "ab\ud800cd", "plain", ESCAPED, "x\udcffyz\udcfe"]) == [
        b"tok\xffen-\x80x",
        b"x\xffyz\xfe",
    ]
    assert secret_bytes_forms([]) == []


def test_only_surrogates_that_surrogateescape_makes_are_escaped_bytes() -> None:
    from runner.core.redaction import _has_escaped_bytes

    assert [_has_escaped_bytes(t) for t in ("a\udc80", "\udcffb", "\udc7f", "\udd00")] == [
        True,
        True,
        False,
        False,
    ]
    assert not _has_escaped_bytes("plain") and not _has_escaped_bytes("é")


_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_OTHER_CHARS = "abcdefghij :'\"-/="


@given(
    token=st.text(_TOKEN_CHARS, min_size=3, max_size=24),
    before=st.text(_OTHER_CHARS, max_size=12),
    after=st.text(_OTHER_CHARS, max_size=12),
    cuts=st.lists(st.tuples(st.integers(0, 12), st.integers(1, 23), st.booleans()), max_size=8),
    as_bytes=st.booleans(),
)
def test_no_form_can_cut_into_another_secrets_occurrence(token, before, after, cuts, as_bytes):
    """Review 49's S1, generated: forms a caller chooses overlap the token's
    occurrence at either end (the text before it plus its first characters,
    or its last characters plus the text after).  Whatever the forms and
    their order, no character of the token is left (the token's alphabet is
    apart from the text's, so any left would show)."""
    printed = f"{before}{token}{after}"
    forms = [token]
    for reach, overlap, at_start in cuts:
        overlap = min(overlap, len(token) - 1)
        if at_start:
            forms.append(before[len(before) - reach :] + token[:overlap])
        else:
            forms.append(token[len(token) - overlap :] + after[:reach])
    forms.sort(key=len, reverse=True)  # the order add_secrets keeps, longest first
    if as_bytes:
        out = masked(printed.encode(), [f.encode() for f in forms], b"***").decode()
    else:
        out = masked(printed, forms, MASK)
    assert not set(out) & set(_TOKEN_CHARS), (out, forms)
    assert MASK in out


def test_overlapping_and_touching_occurrences_become_one_mask() -> None:
    assert masked("a-SECRET-b", ["-SEC", "ET-", "SECRET"], MASK) == "a***b"
    assert masked("xTOKTOKx", ["TOK"], MASK) == "x***x"
    assert masked("aaaaa", ["aaa"], MASK) == "***"
    assert masked("no secret here", ["TOK", ""], MASK) == "no secret here"
    assert masked(b"1 TOK 2 TOK", [b"TOK"], b"***") == b"1 *** 2 ***"
