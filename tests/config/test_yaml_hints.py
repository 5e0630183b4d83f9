"""The YAML mistakes people make most get one positioned line that names the fix
(issue 31, item 3), from the real ``runner validate``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

HEAD = (
    "version: 1\n"
    "agent:\n"
    "  model: m\n"
    "  environment:\n"
    "    sandbox: local\n"
    "    hooks:\n"
    "      - name: h\n"
    "        on_create:\n"
)


def validate(tmp_path: Path, text: str) -> tuple[str, list[str]]:
    """The file's path and the problem lines ``runner validate`` prints (it exits 2)."""
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    result = subprocess.run(
        [*RUNNER_CLI, "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1] == "runner: 1 problem(s) in 1 file(s)"
    return str(path), lines[:-1]


def test_a_tab_is_named_with_its_place(tmp_path) -> None:
    file, lines = validate(tmp_path, HEAD + "\t  - run: echo hi\n")
    assert lines == [
        f"{file}:9:1: YAML: a tab character; YAML indents with spaces only, "
        "replace the tab with spaces"
    ]


def test_a_tab_after_spaces_points_at_the_tab(tmp_path) -> None:
    file, lines = validate(tmp_path, HEAD + "          - run: echo hi\n  \t        - run: x\n")
    (line,) = lines
    assert line.startswith(f"{file}:10:3: YAML: a tab character")


@pytest.mark.parametrize(
    ("step", "where", "fix"),
    [
        # The value loads, as a mapping whose key is a mapping: the whole value is known.
        (
            "          - run: 'true'\n            cwd: {{ session.id }}\n",
            "10:18",
            'write cwd: "{{ session.id }}" (at agent.environment.hooks[0].on_create[0].cwd)',
        ),
        (
            "          - run: 'true'\n            env: {N: {{ session.id }}}\n",
            "10:22",
            'write N: "{{ session.id }}" (at agent.environment.hooks[0].on_create[0].env.N)',
        ),
        # Text after the }} is a YAML syntax error: the hint is read from the line.
        (
            "          - write: notes.md\n            content: {{ session.id }} was here\n",
            "10:22",
            'write content: "{{ session.id }} was here"',
        ),
        (
            '          - save: a.md\n            to: {{ session.id }}-"x".md  # out\n',
            "10:17",
            "write to: '{{ session.id }}-\"x\".md'",
        ),
    ],
)
def test_a_value_starting_with_braces_is_told_to_be_quoted(tmp_path, step, where, fix) -> None:
    file, lines = validate(tmp_path, HEAD + step)
    assert lines == [
        f"{file}:{where}: YAML: quote a value that starts with {{{{ (YAML reads {{{{ x }}}} "
        f"as a mapping); {fix}"
    ]


def test_a_colon_in_a_plain_value_suggests_a_block_scalar(tmp_path) -> None:
    file, lines = validate(tmp_path, HEAD + '          - run: echo "error: x"\n')
    assert lines == [
        f'{file}:9:29: YAML: ": " inside an unquoted value starts a new key; write run: | '
        "and the value on the next line, indented further (or quote the whole value)"
    ]


def test_the_suggested_block_scalar_validates(tmp_path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(HEAD + '          - run: |\n              echo "error: x"\n')
    result = subprocess.run(
        [*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("word", "fix"), [("yes", "true"), ("No", "false"), ("on", "true")])
def test_yaml_1_1_booleans_are_told_to_be_true_or_false(tmp_path, word, fix) -> None:
    file, lines = validate(
        tmp_path, HEAD + f"          - run: 'false'\n            check: {word}\n"
    )
    assert lines == [
        f"{file}:10:20: expected boolean, got the string {word!r}: YAML 1.2 reads "
        f"yes/no/on/off as strings; write {fix} "
        "(at agent.environment.hooks[0].on_create[0].check)"
    ]


def test_other_strings_for_a_boolean_keep_the_plain_message(tmp_path) -> None:
    file, lines = validate(tmp_path, HEAD + "          - run: 'false'\n            check: maybe\n")
    assert lines == [
        f"{file}:10:20: expected boolean, got a string "
        "(at agent.environment.hooks[0].on_create[0].check)"
    ]


def test_braces_inside_quotes_are_not_blamed(tmp_path) -> None:
    """A quoted template is right: a syntax error elsewhere on its line is the parser's."""
    _, lines = validate(tmp_path, HEAD + '          - run: "echo {{ session.id }}" x: 1\n')
    (line,) = lines
    assert "quote a value" not in line


def test_a_list_input_where_one_word_goes_is_a_validate_error(tmp_path) -> None:
    """``{{ x.names }}`` with ``names`` an array: not one shell word.  Said by
    validate, with its position and the loop to write instead (it failed only
    when the step ran, with exit 1); a loop over it or a field of it is fine."""
    from runner.config import ConfigError, load

    def config(run: str):
        path = tmp_path / "agent.yaml"
        path.write_text(
            "version: 1\n"
            "inputs:\n"
            "  acme.x:\n"
            "    as: x\n"
            "    schema:\n"
            "      type: object\n"
            "      properties:\n"
            "        names: {type: array, items: {type: string}}\n"
            "        meta: {type: object}\n"
            "        v: {type: [string, array]}\n"
            "agent:\n"
            "  model: m\n"
            "  environment:\n"
            "    sandbox: local\n"
            "    hooks:\n"
            "      - name: h\n"
            "        on_create:\n"
            f"          - run: {run}\n"
        )
        return path

    for field in ("names", "meta"):
        with pytest.raises(ConfigError) as raised:
            load(config(f"echo {{{{ x.{field} }}}}"))
        assert f"agent.yaml:18:26: {{{{ x.{field} }}}} is a list or a mapping" in str(raised.value)
        assert "{% for item in" in str(raised.value)
    load(config("echo {% for n in x.names %}{{ n }} {% endfor %}"))
    load(config("echo {{ x.v }}"))  # may be a string: the run-time check decides
