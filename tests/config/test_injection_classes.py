"""Every class of injection the security review found, attacked at both layers.

The static check (``runner validate``) refuses early with a position; the
run-time check in ``Template.render`` is the guarantee, so each class is
also rendered through a template built *without* the static check and must
be refused there too.  Accepted positions are run in real bash with hostile
values: the value arrives as one word and nothing runs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

from runner.config.templates import (
    _SHELL,
    Fields,
    Template,
    UnsafeTemplateError,
    compile_template,
)

HOSTILE = "$(touch CANARY1)`touch CANARY2`;touch CANARY3 a[$(touch CANARY4)]'\"\n-x *"

#: (template, tainted env names) -> refused at validate and at run time.
CLASSES = [
    pytest.param("for (( i={{ x.v }}; i<1; i++ )); do :; done", (), id="c-for-arithmetic"),
    pytest.param('[[ a == "]]" ]] && echo "a {{ x.v }}"', (), id="double-bracket-quote-state"),
    pytest.param("f() { eval {{ x.v }}; }; f", (), id="eval-in-function"),
    pytest.param(">/dev/null eval {{ x.v }}", (), id="redirect-before-eval"),
    pytest.param("exec {{ x.v }}", (), id="exec"),
    pytest.param("cat <({{ x.v }})", (), id="process-substitution-command"),
    pytest.param("e$()val {{ x.v }}", (), id="glued-command-name"),
    pytest.param("alias e=eval\nshopt -s expand_aliases\ne {{ x.v }}", (), id="alias"),
    pytest.param("A=1 alias e=eval\necho {{ x.v }}", (), id="alias-after-assignment"),
    pytest.param('echo() { eval "$1"; }\necho {{ x.v }}', (), id="function-shadows-echo"),
    pytest.param("(# it's\neval {{ x.v }})", (), id="comment-after-paren"),
    pytest.param("echo a \\\n# it's\neval {{ x.v }}", (), id="comment-after-continuation"),
    pytest.param("declare -g -i n\nn={{ x.v }}", (), id="declare-integer-then-assign"),
    pytest.param("declare -n ref={{ x.v }}", (), id="nameref"),
    pytest.param("f() { local {{ x.v }}; }; f", (), id="local"),
    pytest.param("PS4={{ x.v }}\nset -x\ntrue", (), id="ps4"),
    pytest.param('n={{ x.v }}\necho "${!n}"', (), id="indirect-expansion"),
    pytest.param("n={{ x.v }}\necho $(( n ))", (), id="arithmetic-on-variable"),
    pytest.param("n={{ x.v }}\necho $n", (), id="unquoted-variable"),
    pytest.param("echo $(( V + 0 ))", ("V",), id="env-value-in-arithmetic"),
    pytest.param("trap 'echo $V' EXIT", ("V",), id="env-value-in-trap-text"),
    pytest.param("{% for i in x.items %}'{% endfor %}{{ x.v }}", (), id="loop-count-quotes"),
    pytest.param("[ {{ x.v }} {{ x.w }} ]", (), id="test-operator-from-value"),
    pytest.param("printf {{ x.v }} {{ x.w }}", (), id="printf-option-from-value"),
    pytest.param('eval "$(echo {{ x.v }})"', (), id="eval-of-substitution"),
    pytest.param("$(echo {{ x.v }})", (), id="substitution-as-command"),
    pytest.param("nice -n 5 eval {{ x.v }}", (), id="wrapper-with-options"),
    pytest.param("nice -n10 bash -c {{ x.v }}", (), id="nice-glued-option"),
    pytest.param("nice --adjustment=5 -- sh -c {{ x.v }}", (), id="nice-long-option"),
    pytest.param("timeout -k 5 10 eval {{ x.v }}", (), id="timeout-kill-after"),
    pytest.param("timeout -s KILL --foreground 9 bash -c {{ x.v }}", (), id="timeout-options"),
    pytest.param("timeout -k {{ x.w }} 10 echo {{ x.v }}", (), id="timeout-option-from-value"),
    pytest.param("chroot / {{ x.v }}", (), id="wrapper-runs-the-value"),
    pytest.param("flock /tmp/lock {{ x.v }}", (), id="flock-runs-the-value"),
    pytest.param("bash -c {{ x.v }}", (), id="shell-c"),
    pytest.param("echo `cat {{ x.v }}`", (), id="backticks"),
    pytest.param("echo {{ x.v }} >&{{ x.w }}", (), id="fd-duplication"),
    pytest.param("case a in {{ x.v }}) echo;; esac", (), id="case-pattern"),
    pytest.param("cat <<EOF\n$(echo {{ x.v }})\nEOF", (), id="substitution-in-heredoc"),
    # tree-sitter ends these heredocs where bash does not (found by hand, after the rewrite):
    pytest.param("cat <<EOF\nEOF \necho {{ x.v }}\nEOF", (), id="heredoc-end-trailing-space"),
    pytest.param("cat <<EOF\na\\\nEOF\necho {{ x.v }}\nEOF", (), id="heredoc-joined-line"),
    pytest.param("echo ${x:-{{ x.v }}}", (), id="parameter-default"),
    pytest.param("a=({{ x.v }})", (), id="array"),
    pytest.param("a[{{ x.v }}]=1", (), id="subscript"),
    # a function anywhere in a script with values (part 2: it rebinds a name)
    pytest.param("f() { echo hi; }\nf\necho {{ x.v }}", (), id="function-elsewhere"),
]


#: Jinja that could rewrite a value after quoting or hide it: refused by
#: validate; at run time either refused or harmless (the value never runs).
JINJA_CLASSES = [
    "{% autoescape true %}echo {{ x.v }}{% endautoescape %}",
    '{% filter replace("\'", "") %}echo {{ x.v }}{% endfilter %}',
    "echo {{ x.v|safe }}",
    "echo {{ x.v|tojson }}",
    "echo {% raw %}{{ x.v }}{% endraw %}",
    "{% macro m() %}{% endmacro %}echo {{ x.v }}",
    "{% set s %}'{{ x.v }}'{% endset %}echo {{ s }}",
    "echo {{ x.v.upper() }}",
]


@pytest.mark.parametrize("source", JINJA_CLASSES)
def test_jinja_outside_the_allow_list_is_refused_and_harmless(tmp_path, source) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source))
    try:
        script = template.render(_values())
    except UnsafeTemplateError:
        return
    subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, timeout=10)
    assert not list(tmp_path.glob("CANARY*")), script


def test_a_value_rewritten_after_quoting_is_refused_at_run_time() -> None:
    """autoescape turns the quotes of a quoted value into &#39;: the command
    would not hold what the check saw, so rendering refuses."""
    source = "{% autoescape true %}echo {{ x.v }}{% endautoescape %}"
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source))
    with pytest.raises(UnsafeTemplateError, match="changed after it was quoted"):
        template.render(_values())


def test_a_markup_value_is_quoted_as_plain_text() -> None:
    """|safe makes a Markup, whose methods HTML-escape: the quoting must not."""
    source = "echo {{ x.v|safe }}"
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source))
    assert template.render(_values()) == "echo " + _quoted(HOSTILE)


def test_a_static_command_with_a_tainted_env_value_is_checked_at_run_time() -> None:
    """No Jinja in the command, but the step's env holds a value."""
    template = Template("echo $(( V + 0 ))", True, frozenset(), None, frozenset({"V"}))
    with pytest.raises(UnsafeTemplateError, match=r"\[arithmetic\]"):
        template.render({})


