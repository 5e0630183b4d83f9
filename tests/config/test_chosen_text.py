"""A decoder written in Jinja: the template's own text chosen by a value's parts.

``{% for c in x.v %}{% if c == '$' %}${% elif ... %}`` prints no value, yet
the script it renders is the value (review 31's C1): every check read that
text as the author's.  ``runner.config.chosen_text`` refuses template text
under a test on a part of a value; these tests attack it through the
installed CLI, and each refused template validated before the rule.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from agent_files import one_step_agent
from conftest import RUNNER_CLI

REFUSAL = "that a part of a value decides"


def _decoder(payload: str) -> str:
    """A template that spells ``payload`` out of a value, one branch a character."""
    branches = "".join(f"{{% elif c == {json.dumps(ch)} %}}{ch}" for ch in sorted(set(payload)))
    return "echo {% for c in x.v %}{% if false %}" + branches + "{% endif %}{% endfor %}"


def test_a_decoder_in_the_template_runs_nothing_through_the_cli(tmp_path: Path) -> None:
    """The attack as a user meets it: ``runner run`` with a value that the
    decoder turns into ``$(id>d)``.  Without the rule it ran (exit 0, and
    ``d`` was saved); now the file is refused before anything runs."""
    payload = "$(id>d)"
    document = {
        "version": 1,
        "inputs": {"acme.x": {"as": "x", "schema": {"type": "object"}}},
        "agent": {
            "model": "m",
            "environment": {
                "sandbox": "local",
                "hooks": [
                    {
                        "name": "h",
                        "on_create": [{"run": _decoder(payload)}],
                        "on_destroy": [{"save": "d", "to": "saved"}],
                    }
                ],
            },
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(json.dumps(document))
    values = tmp_path / "values.json"
    values.write_text(json.dumps({"acme.x": {"v": payload}}))
    run = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--inputs", str(values), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert REFUSAL in run.stderr and "agent.yaml:1:" in run.stderr
    assert not (tmp_path / "saved").exists()


DECODERS = [
    pytest.param(_decoder("$(id)"), id="if-chain-on-each-character"),
    pytest.param(
        "echo {% for c in x.v %}{% if c == '$' %}${% else %}{{ c }}{% endif %}{% endfor %}",
        id="one-branch-and-else",
    ),
    pytest.param("echo {% if x.v[0] == '$' %}${% endif %}", id="index"),
    pytest.param("echo {% if x.v[1:3] == '$(' %}$({% endif %}", id="slice"),
    pytest.param("echo {% if x.v|first == '$' %}${% endif %}", id="first"),
    pytest.param("echo {% if x.v|last == ')' %}){% endif %}", id="last"),
    pytest.param("echo {% if (x.v|list)[2] == 'i' %}i{% endif %}", id="list-then-index"),
    pytest.param("echo {% if x.n % 256 == 36 %}${% endif %}", id="digits-by-modulo"),
    pytest.param("echo {% if x.n // 256 == 40 %}({% endif %}", id="digits-by-floor-division"),
    pytest.param("echo {% if x.n / 256 == 40 %}({% endif %}", id="digits-by-division"),
    pytest.param(
        "echo {% for c in x.v %}{% if loop.previtem == '$' %}({% endif %}{% endfor %}",
        id="previous-item",
    ),
    pytest.param(
        "echo {% for c in x.v %}{% if loop.nextitem == '(' %}${% endif %}{% endfor %}",
        id="next-item",
    ),
    pytest.param("echo {% for c in x.v if c == '$' %}${% endfor %}", id="loop-filter"),
    pytest.param(
        "echo {% for c in x.v %}{% set d = c == '$' %}{% if d %}${% endif %}{% endfor %}",
        id="set-from-an-item",
    ),
    pytest.param(
        "echo {% set y = x %}{% for c in y.v %}{% if c == '$' %}${% endif %}{% endfor %}",
        id="set-from-the-input-then-loop",
    ),
    pytest.param(
        "echo {% set x = x.v %}{% for c in x %}{% if c == '$' %}${% endif %}{% endfor %}",
        id="rebinding-the-input-name",
    ),
    pytest.param(
        "echo {% for c in x.v %}{% for d in [c] %}{% if d == '$' %}${% endif %}"
        "{% endfor %}{% endfor %}",
        id="item-through-an-inner-loop",
    ),
    pytest.param(
        "echo {% for c in x.v %}{% for k in ['$', '('] %}{% if k == c %}{{ k }} "
        "{% endif %}{% endfor %}{% endfor %}",
        id="constant-loop-compared-to-an-item",
    ),
    pytest.param(
        "echo {% for w in x.words %}{% for c in w %}{% if c == '$' %}${% endif %}"
        "{% endfor %}{% endfor %}",
        id="characters-of-an-item",
    ),
    pytest.param(
        "echo {% if x.mode == 'a' %}{% elif x.v|first == '$' %}{% else %}${% endif %}",
        id="else-after-an-elif-on-a-part",
    ),
    pytest.param(
        "echo {% for c in x.v %}{% set m = 0 %}{% if c == '$' %}{% set m = 1 %}"
        "{% endif %}{% if m %}${% endif %}{% endfor %}",
        id="set-under-a-test-on-a-part",
    ),
    # the counters of a loop over a part measure it: word lengths spell characters
    pytest.param(
        "echo {% for w in x.words %}{% for _ in w[3:5] %}{% if loop.first and loop.last %}"
        "${% endif %}{% endfor %}{% endfor %}",
        id="first-and-last-of-a-slice",
    ),
    pytest.param(
        "echo {% for w in x.words %}{% for _ in w %}{% if loop.length == 36 %}$"
        "{% endif %}{% endfor %}{% endfor %}",
        id="length-of-an-item",
    ),
    pytest.param(
        "echo {% for w in x.words %}{% for _ in w[3:4] %}{% for _ in w[4:5] %}{% else %}$"
        "{% endfor %}{% endfor %}{% endfor %}",
        id="else-of-a-loop-over-a-slice",
    ),
]


def _problems(tmp_path: Path, run: str, **extra) -> list[str]:
    """What ``runner validate`` says of a one-step agent (in process: the
    mutation run maps these tests to the rule; the CLI's own path is the
    ``runner run`` test above)."""
    from runner.config import validate_file
    from runner.config.errors import format_path

    path = one_step_agent(tmp_path, run, **extra)
    return [f"{format_path(p.path)}: {p.message}" for p in validate_file(path)]


@pytest.mark.parametrize("run", DECODERS)
def test_every_decoder_shape_is_refused_by_validate(tmp_path: Path, run: str) -> None:
    (problem,) = _problems(tmp_path, run)
    assert REFUSAL in problem and problem.startswith("agent.environment.hooks[0].on_create[0].run")


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(
            "{% if x.mode == 'release' %}make release{% else %}make{% endif %}",
            id="whole-value-compared",
        ),
        pytest.param("make{% if x.debug %} V=1{% endif %}", id="whole-value-truthiness"),
        pytest.param("make{% if x.jobs > 4 %} -j4{% endif %}", id="whole-value-threshold"),
        pytest.param("echo{% if 'lint' in x.checks %} lint{% endif %}", id="membership"),
        pytest.param(
            "{% for f in x.files %}cat {{ f }}{% if not loop.last %} && {% endif %}{% endfor %}",
            id="counters-of-a-loop-over-a-value",
        ),
        pytest.param(
            "{% for r in x.repos %}{% for f in r.files %}echo {{ f }}; {% endfor %}{% endfor %}",
            id="nested-loop-that-only-repeats",
        ),
        pytest.param(
            "{% for c in x.v %}echo {{ '$' if c == 'a' else c }}; {% endfor %}",
            id="a-choice-printed-as-a-value",
        ),
        pytest.param(
            "{% for i in [1, 2] %}{% if i % 2 == 0 %}echo {{ x.v }}{% endif %}{% endfor %}",
            id="arithmetic-on-a-constant",
        ),
        pytest.param("echo {{ x.v[0] }}{% if x.v %} set{% endif %}", id="a-part-printed"),
    ],
)
def test_tests_on_whole_values_still_choose_text(tmp_path: Path, run: str) -> None:
    """What an author writes to pick a mode or join a list stays accepted:
    the value picks one of the texts written out in full, or repeats one."""
    assert _problems(tmp_path, run) == []


def test_a_host_path_may_not_be_decoded_from_a_value(tmp_path: Path) -> None:
    """A decoder in ``save: to:`` spelled ``..`` from a value's characters."""
    to = "out/{% for c in x.v %}{% if c == '.' %}.{% elif c == '/' %}/{% endif %}{% endfor %}x"
    (problem,) = _problems(tmp_path, "true", before=[{"save": "a", "to": to}])
    assert REFUSAL in problem and problem.startswith("agent.environment.hooks[0].on_create[0].to")
