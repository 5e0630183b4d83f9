"""Hostile YAML: every attack is a positioned ConfigError, found without blowing up."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.config import ConfigError, validate_file
from runner.config.compiler import compile_document
from runner.config.yaml_loader import load_file, load_text


def only_config_errors(text: str) -> None:
    """Loading and compiling ``text`` either works or raises ConfigError: nothing else."""
    try:
        compile_document(load_text(text, file="fuzz.yaml"))
    except ConfigError as exc:
        for problem in exc.problems:
            assert problem.file == "fuzz.yaml"
            assert problem.line >= 1 and problem.column >= 1


BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]"
        for i in range(8)
    ]
)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1])


def peak_growth_kib(work) -> int:
    """How far this process's resident memory peaked above where it stood before
    ``work()``.  The peak (VmHWM) is reset first through /proc/self/clear_refs:
    ru_maxrss of the pytest process only ever grows, so comparing it would miss
    anything smaller than the largest peak of every test before this one."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = _status_kib("VmRSS")
    assert _status_kib("VmHWM") <= before + 1024, "the peak was not reset"
    work()
    return _status_kib("VmHWM") - before


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    def load() -> None:
        with pytest.raises(ConfigError, match="anchors"):
            load_text(BILLION_LAUGHS, file="bomb.yaml")

    assert peak_growth_kib(load) < 20_000  # the expansion would need gigabytes


def test_a_50_mb_file_is_refused_without_reading_it(tmp_path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("w") as handle:
        handle.write("a: '")
        handle.write("x" * (50 << 20))
        handle.write("'\n")
    (problem,) = validate_file(path)
    assert (problem.line, problem.column) == (1, 1)
    assert "larger than 1000000 bytes" in problem.message


def test_100_levels_of_nesting_are_refused_with_a_position() -> None:
    text = "version: 1\nx: " + "[" * 100 + "]" * 100 + "\n"
    with pytest.raises(ConfigError) as info:
        load_text(text, file="deep.yaml")
    assert any("nesting deeper than 64 levels" in p.message for p in info.value.problems)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!python/object/new:os.system [id]\n", "is not allowed"),
        ("a: !!binary aGVsbG8=\n", "is not allowed"),
        ("a: !custom {x: 1}\n", "is not allowed"),
        ("version: 1\nversion: 1\n", "duplicate key 'version' (lines 1 and 2)"),
        (
            "version: 1\nagent: {model: m, environment: {sandbox: local, sandbox: docker}}\n",
            "duplicate key",
        ),
    ],
)
def test_tags_and_duplicates_are_refused(text, message) -> None:
    with pytest.raises(ConfigError) as info:
        load_text(text, file="f.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize("value", ["no", "off", "yes", "on", "0755", "1e3_0", "~x"])
def test_yaml_11_words_stay_strings_where_a_string_is_expected(tmp_path, value) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(f"version: 1\nagent:\n  model: {value}\n")
    assert validate_file(path) == []
    assert load_file(path).data["agent"]["model"] == value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=string.printable + "ü☃\t", max_size=400))
def test_fuzzing_the_loader_finds_nothing_but_config_errors(text) -> None:
    only_config_errors(text)


STRUCTURE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "version",
                    "agent",
                    "model",
                    "environment",
                    "sandbox",
                    "hooks",
                    "name",
                    "on_create",
                    "run",
                    "inputs",
                    "schema",
                    "as",
                    "uses",
                    "with",
                    "python",
                    "save",
                    "to",
                    "x",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STRUCTURE)
def test_fuzzing_the_schema_and_compiler_finds_nothing_but_config_errors(data) -> None:
    import json

    only_config_errors(json.dumps(data))
