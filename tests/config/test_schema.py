"""schemas/runner.schema.json: well-formed, closed, described, shipped, and its errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI
from jsonschema import Draft202012Validator

from runner.config import validate_file
from runner.config.schema import schema_text

ROOT = Path(__file__).parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "runner.schema.json").read_text())


def walk(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from walk(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, (*path, index))


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(SCHEMA)


def test_every_property_has_a_description() -> None:
    missing = [
        ".".join(map(str, (*path, name)))
        for path, node in walk(SCHEMA)
        if path and path[-1] == "properties"
        for name, sub in node.items()
        if isinstance(sub, dict) and "description" not in sub and "$ref" not in sub
    ]
    assert missing == []


def test_every_object_with_properties_is_closed() -> None:
    open_objects = [
        ".".join(map(str, path))
        for path, node in walk(SCHEMA)
        if "properties" in node
        and node.get("type") == "object"
        and node.get("additionalProperties") is not False
    ]
    assert open_objects == []


def test_the_packaged_schema_is_the_repository_schema() -> None:
    assert json.loads(schema_text()) == SCHEMA


def test_runner_schema_prints_it() -> None:
    result = subprocess.run([*RUNNER_CLI, "schema"], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == SCHEMA


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return path


def messages(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    return [str(p).replace(str(path), "agent.yaml") for p in validate_file(path)]


BASE = "version: 1\nagent:\n  model: m\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "  enviroment: {sandbox: local}\n",
            "agent.yaml:4:3: unknown key 'enviroment'; did you mean 'environment'? "
            "(at agent.enviroment)",
        ),
        (
            "  environment: {sandbox: dockr}\n",
            "agent.yaml:4:26: 'dockr' is not one of: none, local, docker, mistral; "
            "did you mean 'docker'? (at agent.environment.sandbox)",
        ),
        (
            "  max_tool_calls: many\n",
            "agent.yaml:4:19: expected integer, got a string (at agent.max_tool_calls)",
        ),
        (
            "  environment:\n    sandbox: local\n    hooks:\n      - name: h\n"
            "        on_create:\n          - {wirte: x}\n",
            "agent.yaml:9:14: unknown key 'wirte'; did you mean 'write'? "
            "(at agent.environment.hooks[0].on_create[0].wirte)",
        ),
        (
            "  environment:\n    sandbox: local\n    hooks:\n      - name: h\n",
            "agent.yaml:7:9: a hook needs on_create or on_destroy steps (or uses:, or python:) "
            "(at agent.environment.hooks[0])",
        ),
        (
            "  environment:\n    sandbox: local\n    hooks:\n      - uses: git-identity\n"
            "        with: {name: A}\n",
            "agent.yaml:8:15: missing required key 'email' (at agent.environment.hooks[0].with)",
        ),
    ],
)
def test_schema_errors_name_file_line_column_and_path(tmp_path, body, expected) -> None:
    assert messages(tmp_path, BASE + body)[0] == expected


def test_missing_version_is_reported_at_the_top(tmp_path) -> None:
    assert messages(tmp_path, "agent:\n  model: m\n") == [
        "agent.yaml:1:1: missing required key 'version'"
    ]


def test_every_error_is_reported_most_relevant_first(tmp_path) -> None:
    found = messages(
        tmp_path,
        "version: 2\nagent:\n  model: m\n  colour: red\n  environment:\n    sandbox: local\n"
        "    hooks:\n      - name: h\n        on_create:\n          - {run: x, content: y}\n",
    )
    assert len(found) == 3
    assert found[0].startswith("agent.yaml:1:10:")
    assert "unknown key 'colour'" in found[1]
    assert "unknown key 'content'" in found[2]


@pytest.mark.parametrize("version", ["1.0", "'1'", "true", "{x: 1}", "2"])
def test_a_version_other_than_the_integer_1_is_refused_with_the_fix(tmp_path, version) -> None:
    # 1.0 == 1 in JSON Schema's `const`: only the integer type rule catches it.
    assert messages(tmp_path, f"version: {version}\nagent:\n  model: m\n") == [
        "agent.yaml:1:10: the format version is the integer 1; write version: 1 (at version)"
    ]


def test_runner_validate_refuses_version_1_0(tmp_path) -> None:
    path = write(tmp_path, "version: 1.0\nagent:\n  model: m\n")
    result = subprocess.run(
        [*RUNNER_CLI, "validate", path.name],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "agent.yaml:1:10: the format version is the integer 1; write version: 1" in (
        result.stderr
    )
