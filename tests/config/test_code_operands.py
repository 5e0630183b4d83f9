"""A value where a data program reads code (review 19, F2): jq's filter.

jq may receive a value in the default mode, but its filter, its ``-f`` file
and its ``-L`` module path are code, and an operand before ``--`` may be an
option (``--run-tests`` runs jq's input as programs).  Each attack below is
refused by the checker, and with the check switched off it runs in real
bash and prints a step secret shifted by one character, past the scrubber;
the safe patterns (``--arg``, stdin, operands after ``--``) validate and
print the value as data.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from agent_files import one_step_agent
from conftest import RUNNER_CLI

from runner.config.shell import checker as shell_check
from runner.config.shell.checker import check_script
from runner.config.templates import _SHELL, Fields, Template, compile_template

#: jq code that prints $TOKEN with every character shifted by one.
SHIFT = "$ENV.TOKEN | explode | map(. + 1) | implode"
SECRET = "hunter2secret"
SHIFTED = "ivoufs3tfdsfu"
#: A --run-tests file: the program, its input, an expected output jq compares
#: with what it got (and prints both).
TESTS = f'{SHIFT}\nnull\n"x"\n'


def _values(tmp_path: Path) -> dict:
    (tmp_path / "evil.jq").write_text(SHIFT + "\n")
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / "util.jq").write_text(f"def f: {SHIFT};\n")
    return {
        "x": Fields(
            {
                "v": SHIFT,
                "path": str(tmp_path / "evil.jq"),
                "lib": str(tmp_path / "lib"),
                "opt": "--run-tests",
                "tests": TESTS,
                "module": f"def f: {SHIFT};",
            }
        )
    }


#: (template, rule, detail): refused; each runs SHIFT without the check.
ATTACKS = [
    ("jq -n {{ x.v }}", "code-operand", "jq's filter"),
    ("jq -r {{ x.v }} - <<< 1", "code-operand", "jq's filter"),
    ("jq -n -f {{ x.path }}", "code-operand", "jq reads code from this file or path"),
    ("jq -nf {{ x.path }}", "code-operand", "jq reads code from this file or path"),
    ("jq --from-file {{ x.path }} -n", "code-operand", "jq reads code from this file or path"),
    (
        "jq -f /dev/stdin -n <<< {{ x.v }}",
        "code-operand",
        "jq -f /dev/stdin reads its program from stdin",
    ),
    (
        "printf '%s\\n' {{ x.v }} > p.jq; jq -n -f p.jq",
        "code-operand",
        "jq -f p.jq: a file a value was written to",
    ),
    (
        "jq -f <(printf '%s\\n' {{ x.v }}) -n",
        "code-operand",
        "jq reads code from this file or path",
    ),
    (
        "jq -L {{ x.lib }} -n 'include \"util\"; f'",
        "code-operand",
        "jq reads code from this file or path",
    ),
    (
        "jq -n '$ARGS' --args {{ x.opt }} <<< {{ x.tests }}",
        "code-operand",
        "a jq operand before --",
    ),
    ("jq --run-tests <<< {{ x.tests }}", "code-operand", "jq --run-tests runs what it reads"),
    # jq loads modules it is not given: one its filter includes, and ~/.jq
    (
        "printf '%s\\n' {{ x.module }} > util.jq; jq -L . -n 'include \"util\"; f'",
        "file-flow",
        "jq: this script writes a value to a file jq may read",
    ),
    (
        "cd ~; printf '%s\\n' {{ x.module }} > .jq; jq -n 'f'",
        "file-flow",
        # since review 24's K1 the cd into HOME is refused first
        "cd ~: where programs are found",
    ),
]

#: Refused as well: spellings jq 1.7 and later read so (src/main.c: a program
#: after ``--``, ``-L`` among combined short options); the 1.6 the tests run
#: stops at them with a usage error.
NEWER_SPELLINGS = [
    ("jq -nr -- {{ x.v }}", "code-operand", "jq's filter"),
    (
        "jq -nrL {{ x.lib }} 'include \"util\"; f'",
        "code-operand",
        "jq reads code from this file or path",
    ),
]

#: The documented safe patterns: accepted, and they print the value as data.
SAFE = [
    "jq -n --arg v {{ x.v }} '$v'",
    "jq -rn --arg v {{ x.v }} '{v: $v}' | wc -c",
    "jq -R . <<< {{ x.v }}",
    "printf '%s\\n' {{ x.v }} | jq -R .",
    "jq -n '$ARGS.positional' --args -- {{ x.v }} {{ x.opt }}",
    "jq -n '$t' --rawfile t {{ x.path }}",
    "jq -n -f prog.jq --arg v {{ x.v }}",
    "printf '%s\\n' {{ x.v }} > v.txt; jq -R . v.txt",
]


def _run(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TOKEN": SECRET, "HOME": str(tmp_path)}
    return subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )


def test_jq_is_on_the_test_machine() -> None:
    """The exploits below run the real jq; without it they would prove nothing."""
    assert shutil.which("jq"), "jq is needed to run these tests"


@pytest.mark.parametrize(("source", "rule", "detail"), ATTACKS + NEWER_SPELLINGS)
def test_a_value_where_jq_reads_code_is_refused(source, rule, detail) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any(f"({detail}) [{rule}]" in p.message for p in problems), problems


@pytest.mark.parametrize(("source", "rule", "detail"), ATTACKS)
def test_each_jq_attack_is_a_real_exploit_without_the_check(
    tmp_path, monkeypatch, source, rule, detail
) -> None:
    monkeypatch.setattr(shell_check, "check_script", lambda *args, **kwargs: [])
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source), frozenset())
    result = _run(tmp_path, template.render(_values(tmp_path)))
    assert SHIFTED in result.stdout + result.stderr, (source, result)


@pytest.mark.parametrize("source", SAFE)
def test_the_safe_jq_patterns_validate_and_keep_the_value_data(tmp_path, source) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [] and template is not None, problems
    (tmp_path / "prog.jq").write_text("$v\n")
    result = _run(tmp_path, template.render(_values(tmp_path)))
    assert result.returncode == 0, result
    assert SHIFTED not in result.stdout and "ivoufs" not in result.stdout, result


@pytest.mark.parametrize(
    ("source", "detail"),
    [
        ("jq --arg n $X -n '$n' <<< {0}", "jq $X"),  # unquoted: may be no word or two
        ('jq "$F" . <<< {0}', 'jq "$F"'),  # may be -f, or --run-tests
    ],
)
def test_a_jq_word_not_fixed_before_the_script_runs_is_refused(source, detail) -> None:
    (finding,) = check_script(source.format("'RVtx0'"), ["'RVtx0'"])
    assert (finding.rule, finding.detail) == ("option-word", detail)


def test_strict_mode_leaves_jq_to_its_author() -> None:
    """A consumer is trusted with its values (docs/shell-rules.md, out of scope)."""
    assert check_script("jq -n 'RVtx0'", ["'RVtx0'"], consumers=["jq"]) == []


def test_review_19s_case_from_the_installed_cli(tmp_path: Path) -> None:
    """F2 as the review ran it: runner validate refuses it, naming the rule."""
    path = one_step_agent(
        tmp_path,
        "jq -n {{ x.v }}",
        secrets={"TOKEN": "tok"},
        top={"secrets": {"tok": {"from_env": "MYTOK"}}},
    )
    result = subprocess.run([*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True)
    assert result.returncode != 0 and "[code-operand]" in result.stderr, result.stderr
    assert "jq's filter" in result.stderr


#: Review 24, K4: a value chooses which environment variable jq or printenv
#: prints, and a step's secret is one (``secrets: {TOKEN: tok}``); printed
#: reversed, it passes the scrubber.  (template, consumers or None, detail):
#: refused in the mode given; with the check off each prints SECRET reversed.
ENVIRONMENT_ATTACKS = [
    ("jq -rn --arg k {{ x.k }} '$ENV[$k]' | rev", None, "($ENV)"),
    ("jq -rn --arg k {{ x.k }} '$ENV[$k]' | rev", ["jq", "rev"], "($ENV)"),
    ("jq -n --arg k {{ x.k }} '$ENV[$k] | explode | reverse | implode'", None, "($ENV)"),
    ("jq -rn --arg k {{ x.k }} 'env[$k]' | rev", None, "(env)"),
    ("jq -rn --arg k {{ x.k }} 'env | .[$k]' | rev", ["jq", "rev"], "(env)"),
    ("jq -rn --arg k {{ x.k }} '$ENV | getpath([$k])' | rev", None, "($ENV)"),
    (
        "jq -rn --arg k {{ x.k }} '$ENV | to_entries[] | select(.key == $k) | .value' | rev",
        None,
        "($ENV)",
    ),
    ("jq -rn --arg k {{ x.k }} '$ ENV[$k]' | rev", None, "($ ENV)"),  # jq 1.6 reads it
    ("jq -rR '$ENV[.]' <<< {{ x.k }} | rev", None, "($ENV)"),
    ("K={{ x.k }} jq -rn '$ENV[env.K]' | rev", None, "($ENV)"),
    ("jq -rn '$ENV[$ARGS.positional[0]]' --args -- {{ x.k }} | rev", None, "($ENV)"),
    ("printenv -- {{ x.k }} | rev", ["printenv", "rev"], "printenv prints the variable"),
    ("printenv {{ x.k }} | rev", ["printenv", "rev"], "printenv prints the variable"),
]

#: A value beside jq that reads no variable it chose: accepted, in both modes.
ENVIRONMENT_SAFE = [
    "jq -rn --arg k {{ x.k }} '$k'",
    "jq -n --arg k {{ x.k }} '{a: $k}'",
    "jq -rn --arg k {{ x.k }} '$ENV.HOME, $k'",
    "jq -rn --arg e {{ x.k }} '{env: $e} | .env'",
    "K={{ x.k }} jq -rn '$ENV.K'",
]


@pytest.mark.parametrize(("source", "consumers", "detail"), ENVIRONMENT_ATTACKS)
def test_a_value_may_not_choose_the_variable_printed(source, consumers, detail) -> None:
    _, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, consumers=consumers
    )
    assert any(detail in p.message and "[code-operand]" in p.message for p in problems), problems


@pytest.mark.parametrize(("source", "consumers", "detail"), ENVIRONMENT_ATTACKS)
def test_each_variable_choice_prints_the_secret_without_the_check(
    tmp_path, monkeypatch, source, consumers, detail
) -> None:
    monkeypatch.setattr(shell_check, "check_script", lambda *args, **kwargs: [])
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source), frozenset())
    result = _run(tmp_path, template.render({"x": Fields({"k": "TOKEN"})}))
    assert SECRET[::-1] in result.stdout, (source, result)


@pytest.mark.parametrize("consumers", [None, ["jq"]])
@pytest.mark.parametrize("source", ENVIRONMENT_SAFE)
def test_jq_reading_no_chosen_variable_stays_allowed(tmp_path, source, consumers) -> None:
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, consumers=consumers
    )
    assert problems == [] and template is not None, problems
    result = _run(tmp_path, template.render({"x": Fields({"k": "TOKEN"})}))
    assert result.returncode == 0 and "TOKEN" in result.stdout, result
    assert SECRET not in result.stdout, result


#: Review 37's F6: a dump of every variable, or a process's environment read
#: from /proc, filtered by a value that chooses which variable is printed
#: (and how: four characters a line passed the scrubber).
ENVIRONMENT_DUMPS = [
    "set | grep -o -- {{ x.k }}",
    "export | grep -o -- {{ x.k }}",
    "declare | grep -o -- {{ x.k }}",
    "grep -ao -- {{ x.k }} /proc/self/environ",
    # (a < opened for a program reads nothing once it runs: bash reads it here)
    "while read -r -d '' v; do echo \"$v\"; done < /proc/self/environ | grep -o -- {{ x.k }}",
    "grep -ao -- {{ x.k }} /pro?/self/env*",
    "cd / && grep -ao -- {{ x.k }} proc/self/environ",
    # review 40's F3 and F4: /dev/fd/.. is /proc/self; a jq with no value dumps
    "cat /dev/fd/../environ | tr '\\0' '\\n' | grep -o -- {{ x.k }}",
    "jq -rn 'env | to_entries[] | \"\\(.key)=\\(.value)\"' | grep -o -- {{ x.k }}",
    "jq -rn --rawfile e /proc/self/environ --arg k {{ x.p }} "
    "'$e | split(\"\\u0000\")[] | select(startswith($k))'",
]


@pytest.mark.parametrize("consumers", [None, ["grep", "jq"]])
@pytest.mark.parametrize("source", ENVIRONMENT_DUMPS)
def test_a_value_may_not_filter_a_dump_of_the_environment(source, consumers) -> None:
    _, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, consumers=consumers
    )
    assert any("[environment-dump]" in p.message for p in problems), problems


@pytest.mark.parametrize("source", ENVIRONMENT_DUMPS)
def test_each_dump_prints_the_secret_without_the_check(tmp_path, monkeypatch, source) -> None:
    monkeypatch.setattr(shell_check, "check_script", lambda *args, **kwargs: [])
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source), frozenset())
    values = {"x": Fields({"k": 'TOKEN=["a-z0-9]*', "p": "TOKEN="})}
    result = _run(tmp_path, template.render(values))
    assert SECRET in result.stdout, (source, result)


@pytest.mark.parametrize(
    "source",
    [
        "readonly | grep -c -- {{ x.k }}",
        "typeset | grep -c -- {{ x.k }}",
        "cat -- {{ x.k }} /proc/self/mem",
        # through a variable set (or looped) to a /proc path
        'p=/proc/self; cat "$p/environ" | grep -o -- {{ x.k }}',
        'for p in /proc/self; do cat "$p/environ"; done | grep -- {{ x.k }}',
        "ln -s /tmp t; wc -c t/*; echo {{ x.k }}",
    ],
)
def test_other_dumps_are_refused_too(source) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[environment-dump]" in p.message for p in problems), problems


@pytest.mark.parametrize(
    "source",
    [
        "grep -c processor /proc/cpuinfo; echo {{ x.k }}",
        "set -o pipefail; echo {{ x.k }}",
        "cd out && wc -c src/*; echo {{ x.k }}",
        'printf "%s\\n" "$HOME" {{ x.k }}',
    ],
)
def test_reading_no_environment_stays_allowed(source) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems


@pytest.mark.parametrize(
    ("run", "consumers"),
    [
        ("jq -rn --arg k {{ x.k }} '$ENV[$k]' | rev", None),
        ("printenv -- {{ x.n }} | rev", ["printenv", "rev"]),
    ],
)
def test_review_24s_k4_cases_from_the_installed_cli(tmp_path: Path, run, consumers) -> None:
    """E5 and E1s as the review ran them: runner validate refuses them."""
    top: dict = {"secrets": {"tok": {"from_env": "MYTOK"}}}
    if consumers:
        top["consumers"] = consumers
    path = one_step_agent(tmp_path, run, secrets={"TOKEN": "tok"}, top=top)
    result = subprocess.run([*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True)
    assert result.returncode != 0 and "[code-operand]" in result.stderr, result.stderr


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('echo {{ x.v }}\nf=.name\njq -r "$f" data.json', id="a-variable-filter"),
        pytest.param('echo {{ x.v }}\njq -r "$(cat f.txt)" data.json', id="a-computed-filter"),
        pytest.param(
            "echo {{ x.v }}\nprintf '.a' > p.jq\njq -f p.jq data.json",
            id="a-program-file-it-writes",
        ),
        pytest.param(
            "echo {{ x.v }}\ncp x.jq lib/m.jq\njq -L lib -n 'include \"m\"; .'",
            id="a-library-it-writes",
        ),
        pytest.param(
            'echo {{ x.v }}\nd=out\nprintf x > "$d"/p.jq\njq -f p.jq data.json',
            id="a-program-file-among-files-it-names-at-run-time",
        ),
        # review 36: jq's own stdin, fed by a redirect, a here-string or a pipe
        pytest.param(
            'printf "%s" {{ x.v }} > f\njq -n -f /dev/stdin < f', id="dev-stdin-from-a-redirect"
        ),
        pytest.param("echo {{ x.v }}\njq -n --from-file /dev/fd/0 < f", id="dev-fd-0"),
        pytest.param("echo {{ x.v }}\njq -n -f /dev/fd/3 3< f", id="dev-fd-3"),
        pytest.param("echo {{ x.v }}\njq -n -f /proc/self/fd/0 < f", id="proc-self-fd"),
        pytest.param("echo {{ x.v }}\n{ jq -n -f /dev/stdin; } < f", id="a-group-redirected"),
        pytest.param('echo {{ x.v }}\nc=x\njq -n -f /dev/stdin <<< "$c"', id="here-string"),
        pytest.param("echo {{ x.v }}\njq -n -f - < f", id="dash"),
        pytest.param("echo {{ x.v }}\njq -n -f ../p.jq", id="a-parent-folder"),
        # the glued long forms, which jq 1.6 and 1.7 refuse and a later jq may read
        pytest.param("echo {{ x.v }}\njq -n --from-file=/dev/stdin < f", id="from-file-glued"),
        pytest.param(
            "echo {{ x.v }}\nprintf x > m.jq\njq -n --library-path=. 'include \"m\"; .'",
            id="library-path-glued",
        ),
    ],
)
def test_in_a_script_with_values_jq_runs_only_the_authors_program(source) -> None:
    """Reviews 33-35 copied a value into a variable by ways the taint missed
    (case branches, counts, $?, file contents, umask, timing) and made it
    jq's filter or -f file; beside a value, jq's program is a fixed word or
    a file this script does not write."""
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[code-operand]" in p.message and "jq's" in p.message for p in problems), problems


@pytest.mark.parametrize(
    "source",
    [
        "echo {{ x.v }}\njq -r .name data.json",
        "echo {{ x.v }}\njq -f .github/transform.jq data.json",
        "jq -r .name -- {{ x.v }}",
    ],
)
def test_the_authors_jq_program_still_runs_beside_a_value(source) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
