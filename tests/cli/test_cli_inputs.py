"""Inputs as CI passes them: JSON files, missing inputs and misspelt fields, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"

CONFIG = """\
version: 1
inputs:
  t.value:
    as: v
    schema:
      type: object
      properties:
        text: {type: string}
        count: {type: integer, default: 1}
      required: [text]
      additionalProperties: false
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: keep
        on_create:
          - write: value.txt
            content: "{{ v.text }}"
        on_destroy:
          - save: value.txt
            to: value.txt
"""

#: Valid JSON the YAML loader refuses: a surrogate-pair escape, DEL, C1 controls.
TEXT = "\U0001f60d del\x7f c1\x85\x9f tab\t"
JSON_TEXT = '{"t.value": {"text": "\\ud83d\\ude0d del\x7f c1\x85\x9f tab\\t"}}'


def runner(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd), "PYTHONIOENCODING": "utf-8"},
        timeout=timeout,
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(CONFIG)
    return path


@pytest.mark.parametrize("name", ["inputs.json", "inputs.txt"])  # by name, or by the first "{"
def test_a_json_inputs_file_is_read_as_json(tmp_path, config, name) -> None:
    path = tmp_path / name
    path.write_text("\n  " + JSON_TEXT, encoding="utf-8")
    out = tmp_path / "out"
    result = runner(
        "run", str(config), "--inputs", str(path), "--output-dir", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert (out / "value.txt").read_bytes() == TEXT.encode("utf-8")


def test_a_whole_value_from_a_json_file(tmp_path, config) -> None:
    path = tmp_path / "value.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"text": TEXT}).encode())  # with a BOM
    result = runner("render", str(config), "--input", f"t.value=@{path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "# write value.txt" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"t.value": {"text": "hunter2"', "invalid JSON: Expecting"),
        ('{"t.value": {"text": "hunter2", "text": "x"}}', "duplicate key 'text'"),
        ('{"t.value": {"text": "hunter2", "count": NaN}}', "NaN is not a JSON number"),
        ('{"t.value": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64"),
        ('{"t.value": ' + "[" * 70 + "]" * 70 + "}", "nested deeper than 64"),
    ],
)
def test_a_bad_json_file_is_a_clear_error(tmp_path, config, content, message) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(content)
    result = runner("render", str(config), "--inputs", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "hunter2" not in result.stderr
    assert "Traceback" not in result.stderr


def test_a_json_file_keeps_the_size_bound_and_the_regular_file_check(tmp_path, config) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"t.value": {"text": "x" * 1_000_001}}))
    result = runner("render", str(config), "--inputs", str(big), cwd=tmp_path)
    assert result.returncode == 2
    assert "larger than 1000000 bytes" in result.stderr
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    result = runner("render", str(config), "--inputs", str(fifo), cwd=tmp_path, timeout=20)
    assert result.returncode == 2
    assert "not a regular file" in result.stderr


def test_a_missing_input_names_the_options_to_pass(tmp_path) -> None:
    for command in ("render", "run"):
        result = runner(command, str(QUICKSTART), cwd=tmp_path)
        assert result.returncode == 2
        assert "pass --input acme.repository.repository=VALUE or --inputs FILE" in result.stderr
        assert result.stderr.index("--input") < result.stderr.index("session_inputs=")


def test_a_misspelt_field_is_named_with_a_suggestion(tmp_path, config) -> None:
    # A schema that allows extra keys (quickstart): the missing field explains the typo.
    result = runner(
        "render", str(QUICKSTART), "--input", "acme.repository.repo=acme/api", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "unknown field 'repo'; did you mean 'repository'?" in result.stderr
    # additionalProperties: false, in an --inputs file and with --input.
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({"t.value": {"text": "x", "cuont": 2}}))
    for args in (
        ["--inputs", str(path)],
        ["--input", "t.value.text=x", "--input", "t.value.cuont=2"],
    ):
        result = runner("render", str(config), *args, cwd=tmp_path)
        assert result.returncode == 2
        assert "unknown field 'cuont'; did you mean 'count'?" in result.stderr


def test_an_unknown_input_id_in_a_file_gets_a_suggestion(tmp_path, config) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({"t.valeu": {"text": "x"}}))
    result = runner("render", str(config), "--inputs", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown input 't.valeu'; did you mean 't.value'?" in result.stderr
