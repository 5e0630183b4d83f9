"""no_leading_option (old name no_leading_dash) judges the word a program gets.

Issue 25, item 7: the input-level check read the raw input, so a value that
passes it (" -x", "__upload-pack=x", 5) could still reach a program as an
option once a Jinja filter or an operator changed it (`| trim`, `| replace`,
a minus sign), and `+` options (`ex +!cmd`, `vim +cmd`, `less +...`) were not
refused at all.  Each test here is an attack through the real CLI on the local
sandbox: the command must not run, the refusal must name the input and where
it was used, and never the value.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

from runner.config import validate_file


def runner(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd)},
        timeout=120,
    )


def config(tmp_path: Path, steps: str, *, flag: str = "no_leading_dash: true") -> Path:
    """One input `x` (acme.x) with a string `v` and a list `names`, flagged with
    ``flag``, and one hook running ``steps`` (YAML, indented by the caller's dedent)."""
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            consumers: [git, ls, ex, vim, less, touch, nm]  # they get values: strict mode
            inputs:
              acme.x:
                as: x
                {flag}
                schema:
                  type: object
                  properties:
                    v: {{type: string}}
                    n: {{type: integer}}
                    names: {{type: array, items: {{type: string}}}}
              acme.plain:
                as: p
                required: false
                schema: {{type: object, properties: {{v: {{type: string, default: "-ok"}}}}}}
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: opts
                    on_create:
            """
        )
        + textwrap.indent(textwrap.dedent(steps), " " * 10)
    )
    return path


def run_json(tmp_path: Path, path: Path, value: dict) -> tuple[subprocess.CompletedProcess, list]:
    result = runner(
        "run", str(path), "--json", "--input", f"acme.x={json.dumps(value)}", cwd=tmp_path
    )
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, events


def assert_refused(
    tmp_path: Path, steps: str, value: dict, shown: str, consumer: str = "opts.on_create", **kw: str
) -> str:
    """The step is refused before it runs (exit 2, no marker), and the message
    names the input and its consumer (the hook, or the agent for the early
    check), never ``shown`` (the word the program would get)."""
    marker = tmp_path / "ran"
    path = config(tmp_path, steps.replace("MARK", str(marker)), **kw)
    result, events = run_json(tmp_path, path, value)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert not marker.exists(), "the command ran"
    assert "'acme.x'" in result.stderr and consumer in result.stderr, result.stderr
    for raw in (result.stdout, result.stderr):
        assert shown not in raw, f"the value {shown!r} was shown: {raw}"
    assert events[-1]["event"] == "result"
    return result.stderr


ATTACKS = [
    # (the step, the caller's value, the word the program would get)
    pytest.param(
        "- run: touch MARK; git fetch {{ x.v | trim }} origin\n",
        {"v": " --upload-pack=touch${IFS}pwned"},
        "--upload-pack=touch${IFS}pwned",
        id="trim",
    ),
    pytest.param(
        "- run: touch MARK; git fetch {{ x.v | replace('_', '-') }} origin\n",
        {"v": "__upload-pack=evil"},
        "--upload-pack=evil",
        id="replace",
    ),
    pytest.param(
        "- run: touch MARK; git fetch --depth {{ -x.n }} origin\n",
        {"n": 5731},
        "-5731",
        id="negated-number",
    ),
    pytest.param(
        "- run: touch MARK; ls {{ x.v | lower | trim }}\n",
        {"v": "\t-LAZ"},
        "-laz",
        id="two-filters",
    ),
    pytest.param(
        '- run: "{% set y = x.v | trim %}touch MARK; ls {{ y }}"\n',
        {"v": " -laZ"},
        "-laZ",
        id="through-set",
    ),
    pytest.param(
        '- run: "touch MARK{% for f in x.names %}; cat {{ f | trim }}{% endfor %}"\n',
        {"names": ["ok", " -nvalue-x"]},
        "-nvalue-x",
        id="through-for",
    ),
    pytest.param(
        "- run: touch MARK; ls {{ inputs['acme.x'].v | trim }}\n",
        {"v": " -laZ"},
        "-laZ",
        id="through-inputs",
    ),
    pytest.param(
        "- run: touch MARK; ls \"$CHOICE\"\n  env: {CHOICE: '{{ x.v | trim }}'}\n",
        {"v": " -laZ"},
        "-laZ",
        id="env-value",
    ),
]


@pytest.mark.parametrize(("steps", "value", "shown"), ATTACKS)
def test_a_filtered_value_that_becomes_an_option_is_refused(tmp_path, steps, value, shown) -> None:
    stderr = assert_refused(tmp_path, steps, value, shown)
    assert "starts with '-'" in stderr


@pytest.mark.parametrize("flag", ["no_leading_dash: true", "no_leading_option: true"])
@pytest.mark.parametrize(
    ("steps", "value", "shown", "consumer"),
    [
        # ex, vim and less run a "+" argument as a command: refused at the input...
        (
            "- run: touch MARK; ex {{ x.v }} /dev/null\n",
            {"v": "+!touch pwned"},
            "+!touch",
            "agent default_agent",
        ),
        # ...and when a filter makes one.
        ("- run: touch MARK; less {{ x.v | trim }} f\n", {"v": " +!sh"}, "+!sh", "opts.on_create"),
        (
            "- run: touch MARK; vim {{ x.v | replace('=', '+') }}\n",
            {"v": "=cmd"},
            "+cmd",
            "opts.on_create",
        ),
    ],
)
def test_a_plus_option_is_refused_too(tmp_path, flag, steps, value, shown, consumer) -> None:
    stderr = assert_refused(tmp_path, steps, value, shown, consumer, flag=flag)
    assert "starts with '+'" in stderr


def test_render_refuses_it_as_run_does(tmp_path) -> None:
    path = config(tmp_path, "- run: ls {{ x.v | trim }}\n")
    result = runner("render", str(path), "--input", 'acme.x={"v": " -laZ"}', cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert "'acme.x'" in result.stderr and "starts with '-'" in result.stderr
    assert "-laZ" not in result.stdout + result.stderr


def test_what_is_not_a_flagged_word_still_runs(tmp_path) -> None:
    """The author's own options, an unflagged input, a flagged value that stays
    a plain word, and file content (data, not an argument) are left alone."""
    out = tmp_path / "out.txt"
    steps = f"""\
        - run: "printf '%s|' {{{{ x.v | trim }}}} -n {{{{ p.v }}}} > {out}"
        - write: notes.txt
          content: "{{{{ x.names | join(' ') | trim }}}}"
        - run: "cat notes.txt >> {out}"
        """
    path = config(tmp_path, steps)
    result, _ = run_json(tmp_path, path, {"v": " a-b ", "n": 1, "names": [" -first"]})
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "a-b|-n|-ok|-first"


BOTH = "no_leading_dash: true\n" + " " * 16 + "no_leading_option: true"


def test_both_spellings_are_accepted_and_both_at_once_is_a_problem(tmp_path) -> None:
    assert validate_file(config(tmp_path, "- run: 'true'\n", flag="no_leading_option: true")) == []
    assert validate_file(config(tmp_path, "- run: 'true'\n")) == []
    both = config(tmp_path, "- run: 'true'\n", flag=BOTH)
    (problem,) = validate_file(both)
    assert "no_leading_dash" in problem.message and "no_leading_option" in problem.message


def test_the_input_level_check_still_refuses_early(tmp_path) -> None:
    """A raw value starting with "-" or "+" is refused before any sandbox exists."""
    for value in ("-x", "+x"):
        path = config(tmp_path, "- run: touch MARK\n".replace("MARK", str(tmp_path / "ran")))
        result, events = run_json(tmp_path, path, {"v": value})
        assert result.returncode == 2
        assert f"field 'v' starts with '{value[0]}'" in result.stderr
        assert "session_starting" not in [e["event"] for e in events]
        assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("steps", "value", "consumer"),
    [
        ("- run: touch MARK; nm {{ x.v }}\n", {"v": "@opts"}, "agent default_agent"),
        ("- run: touch MARK; nm -- {{ x.v | trim }}\n", {"v": " @opts"}, "opts.on_create"),
    ],
)
def test_an_at_file_of_options_is_refused_too(tmp_path, steps, value, consumer) -> None:
    """``nm @opts`` reads its options from the file ``opts`` (``--plugin=./x.so``
    loads a library: the seventeenth review); GCC, binutils and javac alike."""
    stderr = assert_refused(
        tmp_path, steps, value, "@opts", consumer, flag="no_leading_option: true"
    )
    assert "starts with '@'" in stderr


@pytest.mark.parametrize(
    "steps",
    [
        # review 38's F2: the guard followed an input through set and for, not
        # with or a block set, so a trimmed " +cmd" reached the program
        '- run: touch MARK; vim -es "$F"\n'
        "  env: {F: '{% with f = x.v | trim %}{{ f }}{% endwith %}'}\n",
        '- run: touch MARK; vim -es "$F"\n'
        "  env: {F: '{% set f %}{{ x.v }}{% endset %}{{ f | trim }}'}\n",
        "- run: touch MARK; ls\n  cwd: '{% with d = x.v | trim %}{{ d }}{% endwith %}'\n",
        "- save: '{% with d = x.v | trim %}{{ d }}{% endwith %}'\n  to: out.txt\n",
    ],
)
def test_a_construct_the_guard_cannot_follow_is_refused_at_validate(tmp_path, steps) -> None:
    marker = tmp_path / "ran"
    path = config(tmp_path, steps.replace("MARK", str(marker)), flag="no_leading_option: true")
    checked = runner("validate", str(path), cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout
    assert "no_leading_option input" in checked.stderr, checked.stderr
    result, _ = run_json(tmp_path, path, {"v": " +!touch pwned"})
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert not marker.exists(), "the command ran"
    assert not (tmp_path / "pwned").exists()


def test_the_same_constructs_stay_allowed_without_the_flag(tmp_path) -> None:
    """Only a guarded input makes {% with %} a problem: the guard follows it."""
    path = config(
        tmp_path,
        "- run: echo \"$F\"\n  env: {F: '{% with f = x.v | trim %}{{ f }}{% endwith %}'}\n",
        flag="required: true",
    )
    checked = runner("validate", str(path), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
