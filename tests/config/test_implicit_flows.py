"""Implicit flows: a test on a value decides what a variable is assigned.

A ``case`` on a value's characters whose branches assign only literals
copies the value into a variable all the same (review 33's F1): that
variable was jq's filter (a step's secret printed), a write's destination
on ``PATH``, a file name under ``/proc``.  ``TaintCheck.controlled`` taints
a variable assigned where a test on a value decides (``if``/``elif``,
``while``/``until``, ``case``, a ``for`` list, the left of ``&&``/``||``, a
``break`` in a loop that carries one), and every one in a script a Jinja
loop over a value shaped.  Arithmetic may still name one assigned only
numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_files import one_step_agent, run_with_values

#: A decoder: each character of the value, one literal branch each.
ALPHABET = "abcdefghijklmnopqrstuvwxyz.,$() \"'-"


def _branches(subject: str, target: str = "f") -> str:
    arms = "".join(f'{json.dumps(ch)}) {target}="${target}"{json.dumps(ch)} ;; ' for ch in ALPHABET)
    return f'case "{subject}" in {arms}esac'


DECODER = "f=\nwhile read -r -N1 c; do " + _branches("$c") + "; done <<< {{ x.v }}\n"


def _problems(tmp_path: Path, run: str) -> list[str]:
    from runner.config import validate_file

    return [p.message for p in validate_file(one_step_agent(tmp_path, run))]


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(DECODER + 'jq -n "$f"', id="case-into-jq-filter"),
        pytest.param(DECODER + 'jq -n -L "$f" .', id="case-into-jq-library-path"),
        pytest.param(DECODER + 'jq -n "$f"', id="case-into-a-file-name"),
        pytest.param(DECODER + 'printf x > "$f"', id="case-into-a-write-destination"),
        pytest.param(
            'f=\nif [ {{ x.v }} = a ]; then f=env; fi\njq -n "$f"',
            id="if-condition",
        ),
        pytest.param(
            'f=\nif [ x = y ]; then f=a; elif [ {{ x.v }} = a ]; then f=env; fi\njq -n "$f"',
            id="elif-condition",
        ),
        pytest.param(
            'f=\nif [ {{ x.v }} = a ]; then :; else f=env; fi\njq -n "$f"',
            id="else-of-an-if-on-a-value",
        ),
        pytest.param('f=\n[ {{ x.v }} = a ] && f=env\njq -n "$f"', id="and-list"),
        pytest.param('f=\n[ {{ x.v }} = a ] || f=env\njq -n "$f"', id="or-list"),
        pytest.param(
            'v={{ x.v }}; f=\nwhile [ "$v" = a ]; do f=env; v=; done\njq -n "$f"',
            id="while-condition",
        ),
        pytest.param(
            'v={{ x.v }}; f=\nuntil [ "$v" != a ]; do f=env; v=b; done\njq -n "$f"',
            id="until-condition",
        ),
        pytest.param(
            'read -r n <<< {{ x.v }}; f=\nfor w in $(seq 1 "$n"); do f="${f}x"; done\njq -n "$f"',
            id="for-list",
        ),
        pytest.param(
            'f=\nfor w in a b; do [ {{ x.v }} = "$w" ] && break; f="${f}x"; done\njq -n "$f"',
            id="break-in-a-loop",
        ),
        pytest.param(
            'f=\nwhile :; do case "$f" in x) break;; esac; [ {{ x.v }} = a ] && continue; '
            'f="${f}x"; done\njq -n "$f"',
            id="continue-in-a-loop",
        ),
        pytest.param(
            'f=\ng=\n[ {{ x.v }} = a ] && g=1\nif [ "$g" = 1 ]; then f=env; fi\njq -n "$f"',
            id="a-chain-of-implicit-flows",
        ),
        # review 34: the status of a test, a number that picks text, a cd
        pytest.param(
            "al=abcdefghij; out=\nwhile read -r -N1 c; do i=0; while (( i < 10 )); do "
            '[ "$c" != "${al:i:1}" ]; out+="${al:i:$?}"; (( i++ )); done; done <<< {{ x.v }}\n'
            'jq -n "$out"',
            id="the-status-of-a-test-cuts-text",
        ),
        pytest.param(
            'out=\n[ {{ x.v }} = a ] | true; case "${PIPESTATUS[0]}" in 0) out=env;; esac\n'
            'jq -n "$out"',
            id="pipestatus",
        ),
        pytest.param(
            "al=abcdefghij; k=0\nwhile read -r -N1 c; do i=0; while (( i < 10 )); do "
            'if [ "$c" = "${al:i:1}" ]; then (( idx[k] = i )); fi; (( i++ )); done; '
            "(( k++ )); done <<< {{ x.v }}\nj=0; out=\nwhile (( j < k )); do (( m = idx[j] )); "
            'out+="${al:m:1}"; (( j++ )); done\njq -n "$out"',
            id="a-number-a-test-decided-picks-a-letter",
        ),
        pytest.param(
            'a=(e n v); m=0\n[ {{ x.v }} = b ] && m=1\nout=${a[m]}\njq -n "$out"',
            id="a-number-a-test-decided-picks-an-element",
        ),
        pytest.param(
            'mkdir -p d; base=$PWD; out=\n[ {{ x.v }} = a ] && cd d\ncase "$PWD" in */d) '
            'out=env;; esac\ncd "$base"\njq -n "$out"',
            id="a-cd-a-test-decided",
        ),
        pytest.param(
            "k=0\n{% for w in x.words %}c=0\n{% for _ in w %}(( c++ ))\n{% endfor %}"
            "(( idx[k] = c ))\n(( k++ ))\n{% endfor %}j=0\nwhile (( j < k )); do "
            "(( m = idx[j] )); printf '%s' \"${AL:m:1}\" >> prog.txt; (( j++ )); done\n"
            "jq -n -f prog.txt",
            id="counts-of-a-shaped-script-into-a-jq-file",
        ),
        # review 33's F1b: no {{ }}, a Jinja loop over a value counts
        pytest.param(
            "f=\n{% for w in x.words %}n=0\n{% for _ in w %}n=$((n+1))\n{% endfor %}"
            'case "$n" in 1) f="${f}."\n;; esac\n{% endfor %}jq -n "$f"',
            id="a-count-in-a-shaped-script",
        ),
    ],
)
def test_a_variable_a_test_on_a_value_assigns_holds_the_value(tmp_path: Path, run: str) -> None:
    problems = _problems(tmp_path, run)
    assert problems and all("a script with values" in p for p in problems), problems


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(
            "n=0\nif [ {{ x.v }} = a ]; then n=1; fi\necho $(( n + 1 ))",
            id="a-number-decided-by-a-value-in-arithmetic",
        ),
        pytest.param(
            "n=0\n{% for f in x.files %}cp -- {{ f }} out/ && n=$((n + 1))\n{% endfor %}"
            'echo "copied $n"',
            id="a-counter-in-a-shaped-script",
        ),
        pytest.param(
            'cp -- {{ x.v }} out/\nstatus=$?\n[ "$?" -eq 0 ] && echo copied\necho "status $status"',
            id="a-status-kept-and-tested",
        ),
        pytest.param(
            'mode=debug\nif [ {{ x.v }} = release ]; then mode=release; fi\necho "building $mode"',
            id="a-mode-printed-as-data",
        ),
    ],
)
def test_what_a_decided_variable_may_still_do(tmp_path: Path, run: str) -> None:
    assert _problems(tmp_path, run) == []


def test_a_case_decoder_prints_no_secret_through_jq(tmp_path: Path) -> None:
    """Review 33's F1a as a user meets it, through the installed CLI: a
    ``case`` decoder made a value jq's filter and printed the step's secret
    (``$ENV.TOKEN``, also as code points no scrubber knew)."""
    path = one_step_agent(
        tmp_path,
        DECODER + 'jq -n "$f" > canary',
        secrets={"TOKEN": "tok"},
        top={"secrets": {"tok": {"from_env": "IMPLICIT_FLOW_TOKEN"}}},
        after=[{"save": "canary", "to": "saved", "missing_ok": True}],
    )
    values = {"acme.x": {"v": "($env.token|explode), $env.token"}}
    run = run_with_values(tmp_path, path, values, {"IMPLICIT_FLOW_TOKEN": "hunter2-implicit"})
    assert run.returncode == 2, run.stdout + run.stderr
    assert "a script with values" in run.stderr
    assert not (tmp_path / "saved").exists()


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(
            ": > p\ncase {{ x.v }} in a) printf /proc/self/environ >> p;; esac\n"
            'P="$(< p)"\nod -c "$P"',
            id="file-content-into-a-read-path",
        ),
        pytest.param(
            ": > d\ncase {{ x.v }} in a) printf site.pth >> d;; esac\n"
            'D="$(cat d)"\nprintf x > "$D"',
            id="file-content-into-a-write-destination",
        ),
        pytest.param(
            'case {{ x.v }} in a) umask 077;; esac\nm=$(umask)\ncp -- a "out$m"',
            id="umask-into-a-program-word",
        ),
        pytest.param(
            'start=$SECONDS\ncase {{ x.v }} in a) sleep 1;; esac\ncd "d$SECONDS"',
            id="timing-into-cd",
        ),
        pytest.param('echo {{ x.v }}\nn=$((RANDOM))\nod -c "f$n"', id="arithmetic"),
    ],
)
def test_a_clean_variable_computed_at_run_time_reaches_no_program(tmp_path: Path, run: str) -> None:
    """Review 35: a test on a value changed state no taint follows (a file's
    content, umask, the time), read back into a clean variable that then
    named /proc/self/environ for od or a .pth for a redirect."""
    assert any("[computed-word]" in p or "computed" in p for p in _problems(tmp_path, run))


@pytest.mark.parametrize(
    "run",
    [
        'out=build/{{ x.v }}\nmkdir -p -- "$out"',
        'd=out\nfor f in a.txt b.txt; do cp -- "$f" "$d/"; done\necho {{ x.v }}',
        'cp -- a.txt "$HOME/a.txt"\necho {{ x.v }}',
        'echo {{ x.v }}\nn=$(wc -l < list.txt)\necho "lines: $n"',
    ],
)
def test_literal_words_and_the_environment_still_reach_programs(tmp_path: Path, run: str) -> None:
    assert _problems(tmp_path, run) == []
