"""Scrubbing against the ways a secret gets printed, found missing by mutation testing.

Each secret below holds a character some tool escapes (quote, space, $, backslash,
newline, tab); the test prints it the way bash or Python would and requires that
nothing but the mask is left.  Fast: one bash process per secret.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import subprocess
from urllib.parse import quote

import pytest

from runner.core.events import (
    _secrets,
    add_secrets,
    emit,
    events_schema,
    events_schema_text,
    listen,
    scrubbed,
)
from runner.core.redaction import MASK, scrub, secret_forms


@pytest.fixture(autouse=True)
def no_secrets_yet():
    """Each test starts with no event secrets and leaves none behind: add_secrets
    sets a context variable of the test process, and a secret added by an earlier
    test would otherwise be scrubbed here whether add_secrets works or not."""
    token = _secrets.set(())
    yield
    _secrets.reset(token)


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


def test_events_are_scrubbed_through_mappings_and_lists() -> None:
    seen = []
    with listen(seen.append):
        add_secrets(["hunter2'x"])
        from runner.core.events import emit

        emit("hook_failed", message="it was hunter2'x", steps=["a hunter2'x", {"k": "hunter2'x"}])
    event = seen[0]
    assert event["message"] == "it was ***"
    assert event["steps"] == ["a ***", {"k": "***"}]
    assert scrubbed(("hunter2'x", 3)) == ["***", 3]


def test_bytes_are_scrubbed_of_every_secret_in_utf8() -> None:
    # runner serve journals file contents (bytes) through scrubbed().
    add_secrets(["pässwörd-1", "token-22"])
    data = "a pässwörd-1 b token-22 c pässwörd-1".encode() + b"\xff"
    assert scrubbed(data) == b"a *** b *** c ***\xff"
    assert scrubbed([b"x token-22", "token-22"]) == [b"x ***", "***"]
    assert scrubbed(b"nothing secret") == b"nothing secret"


def test_a_longer_secret_is_masked_before_a_shorter_one_inside_it() -> None:
    seen = []
    with listen(seen.append):
        add_secrets(["abc"])
        add_secrets(["abcdef"])
        from runner.core.events import emit

        emit("hook_failed", message="abcdef")
    # Shortest first would leave "***def".
    assert seen[0]["message"] == "***"


def test_secrets_are_masked_longest_first_whatever_their_letters() -> None:
    """ "abcde" sorts after "bcd" by its letters but must be masked first."""
    seen = []
    with listen(seen.append):
        add_secrets(["bcd", "abcde"])
        emit("hook_failed", message="abcde bcd")
    assert seen[0]["message"] == "*** ***"


def test_secrets_added_later_join_the_earlier_ones() -> None:
    seen = []
    with listen(seen.append):
        add_secrets(["first-secret"])
        add_secrets(["first-secret", "second-secret"])
        add_secrets([])
        emit("hook_failed", message="first-secret second-secret")
    assert seen[0]["message"] == "*** ***"
    assert set(_secrets.get()) == {"first-secret", "second-secret"}


def test_an_event_carries_its_kind_and_time_and_nothing_without_a_listener() -> None:
    import time

    emit("hook_failed", message="nobody listens")  # no listener: nothing happens
    seen = []
    before = time.time()
    with listen(seen.append):
        emit("hook_failed", message="m")
    (event,) = seen
    assert event["event"] == "hook_failed" and event["message"] == "m"
    assert before <= event["time"] <= time.time()


def test_the_events_schema_is_the_shipped_json() -> None:
    schema = events_schema()
    assert schema == json.loads(events_schema_text())
    assert "hook_failed" in json.dumps(schema)


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


def test_command_output_loses_the_bytes_of_a_secret_before_it_is_decoded() -> None:
    from runner.core.events import decode_output

    output = b"a tok\xffen-\x80x b \xfe end"
    assert decode_output(output) == "a tok\ufffden-\ufffdx b \ufffd end"  # no secrets yet
    add_secrets(["plain-secret", ESCAPED, "x\udcff\udcfeyz"])
    assert decode_output(output) == "a *** b \ufffd end"
    # A UTF-8 secret decodes unchanged: it is scrubbed as text where it is shown.
    assert decode_output(b"plain-secret x\xff\xfeyz") == "plain-secret ***"
    assert scrubbed("plain-secret") == "***"


def test_bytes_are_scrubbed_of_a_secret_that_is_not_utf8() -> None:
    """The serve journal scrubs file contents as bytes: a surrogate-escaped secret
    is matched by its original bytes (its .encode() used to raise)."""
    add_secrets([ESCAPED, "wörd-42"])
    assert scrubbed(b"1 tok\xffen-\x80x 2 w\xc3\xb6rd-42") == b"1 *** 2 ***"


def test_adding_known_secrets_changes_nothing_and_new_ones_merge_longest_first() -> None:
    add_secrets(["bbbb", "aa-aa-aa"])
    first = _secrets.get()
    add_secrets(["bbbb"])
    add_secrets(iter(["aa-aa-aa", "bbbb"]))
    assert _secrets.get() is first  # nothing new: the same tuple
    add_secrets(["ccccccc", "dd\udcffd", "eeeeeeeee"])
    # (of equal lengths, the known one first)
    assert _secrets.get() == ("eeeeeeeee", "aa-aa-aa", "ccccccc", "bbbb", "dd\udcffd")
    from runner.core.events import decode_output

    assert decode_output(b"dd\xffd bbbb") == "*** bbbb"  # bytes forms merged too
    add_secrets(["ff\udcfeff"])
    assert decode_output(b"dd\xffd ff\xfeff") == "*** ***"


def test_many_secrets_and_many_renders_are_all_scrubbed() -> None:
    """Each render adds the secret words it printed, so additions are many: 2,000
    of them, growing to 16,000 forms, then an output scrubbed as bytes and as
    text.  That the work stays linear is measured by bench/redaction.py
    (ratios at n and 4n), not timed here."""
    from runner.core.events import decode_output
    from runner.core.redaction import secret_text_forms

    words = [secret_text_forms(f"render-{index:05d}-word\n") for index in range(2000)]
    for forms in words:
        add_secrets(forms)
    assert set(_secrets.get()) == set().union(*words)
    output = b"x render-01234-word y render-01999-word z " * 2_000
    assert scrubbed(decode_output(output)) == "x *** y *** z " * 2_000


def test_only_surrogates_that_surrogateescape_makes_are_escaped_bytes() -> None:
    from runner.core.redaction import _has_escaped_bytes

    assert [_has_escaped_bytes(t) for t in ("a\udc80", "\udcffb", "\udc7f", "\udd00")] == [
        True,
        True,
        False,
        False,
    ]
    assert not _has_escaped_bytes("plain") and not _has_escaped_bytes("é")
