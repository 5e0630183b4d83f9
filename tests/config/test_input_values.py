"""--input and --inputs: how command-line text becomes session input values.

Most tests call ``collect_input_values`` and ``json_value`` in-process, so
mutation testing sees them (``scripts/mutate input_values``); the last ones
run ``runner`` to show the same refusals at the command line.  An error names
the option and the target, never the value: it may be a secret.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

from runner.config.compiler import DeclaredInput
from runner.config.input_values import collect_input_values, json_value
from runner.config.yaml_loader import MAX_DEPTH
from runner.core.errors import SessionInputError
from runner.engine.inputs import SessionInput

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
        "nested": {"type": "object"},
        "deep": {},
    },
}


def declared(*ids: str) -> dict[str, DeclaredInput]:
    return {
        i: DeclaredInput(i, SessionInput.from_json_schema(i, SCHEMA), None, True, None) for i in ids
    }


def refusal(**options) -> str:
    with pytest.raises(SessionInputError) as caught:
        collect_input_values(declared("ci.job", "ci"), **options)
    return str(caught.value)


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
    with pytest.raises(SessionInputError) as info:
        collect_input_values(declared("ci.job"), assignments=assignments)
    assert message in str(info.value)


def test_an_inputs_file_with_an_unknown_id_is_refused(tmp_path) -> None:
    path = tmp_path / "inputs.yaml"
    path.write_text("ci.jbo: {name: x}\n")
    with pytest.raises(SessionInputError, match="unknown input 'ci.jbo'"):
        collect_input_values(declared("ci.job"), files=[str(path)])


def test_a_field_value_is_a_string_where_the_schema_says_string_else_json() -> None:
    values = collect_input_values(
        declared("ci"), assignments=["ci.name=3", "ci.count=3", "ci.deep.x=[1]", "ci.deep.y=[1"]
    )
    assert values == {"ci": {"name": "3", "count": 3, "deep": {"x": [1], "y": "[1"}}}


def test_later_options_override_earlier_ones_field_by_field(tmp_path) -> None:
    file = tmp_path / "v.json"
    file.write_text(json.dumps({"ci": {"name": "from file", "count": 1}}))
    values = collect_input_values(
        declared("ci"), files=[str(file)], assignments=["ci.count=2", "ci.count=5"]
    )
    assert values == {"ci": {"name": "from file", "count": 5}}


def test_a_whole_value_is_inline_json_or_a_file(tmp_path) -> None:
    (tmp_path / "v.yaml").write_text("name: from yaml\n")
    values = collect_input_values(
        declared("ci", "ci.job"), assignments=['ci={"count": 1}', f"ci.job=@{tmp_path}/v.yaml"]
    )
    assert values == {"ci": {"count": 1}, "ci.job": {"name": "from yaml"}}


def test_a_value_file_starting_like_json_but_not_json_is_read_as_yaml(tmp_path) -> None:
    (tmp_path / "flow").write_text("{ci: {name: x}}")
    (tmp_path / "v.json").write_text("{ci: {name: x}}")
    assert collect_input_values(declared("ci"), files=[str(tmp_path / "flow")]) == {
        "ci": {"name": "x"}
    }
    # named .json, it must be JSON: the error names the file, never its text
    message = refusal(files=[str(tmp_path / "v.json")])
    assert message.startswith(f"--inputs {tmp_path}/v.json: {tmp_path}/v.json: invalid JSON")


def test_an_assignment_without_equals_is_refused_without_showing_it() -> None:
    message = refusal(assignments=["ci.name=ok", "hunter2"])
    assert message.startswith("--input number 2 has no '='")
    assert "hunter2" not in message


def test_an_undeclared_target_is_refused_by_name_only() -> None:
    message = refusal(assignments=["cix.name=hunter2"])
    assert message == "--input: no declared input matches 'cix.name' (declared: ci, ci.job)"


def test_a_whole_value_that_is_not_json_is_refused_without_showing_it() -> None:
    message = refusal(assignments=["ci=hunter2"])
    assert "hunter2" not in message
    assert message.startswith("--input ci=...: the whole value must be JSON or @FILE")


def test_setting_a_field_of_a_value_that_is_not_an_object_is_refused() -> None:
    assert (
        refusal(assignments=["ci=[1]", "ci.name=x"]) == "--input ci.name=...: 'ci' is not an object"
    )
    assert refusal(assignments=["ci.deep=1", "ci.deep.x=2"]) == (
        "--input: 'deep' is not an object, cannot set 'deep.x'"
    )


def test_an_inputs_file_must_map_declared_ids(tmp_path) -> None:
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "typo.json").write_text('{"ci.jbo": {}}')
    assert refusal(files=[str(tmp_path / "list.json")]) == (
        f"--inputs {tmp_path}/list.json: expected a mapping of input_id to value"
    )
    assert refusal(files=[str(tmp_path / "typo.json")]) == (
        f"--inputs {tmp_path}/typo.json: unknown input 'ci.jbo'; did you mean 'ci.job'?"
    )


def test_json_value_refuses_what_the_yaml_loader_refuses() -> None:
    with pytest.raises(ValueError, match="duplicate key 'a'"):
        json_value('{"a": 1, "a": 2}')
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match=f"{constant} is not a JSON number"):
            json_value(f"[{constant}]")
    # MAX_DEPTH containers around a number are fine; one more is refused
    assert json_value("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH) is not None
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        json_value("[" * (MAX_DEPTH + 1) + "1" + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        json_value('{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nested deeper"):
        json_value("[" * 100_000 + "]" * 100_000)  # RecursionError inside json


def test_an_unknown_id_with_no_close_name_lists_the_declared_ones(tmp_path) -> None:
    (tmp_path / "v.json").write_text('{"zzz": {}}')
    assert refusal(files=[str(tmp_path / "v.json")]) == (
        f"--inputs {tmp_path}/v.json: unknown input 'zzz'; declared: ci, ci.job"
    )
    with pytest.raises(SessionInputError) as caught:
        collect_input_values({}, files=[str(tmp_path / "v.json")])
    assert str(caught.value).endswith("unknown input 'zzz'; declared: none")
    with pytest.raises(SessionInputError) as caught:
        collect_input_values({}, assignments=["zzz=1"])
    assert str(caught.value) == "--input: no declared input matches 'zzz' (declared: none)"


def test_the_no_equals_message_says_what_is_expected() -> None:
    assert refusal(assignments=["hunter2"]) == (
        "--input number 1 has no '=' (not shown, it may be a value): "
        "expected ID.FIELD=VALUE or ID=@FILE"
    )


def test_a_value_may_itself_contain_equals() -> None:
    values = collect_input_values(declared("ci"), assignments=["ci.name=a=b"])
    assert values == {"ci": {"name": "a=b"}}


def test_a_field_below_a_string_field_is_parsed_by_its_top_level_schema() -> None:
    # "name" is a string: "3" stays a string below it too, never JSON 3
    values = collect_input_values(declared("ci"), assignments=["ci.name.x=3"])
    assert values == {"ci": {"name": {"x": "3"}}}


@pytest.mark.parametrize("blank", ["", " \n\t"])
def test_a_value_file_starting_with_a_brace_or_bracket_is_json_whatever_its_name(
    tmp_path, blank
) -> None:
    # A surrogate pair escape is JSON the YAML loader refuses: only a JSON read accepts it.
    (tmp_path / "object").write_text(blank + '{"ci": {"name": "\\ud83d\\ude0d"}}')
    (tmp_path / "array").write_text(blank + '["\\ud83d\\ude0d"]')
    values = collect_input_values(declared("ci"), files=[str(tmp_path / "object")])
    assert values == {"ci": {"name": "\U0001f60d"}}
    assert refusal(files=[str(tmp_path / "array")]) == (
        f"--inputs {tmp_path}/array: expected a mapping of input_id to value"
    )


def test_a_value_file_error_names_the_option_and_the_file(tmp_path) -> None:
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    message = refusal(assignments=[f"ci=@{tmp_path}/bad.yaml"])
    assert message.startswith(f"--input ci=@: {tmp_path}/bad.yaml:")
    message = refusal(assignments=[f"ci=@{tmp_path}/absent.yaml"])
    assert message.startswith(f"--input ci=@: {tmp_path}/absent.yaml")


# --- at the command line ---------------------------------------------------------


QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart.yaml"


def run_cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd)},
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (
            ["acme.repo.repository=hunter2-secret"],
            "no declared input matches 'acme.repo.repository'",
        ),
        (["hunter2-secret"], "--input number 1 has no '='"),
        (
            ['acme.repository="hunter2-secret"', "acme.repository.revision=hunter2-secret"],
            "--input acme.repository.revision=...: 'acme.repository' is not an object",
        ),
        (
            ["acme.repository.revision=x", "acme.repository.revision.deep=hunter2-secret"],
            "'revision' is not an object, cannot set 'revision.deep'",
        ),
    ],
)
def test_a_bad_input_option_never_echoes_the_value(tmp_path, assignments, message) -> None:
    args = [arg for assignment in assignments for arg in ("--input", assignment)]
    result = run_cli("run", str(QUICKSTART), *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []  # refused before any sandbox


@pytest.mark.parametrize("option", ["--input acme.repository=@", "--inputs "])
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_value_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, option, kind) -> None:
    """Read until memory runs out (/dev/zero) or blocked forever (a FIFO with no
    writer), before; the subprocess timeout turns a hang into a failure."""
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "value.yaml")
        os.mkfifo(path)
    result = run_cli(
        "run", str(QUICKSTART), *(option + path).split(" ", 1), cwd=tmp_path, timeout=20
    )
    assert result.returncode == 2
    assert f"{path}:1:1: not a regular file" in result.stderr
