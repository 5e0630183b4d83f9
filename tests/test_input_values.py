"""--input and --inputs: how command-line text becomes session input values."""

from __future__ import annotations

import json

import pytest

import runner as agents
from runner.config.compiler import DeclaredInput
from runner.config.input_values import collect_input_values


def declared(*ids: str) -> dict[str, DeclaredInput]:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "flag": {"type": "boolean"},
            "nested": {"type": "object"},
        },
    }
    return {
        i: DeclaredInput(i, agents.SessionInput.from_json_schema(i, schema), None, True, None)
        for i in ids
    }


def test_the_longest_declared_id_wins() -> None:
    values = collect_input_values(
        declared("acme", "acme.repo"), assignments=["acme.repo.name=x", "acme.name=y"]
    )
    assert values == {"acme.repo": {"name": "x"}, "acme": {"name": "y"}}


def test_string_fields_stay_strings_and_others_parse_as_json() -> None:
    values = collect_input_values(
        declared("ci.job"),
        assignments=["ci.job.name=123", "ci.job.count=3", "ci.job.flag=true", "ci.job.nested.k=v"],
    )
    assert values == {"ci.job": {"name": "123", "count": 3, "flag": True, "nested": {"k": "v"}}}


def test_a_whole_value_from_a_file_or_inline_json(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text("name: from-file\ncount: 2\n")
    values = collect_input_values(
        declared("ci.job", "ci.other"),
        assignments=[f"ci.job=@{tmp_path / 'job.yaml'}", 'ci.other={"name": "inline"}'],
    )
    assert values == {"ci.job": {"name": "from-file", "count": 2}, "ci.other": {"name": "inline"}}


def test_inputs_files_come_first_and_fields_override_them(tmp_path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({"ci.job": {"name": "file", "count": 1}}))
    values = collect_input_values(
        declared("ci.job"), files=[str(path)], assignments=["ci.job.count=5"]
    )
    assert values == {"ci.job": {"name": "file", "count": 5}}


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (["ci.jobs.name=x"], "no declared input matches 'ci.jobs.name' (declared: ci.job)"),
        (["ci.job"], "expected ID.FIELD=VALUE or ID=@FILE"),
        (["ci.job=not json"], "the whole value must be JSON or @FILE"),
        (["ci.job=@/nonexistent/file.yaml"], "no such file"),
    ],
)
def test_bad_assignments_are_clear_errors(assignments, message) -> None:
    with pytest.raises(agents.SessionInputError) as info:
        collect_input_values(declared("ci.job"), assignments=assignments)
    assert message in str(info.value)


def test_an_inputs_file_with_an_unknown_id_is_refused(tmp_path) -> None:
    path = tmp_path / "inputs.yaml"
    path.write_text("ci.jbo: {name: x}\n")
    with pytest.raises(agents.SessionInputError, match="unknown input 'ci.jbo'"):
        collect_input_values(declared("ci.job"), files=[str(path)])
