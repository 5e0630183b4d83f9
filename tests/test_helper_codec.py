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
from hypothesis import given, settings
from hypothesis import strategies as st
from test_shell_channel import nasty_value, open_session

from runner.sandboxes._exec_helper import mini_dumps, mini_loads

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
        for _ in range(int(os.environ.get("RUNNER_FUZZ_CASES", "40"))):
            value = nasty_value(rng)
            expected = value.encode("utf-8", "surrogateescape")
            result = await box.execute('printf %s "$V" | od -An -tx1 -v', env={"V": value})
            assert bytes.fromhex("".join(result.stdout.split())) == expected, value
            quoted = "'" + value.replace("'", "'\\''") + "'"
            result = await box.execute(f"printf %s {quoted} | od -An -tx1 -v")
            assert bytes.fromhex("".join(result.stdout.split())) == expected, value
            name = "f" + value.replace("/", "_").replace("\0", "")
            await box.write_file(name, expected)
            assert await box.read_file(name) == expected, value
            if "/" not in value and value not in ("", ".", ".."):
                assert (await box.execute('mkdir -p -- "d$V"', env={"V": value})).exit_code == 0
                where = await box.execute("pwd | od -An -tx1 -v", cwd="d" + value)
                assert bytes.fromhex("".join(where.stdout.split())) == (
                    b"/workspace/d" + expected + b"\n"
                ), value
        assert (await box.execute("ls /tmp/pwned 2>&1")).exit_code != 0
