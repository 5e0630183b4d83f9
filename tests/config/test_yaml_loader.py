"""The safe YAML loader: positions, duplicate keys, aliases, size, YAML 1.1 surprises."""

from __future__ import annotations

import pytest

from runner.config import yaml_loader
from runner.config.errors import ConfigError
from runner.config.yaml_loader import MAX_BYTES, load_file, load_text


@pytest.fixture(autouse=True, params=["libyaml", "pure-python"])
def parser(request, monkeypatch):
    """Every rule holds with libyaml's C parser and with PyYAML's Python fallback."""
    if request.param == "pure-python":
        monkeypatch.setattr(yaml_loader, "_CParser", None)
    elif yaml_loader._CParser is None:
        pytest.skip("PyYAML was built without libyaml")
    return request.param


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, file="f.yaml")
    return [str(p) for p in info.value.problems]


def test_values_keep_their_line_and_column() -> None:
    document = load_text("a:\n  b: [1, two]\n  c: {d: x}\n", file="f.yaml")
    assert document.data == {"a": {"b": [1, "two"], "c": {"d": "x"}}}
    assert document.position(("a", "b", 1)) == (2, 10)
    assert document.position(("a", "c", "d")) == (3, 10)
    assert document.key_positions[("a", "c")] == (3, 3)


def test_a_duplicate_key_at_any_depth_names_both_lines() -> None:
    assert problems("top:\n  inner:\n    x: 1\n    y: 2\n    x: 3\n") == [
        "f.yaml:5:5: duplicate key 'x' (lines 3 and 5); each key may appear once (at top.inner.x)"
    ]


def test_anchors_and_aliases_are_refused() -> None:
    assert problems("a: &anchor 1\nb: 2\n") == [
        "f.yaml:1:4: anchors (&name) are not allowed; repeat the value instead"
    ]
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    assert "anchors" in problems(bomb)[0]


def test_merge_keys_are_refused() -> None:
    assert "merge keys (<<) are not allowed" in problems("a:\n  <<: {b: 1}\n")[0]


def test_unknown_tags_are_refused() -> None:
    assert problems("a: !!python/object/apply:os.system [id]\n") == [
        "f.yaml:1:4: tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (at a)"
    ]
    assert "tag '!custom' is not allowed" in problems("a: !custom x\n")[0]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("yes", "yes"),
        ("y", "y"),
        ("0755", "0755"),
        ("1_000", "1_000"),
        ("12:30", "12:30"),
        ("true", True),
        ("false", False),
        ("10", 10),
        ("-3", -3),
        ("0o17", 15),
        ("0x1f", 31),
        ("1.5", 1.5),
        ("~", None),
        ("null", None),
        ("'0755'", "0755"),
    ],
)
def test_scalars_follow_the_yaml_1_2_core_schema(text: str, value: object) -> None:
    assert load_text(f"key: {text}\n", file="f.yaml").data == {"key": value}


def test_on_as_a_key_stays_a_string() -> None:
    assert load_text("on: push\n", file="f.yaml").data == {"on": "push"}


def test_syntax_errors_have_a_position() -> None:
    (message,) = problems("a: [1, 2\nb: 3\n")
    assert message.startswith("f.yaml:2:")
    assert "YAML syntax" in message


def test_an_error_at_the_end_of_a_file_without_a_final_newline_is_on_its_last_line() -> None:
    """libyaml put it on the line after the last (line 4 of 3), where no
    editor can go; found by the validate fuzzer."""
    (message,) = problems("version: 1\nagent: {model: m}\nx: [x: [")
    assert message.startswith("f.yaml:3:9: YAML syntax"), message


def test_several_documents_are_refused() -> None:
    assert "YAML" in problems("a: 1\n---\nb: 2\n")[0]


def test_an_oversized_file_is_refused_before_parsing(tmp_path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * (MAX_BYTES + 1) + "\n")
    with pytest.raises(ConfigError, match=r"big\.yaml:1:1: file is larger than"):
        load_file(big)


def test_a_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_file(tmp_path / "nope.yaml")


def test_deep_nesting_is_a_positioned_error_not_a_crash() -> None:
    text = "a: " + "[" * 200 + "]" * 200 + "\n"
    (message,) = problems(text)
    assert "nesting deeper than 64 levels" in message
    assert message.startswith("f.yaml:1:")
