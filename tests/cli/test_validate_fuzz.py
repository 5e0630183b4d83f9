"""``runner validate`` fed generated YAML (issue 31, item 4): whatever the
file holds, never a traceback, exit 0 or 2 (docs/cli.md's exit codes), and
every problem names the file, a line in it and, where the document has
fields, the field.

The files come from ``yaml_strategies``: documents drawn from the schema,
then broken (wrong types, unknown keys, broken Jinja, bad indentation and
tabs, huge values, alias bombs, bytes that are not UTF-8).  In-process
through click's ``CliRunner`` for speed (hundreds of files a minute), and
a few through the real CLI, as users run it.

Budget: ``RUNNER_VALIDATE_FUZZ_CASES`` files (default 300, about a minute on
two cores; marker ``fuzz``, run by scripts/test after the rest);
``scripts/fuzz-validate`` runs long ones.  A failure prints the file's bytes
and hypothesis's reproduce line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import RUNNER_CLI
from hypothesis import HealthCheck, given, seed, settings
from yaml_strategies import yaml_files

from runner.cli.main import main

CASES = int(os.environ.get("RUNNER_VALIDATE_FUZZ_CASES", "300"))
#: The fixed seed the suite runs (reproducible in CI); the script passes its own.
SEED = int(os.environ.get("RUNNER_VALIDATE_FUZZ_SEED", "20261203"))

FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _parsed_mapping(data: bytes) -> bool:
    """Is the file a YAML mapping the runner reads field by field (so each
    problem is about a field)?  Decided by PyYAML on its own, not by the
    runner's loader: it parses, to a mapping, with no anchor or alias (the
    runner refuses those as YAML, before any field)."""
    try:
        events = list(yaml.parse(data, Loader=yaml.SafeLoader))
        if any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in events):
            return False
        return isinstance(yaml.safe_load(data), dict)
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError, ValueError):
        return False


def check_answer(data: bytes, path: Path, exit_code: int, stdout: str, stderr: str) -> None:
    """The promise, for one file: no traceback, 0 or 2, positioned problems."""
    shown = f"file {data[:2000]!r}:\n{stdout}{stderr}"
    assert "Traceback" not in shown, shown
    assert exit_code in (0, 2), f"exit {exit_code}:\n{shown}"
    report = json.loads(stdout) if stdout else {"ok": None, "files": [None]}
    (entry,) = report["files"]
    assert entry["file"] == str(path)
    problems: list[dict[str, Any]] = entry["problems"]
    assert report["ok"] == (exit_code == 0) == (not problems), shown
    lines = data.count(b"\n") + 1
    fields = _parsed_mapping(data)
    for problem in problems:
        assert problem["message"].strip(), problem
        assert 1 <= problem["line"] <= lines, (problem, lines, shown)
        assert problem["column"] >= 1, (problem, shown)
        if fields:  # the field's path, or a missing key named in the message
            named = re.search(r"\bkey '[^']+'", problem["message"])
            assert problem["path"] or named, f"a problem without its field: {problem}\n{shown}"


def validate_in_process(path: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["validate", "--format", "json", str(path)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback: shown with the file that caused it
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.fuzz
@seed(SEED)
@FUZZ
@given(data=yaml_files())
def test_validate_answers_every_generated_file_with_positioned_problems(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "agent.yaml"
    path.write_bytes(data)
    code, stdout, stderr = validate_in_process(path)
    check_answer(data, path, code, stdout, stderr)


def test_a_text_report_starts_every_problem_with_file_line_and_column(tmp_path: Path) -> None:
    """The text format's lines, for a file broken three ways."""
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nagent:\n  model: m\n  nmae: x\n  environment:\n"
        "    sandbox: local\n    hooks:\n      - name: h\n        on_create:\n"
        "          - run: 'echo {{ task.title'\n          - write: 3\n"
    )
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("runner: ") and "problem(s)" in lines[-1]
    assert lines[:-1] and all(line.startswith(f"{path}:") for line in lines[:-1]), lines
    for line in lines[:-1]:
        _, row, column, _ = line.split(":", 3)
        assert int(row) >= 1 and int(column) >= 1, line
        assert "(at agent." in line, line


@pytest.mark.fuzz
@seed(SEED + 1)
@settings(FUZZ, max_examples=max(3, CASES // 50))
@given(data=yaml_files())
def test_the_real_cli_answers_generated_files_the_same_way(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    """A few through the real CLI, as users run it (its own process, the
    installed package under scripts/test)."""
    path = tmp_path_factory.mktemp("fuzz") / "agent.yaml"
    path.write_bytes(data)
    done = subprocess.run(
        [*RUNNER_CLI, "validate", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    check_answer(data, path, done.returncode, done.stdout, done.stderr)


def test_the_strategy_reaches_files_the_runner_accepts(tmp_path: Path) -> None:
    """Not only broken files: the generator draws valid ones too, or the
    fuzz would only ever walk the error paths."""
    from hypothesis import find

    from runner.config import validate_file

    path = tmp_path / "agent.yaml"

    def accepted(file: bytes) -> bool:
        path.write_bytes(file)
        return not validate_file(path)

    assert find(yaml_files(), accepted, settings=settings(max_examples=2000, database=None))