def _values(items: int = 3) -> dict:
    return {"x": Fields({"v": HOSTILE, "w": "-v", "items": list(range(items))})}


@pytest.mark.parametrize(("source", "tainted"), CLASSES)
def test_each_class_is_refused_by_validate(source, tainted) -> None:
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, tainted_env=tainted
    )
    assert template is None and problems


@pytest.mark.parametrize(("source", "tainted"), CLASSES)
def test_each_class_is_refused_at_run_time_without_the_static_check(source, tainted) -> None:
    """The guarantee does not lean on ``runner validate``: a template built
    straight from Jinja's parse, skipping every static check, still refuses."""
    try:
        tree = _SHELL.parse(source)
    except Exception:  # not even Jinja: nothing could render
        return
    template = Template(source, True, frozenset({"x"}), tree, frozenset(tainted))
    with pytest.raises(UnsafeTemplateError, match="refused before it ran"):
        template.render(_values())


def test_a_combination_the_static_check_cannot_see_is_refused_at_run_time() -> None:
    """Zero and two loop iterations parse, so validate accepts; three do not."""
    source = "echo {% for i in x.items %}'{% endfor %}{{ x.v }}"
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == []
    assert template.render(_values(items=2)) == "echo ''" + _quoted(HOSTILE)
    with pytest.raises(UnsafeTemplateError, match=r"\[syntax\]"):
        template.render(_values(items=3))


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


