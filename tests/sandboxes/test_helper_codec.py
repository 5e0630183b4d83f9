"""The Python helper's own JSON codec, for a python3 without ``json``
(``python3-minimal``): ``mini_dumps`` must write what ``json.dumps`` writes
(the runner parses answers strictly) and ``mini_loads`` read what the
runner's ``json.dumps`` sends; then the helper on the minimal image carries
generated hostile values exactly, as the shell helper's test does."""

from __future__ import annotations

import json
import os
import random

import pytest
from helper_parity import open_session
from hypothesis import given, settings
from hypothesis import strategies as st
from test_shell_channel import assert_values_travel_as_data

from runner.sandboxes.helpers.exec_helper import mini_dumps, mini_loads

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=400)
@given(json_values)
def test_mini_dumps_writes_what_json_dumps_writes(value) -> None:
    assert mini_dumps(value) == json.dumps(value)


@settings(max_examples=400)
@given(json_values)
def test_mini_loads_reads_what_the_runner_sends(value) -> None:
    decoded = mini_loads(json.dumps(value))
    assert decoded == value
    assert json.dumps(decoded) == json.dumps(value)  # 1 stays 1, 1.0 stays 1.0


@pytest.mark.parametrize(
    "text",
    ["", " ", "{", "[1,]", '{"a" 1}', '{"a":1,}', "01", "1.", ".5", '"\x01"', '"\\x41"', "tru",
     "[1] x", "{1: 2}", "[", "]", '"open', "nul", "--1", "[1 2]", '{"a":1 "b":2}', "[}"],
)  # fmt: skip
def test_mini_loads_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        mini_loads(text)


@pytest.mark.anyio
@pytest.mark.docker
async def test_generated_values_travel_exactly_through_the_python_helper_on_minimal(
    docker_backend, image_tags
) -> None:
    """env, the command, file names and contents, and the cwd, on python3-minimal."""
    rng = random.Random(int(os.environ.get("RUNNER_FUZZ_SEED", "11")))
    async with await open_session(docker_backend, image=image_tags["minimal"]) as session:
        box = session.sandbox
        assert box.channel is not None and box.channel.kind == "python"
        await assert_values_travel_as_data(box, rng, int(os.environ.get("RUNNER_FUZZ_CASES", "40")))
        assert box.channel.kind == "python"
