"""A decoder written in Jinja: the template's own text chosen or repeated by a value.

``{% for c in x.v %}{% if c == '$' %}${% elif ... %}`` prints no value, yet
the script it renders is the value (review 31's C1); tests on "parts" of a
value could not be told from tests on the whole (review 32: ``loop.index``
with ``in``, ``(x.n * p)|int is odd``, an input named ``loop``), and a loop
body repeated once per character counted out letters for ``bash -c`` (F5).
``runner.config.chosen_text`` refuses text any value decides, and a script
whose text a value repeats is checked as one holding a value.  Each refused
template here validated before the rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_files import one_step_agent, run_with_values

REFUSAL = "that a value decides"


def _decoder(payload: str) -> str:
    """A template that spells ``payload`` out of a value, one branch a character."""
    branches = "".join(f"{{% elif c == {json.dumps(ch)} %}}{ch}" for ch in sorted(set(payload)))
    return "echo {% for c in x.v %}{% if false %}" + branches + "{% endif %}{% endfor %}"


def test_a_decoder_in_the_template_runs_nothing_through_the_cli(tmp_path: Path) -> None:
    """The attack as a user meets it: ``runner run`` with a value that the
    decoder turns into ``$(id>d)``.  Without the rule it ran (exit 0, and
    ``d`` was saved); now the file is refused before anything runs."""
    payload = "$(id>d)"
    path = one_step_agent(tmp_path, _decoder(payload), after=[{"save": "d", "to": "saved"}])
    run = run_with_values(tmp_path, path, {"acme.x": {"v": payload}})
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
    # review 32: tests on the whole value that name a position read a part
    pytest.param(
        "echo {% for _ in x.v %}{% if ('|' ~ loop.index ~ '=$|') in x.v %}${% endif %}{% endfor %}",
        id="substring-with-the-loop-index",
    ),
    pytest.param(
        "echo {% for _ in x.checks %}{% if (loop.index ~ '=$') in x.checks %}${% endif %}"
        "{% endfor %}",
        id="list-membership-with-the-loop-index",
    ),
    pytest.param(
        "echo {% for p in [1.0, 0.125] %}{% if (x.n * p)|int is odd %}${% endif %}{% endfor %}",
        id="bits-by-multiplication",
    ),
    pytest.param(
        "echo {% for p in [1, 2] %}{% if (x.n - p) is even %}${% endif %}{% endfor %}",
        id="parity-by-subtraction",
    ),
    pytest.param(
        "echo {% for c in x.v %}{% for _ in ([1] if c == '$' else []) %}${% endfor %}{% endfor %}",
        id="a-loop-over-a-choice-is-an-if",
    ),
    pytest.param("echo {% if x.v|trim('$') != x.v %}${% endif %}", id="trim-compared"),
    # review 33: a loop over a value-cut constant is an if; a loop's filter
    # sees the enclosing loop's ``loop``
    pytest.param(
        "{% for c in x.v %}{% for _ in [1][c|replace('t', '')|length:] %}echo t\n"
        "{% endfor %}{% endfor %}",
        id="a-loop-over-a-slice-a-value-bounds",
    ),
    pytest.param(
        "{% for c in x.v %}{% for _ in x.v|replace(c, '') %}echo t\n{% endfor %}{% endfor %}",
        id="a-loop-over-a-value-filtered-by-a-value",
    ),
    pytest.param(
        "printf '%s\\n' {% for c in x.v %}{% for _ in (c|replace('$', 'XY'))[1:] %}$"
        "{% endfor %}{% endfor %}",
        id="a-loop-over-a-filter-that-changes-the-count",
    ),
    pytest.param(
        "{% for c in x.v %}{% for k in 'to' if k == loop.nextitem|default('') %}echo t\n"
        "{% endfor %}{% endfor %}",
        id="the-enclosing-loop-in-a-loop-filter",
    ),
    pytest.param("echo {% if x.v < 'b' %}a{% endif %}", id="ordering"),
    # a test on the whole value chooses text too: the value picks the script
    pytest.param("{% if x.mode == 'release' %}make release{% endif %}", id="whole-value"),
    pytest.param("make{% if x.debug %} V=1{% endif %}", id="truthiness"),
    pytest.param("echo{% if 'lint' in x.checks %} lint{% endif %}", id="membership"),
    pytest.param(
        "{% for f in x.files %}cat {{ f }}{% if not loop.last %} && {% endif %}{% endfor %}",
        id="counters-of-a-loop-over-a-value",
    ),
    pytest.param(
        "{% for f in x.files %}cat {{ f }}; {% else %}echo none{% endfor %}",
        id="else-of-a-loop-over-a-value",
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
            "if [ {{ x.mode }} = release ]; then echo release; else echo debug; fi",
            id="the-decision-in-the-shell",
        ),
        pytest.param(
            "{% for f in x.files %}cat -- {{ f }} && {% endfor %}true",
            id="a-loop-over-a-value-repeats-its-text",
        ),
        pytest.param(
            "{% for r in x.repos %}{% for f in r.files %}echo {{ f }}; {% endfor %}{% endfor %}",
            id="nested-loops-repeat-their-text",
        ),
        pytest.param(
            "{% for c in x.v %}echo {{ '$' if c == 'a' else c }}; {% endfor %}",
            id="a-choice-printed-as-a-value",
        ),
        pytest.param(
            "{% for i in [1, 2] %}{% if i % 2 == 0 %}echo {{ x.v }}{% endif %}{% endfor %}",
            id="a-test-on-a-constant",
        ),
        pytest.param("echo {% if x.v %}{{ x.v[0] }}{% endif %}", id="no-text-in-the-branch"),
    ],
)
def test_what_no_value_decides_still_validates(tmp_path: Path, run: str) -> None:
    """Deciding in the shell, repeating a loop's text per item, and printing
    a choice with ``{{ }}`` stay accepted."""
    assert _problems(tmp_path, run) == []


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(
            "alpha=abcdefghijklmnopqrstuvwxyz; cmd=\n{% for c in x.v %}"
            'cmd="$cmd${alpha:$((0{% for _ in c %}+1{% endfor %})):1}"\n'
            '{% endfor %}bash -c "$cmd"',
            id="counted-letters-into-bash",
        ),
        pytest.param("cmd={% for _ in x.v %}x{% endfor %}\n$cmd", id="counted-command-name"),
        pytest.param(
            'cmd=\n{% for c in x.v %}{% for i in [1] %}cmd="${cmd}x"\n{% endfor %}{% endfor %}'
            'bash -c "$cmd"',
            id="repeated-through-a-constant-loop-inside",
        ),
    ],
)
def test_a_script_a_value_repeats_is_checked_as_holding_a_value(tmp_path: Path, run: str) -> None:
    """Review 32's F5: no ``{{ }}`` and no ``{% if %}``, yet the count of a
    loop over a part carried the value into ``bash -c``."""
    problems = _problems(tmp_path, run)
    assert problems and all("a script with values" in p for p in problems), problems


def test_a_value_repeated_script_is_checked_at_run_time_too() -> None:
    """The run-time check (the guarantee) marks the rendered script as
    holding a value, built here without the static check."""
    from runner.config.templates import (
        _SHELL,
        Fields,
        Template,
        UnsafeTemplateError,
        compile_template,
    )

    source = 'cmd=\n{% for c in x.v %}cmd="${cmd}x"\n{% endfor %}bash -c "$cmd"'
    context = {"x": Fields({"v": "ab"})}
    unshaped = Template(source, True, frozenset({"x"}), _SHELL.parse(source))
    assert unshaped.render(context).endswith('bash -c "$cmd"')  # no value printed: unchecked
    shaped = Template(source, True, frozenset({"x"}), _SHELL.parse(source), shaped=True)
    with pytest.raises(UnsafeTemplateError, match=r"\[(executor|interpreter)\]"):
        shaped.render(context)
    plain = "{% for f in x.v %}echo {{ f }}; {% endfor %}"
    compiled, problems = compile_template(plain, shell=True, fields_by_name={"x": None})
    assert problems == [] and compiled is not None and compiled.shaped  # marked when compiled
    assert compiled.render(context) == "echo 'a'; echo 'b'; "  # the mark is never run


def test_an_input_named_loop_is_a_value(tmp_path: Path) -> None:
    """Review 32's F1: ``as: loop`` hid the input from the rule (``loop`` was
    taken for Jinja's own), and review 31's decoder passed."""
    run = "echo {% for c in loop.v %}{% if c == '$' %}${% endif %}{% endfor %}"
    (problem,) = _problems(
        tmp_path, run, top={"inputs": {"acme.x": {"as": "loop", "schema": {"type": "object"}}}}
    )
    assert REFUSAL in problem


def test_a_host_path_may_not_be_decoded_from_a_value(tmp_path: Path) -> None:
    """A decoder in ``save: to:`` spelled ``..`` from a value's characters."""
    to = "out/{% for c in x.v %}{% if c == '.' %}.{% elif c == '/' %}/{% endif %}{% endfor %}x"
    (problem,) = _problems(tmp_path, "true", before=[{"save": "a", "to": to}])
    assert REFUSAL in problem and problem.startswith("agent.environment.hooks[0].on_create[0].to")
    repeated = "out/{% for _ in x.v %}../{% endfor %}x"
    (problem,) = _problems(tmp_path, "true", before=[{"save": "a", "to": repeated}])
    assert "may not repeat its own text" in problem