SAFE = [
    "echo {{ x.v }}",
    "printf '%s\\n' {{ x.v }} > out.txt",
    "cat <<< {{ x.v }}",
    'NAME={{ x.v }}\necho "$NAME" "${NAME}"',
    'echo "$(printf %s {{ x.v }})"',
    "[ {{ x.v }} = yes ] || echo no",
    "test -n {{ x.v }}",
    "timeout 5 echo {{ x.v }}",
    # followed wrappers' literal options (review 25: these were refused)
    "timeout -k 5 -s KILL --preserve-status 10 echo {{ x.v }}",
    "timeout --kill-after=5 10 echo {{ x.v }}",
    "nice -n 5 echo {{ x.v }}",
    "nice -10 echo {{ x.v }}",
    "nice --adjustment=3 -- echo {{ x.v }}",
    'sleep 0 & wait -n -p pid; echo {{ x.v }} "$pid"',
    "printf -- {{ x.v }} {{ x.w }}",
    "command echo {{ x.v }}",
    "env A=1 echo {{ x.v }}",
    "if true; then echo --={{ x.v }}; fi",
    'case {{ x.v }} in *) echo "matched";; esac',
    "{% for i in x.items %}echo {{ i }} {{ x.v }}\n{% endfor %}",
]


@pytest.mark.parametrize("source", SAFE)
def test_accepted_positions_run_in_bash_without_running_the_value(tmp_path, source) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == []
    script = template.render(_values())
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=10,
    )
    assert not list(tmp_path.glob("CANARY*")), script
    if source == "echo {{ x.v }}" or source.startswith("NAME="):
        assert HOSTILE in result.stdout


def test_a_templated_env_value_cannot_set_a_shell_control_variable(tmp_path: Path) -> None:
    from runner.config import validate_file

    document = {
        "version": 1,
        "inputs": {"i": {"as": "x", "schema": {"type": "object"}}},
        "agent": {
            "model": "m",
            "environment": {
                "sandbox": "local",
                "hooks": [
                    {
                        "name": "h",
                        "on_create": [{"run": "true", "env": {"BASH_ENV": "{{ x.v }}"}}],
                    }
                ],
            },
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(json.dumps(document))
    (problem,) = validate_file(path)
    assert "BASH_ENV" in problem.message and "reads it as code or options" in problem.message


def test_run_time_refusal_through_the_cli_exits_2_and_runs_nothing(tmp_path: Path) -> None:
    """validate accepts (two iterations parse), run with three items is refused
    before the command runs: exit 2, no canary, the earlier step ran."""
    document = {
        "version": 1,
        "inputs": {
            "acme.x": {
                "as": "x",
                "schema": {
                    "type": "object",
                    "properties": {"v": {"type": "string"}, "items": {"type": "array"}},
                },
            }
        },
        "agent": {
            "model": "m",
            "environment": {
                "sandbox": "local",
                "hooks": [
                    {
                        "name": "first",
                        "on_create": [{"run": "touch first-step-ran"}],
                        "on_destroy": [{"save": "first-step-ran", "to": "saved"}],
                    },
                    {
                        "name": "refused",
                        "on_create": [{"run": "echo {% for i in x.items %}'{% endfor %}{{ x.v }}"}],
                    },
                ],
            },
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(json.dumps(document))
    runner = RUNNER_CLI
    validate = subprocess.run([*runner, "validate", str(path)], capture_output=True, text=True)
    assert validate.returncode == 0, validate.stderr
    values = tmp_path / "values.json"
    values.write_text(json.dumps({"acme.x": {"v": "$(touch CANARY)", "items": [1, 2, 3]}}))
    run = subprocess.run(
        [*runner, "run", str(path), "--inputs", str(values), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "refused before it ran" in run.stderr
    assert "CANARY" not in run.stderr.replace("$(touch CANARY)", "")
    assert (tmp_path / "saved").exists()  # the earlier hook ran, and its on_destroy
    assert not list(tmp_path.rglob("CANARY*"))
