"""The event bus (``runner/core/events.py``): events reach their listeners
scrubbed of every secret the session registered, and command output loses
the bytes of a secret that is not UTF-8 before it is decoded.

In-process, so mutation testing (``scripts/mutate events_scrub``) sees every
call.  Its mutants that no test can kill, because they change how fast the
bus scrubs and never what it leaves (each is in
``tests/data/mutation_allowlist.txt``):

- the cache of derived data (``_Derived``, ``_remember``): a tuple of secrets
  forgotten, found at another place, or kept one entry longer, or a part of
  it recomputed from the secrets instead of merged (``_Derived(secrets=None)``,
  its arguments shifted, ``members``/``byte_forms`` left to be recomputed,
  ``insert(1, ...)``, ``del [9:]``), gives the same secrets and the same
  bytes forms in the same order (``secret_bytes_forms`` sorts longest first
  too); only the work differs, which ``bench/redaction.py`` measures (such
  a mutant may be killed by mutmut's timeout on a loaded machine);
- ``data.decode("UTF-8")`` or ``data.decode()``: the same codec as ``"utf-8"``.
"""

from __future__ import annotations

import json

import pytest

from runner.core.events import (
    _secrets,
    add_secrets,
    decode_output,
    emit,
    events_schema,
    events_schema_text,
    listen,
    scrubbed,
)


@pytest.fixture(autouse=True)
def no_secrets_yet():
    """Each test starts with no event secrets and leaves none behind: add_secrets
    sets a context variable of the test process, and a secret added by an earlier
    test would otherwise be scrubbed here whether add_secrets works or not."""
    token = _secrets.set(())
    yield
    _secrets.reset(token)


ESCAPED = b"tok\xffen-\x80x".decode("utf-8", "surrogateescape")


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


#: Secrets that are not UTF-8, each held whole inside a longer one: at its
#: start, and where it sorts after the longer one by its bytes.
CONTAINED = [
    pytest.param("k\udcffey", "k\udcffey-and-more", id="a-prefix"),
    pytest.param("z\udcfe!", "a-z\udcfe!-b", id="inside-and-sorting-after"),
]


@pytest.mark.parametrize("shorter, longer", CONTAINED)
@pytest.mark.parametrize("together", [True, False], ids=["added-together", "added-apart"])
def test_output_loses_a_longer_undecodable_secret_before_a_shorter_one_inside_it(
    shorter: str, longer: str, together: bool
) -> None:
    """Masking the shorter secret first would cut the longer one's bytes
    and leave the rest of them in the output: the bytes forms are replaced
    longest first, however the secrets were added and whatever their bytes."""
    if together:
        add_secrets([shorter, longer])
    else:
        add_secrets([shorter])
        add_secrets([longer])
    raw = longer.encode("utf-8", "surrogateescape")
    assert decode_output(
        b"[" + raw + b"] [" + shorter.encode("utf-8", "surrogateescape") + b"]"
    ) == ("[***] [***]")
