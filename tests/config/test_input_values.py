"""--input and --inputs: how command-line text becomes session input values."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

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
