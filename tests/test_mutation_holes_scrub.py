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

from runner._events import (
    _secrets,
    add_secrets,
    emit,
    events_schema,
    events_schema_text,
    listen,
    scrubbed,
)
from runner._inputs import MASK, scrub, secret_forms


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
        from runner._events import emit

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
        from runner._events import emit

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
