"""Where a value may stand in a ``run`` command, attacked rule by rule (found by mutation testing).

The template tests reach the checker through rendering and mostly ask
"refused or not"; a checker that refuses for the wrong reason, at the wrong
place, or follows a wrapper one word too far passed them.  These call
``check_script`` directly and require the exact findings: placeholder,
rule, line, column and detail (the user's only clue to the fix).

``{0}`` and ``{1}`` stand for the sentinels of values 0 and 1.
"""

from __future__ import annotations

import pytest

from runner.config.shell_check import Finding, check_script

SENTINELS = ["'RVtx0'", "'RVtx1'"]

#: (script, tainted variables, findings as (value, rule, line, column, detail))
CASES = [
    # -- wrappers: followed to the command they run, or refused -----------------
    ("nice eval {0}", (), [(0, "evaluating-builtin", 1, 6, "eval")]),
    ("nice nice eval {0}", (), [(0, "evaluating-builtin", 1, 11, "eval")]),
    ("/usr/bin/nice eval {0}", (), [(0, "evaluating-builtin", 1, 15, "eval")]),
    ("nice -n 5 echo {0}", (), [(0, "wrapper", 1, 6, "nice -n")]),
    ("command -p eval {0}", (), [(0, "wrapper", 1, 9, "command -p")]),
    ("time -p echo {0}", (), []),
    ("time -p eval {0}", (), [(0, "evaluating-builtin", 1, 9, "eval")]),
    ("time eval {0}", (), [(0, "evaluating-builtin", 1, 6, "eval")]),
    ("timeout 5 echo {0}", (), []),
    ("timeout 1.5s echo {0}", (), []),
    ("timeout 5 eval {0}", (), [(0, "evaluating-builtin", 1, 11, "eval")]),
    ("timeout x echo {0}", (), [(0, "wrapper", 1, 1, "timeout needs a literal duration")]),
    ("timeout {0}", (), [(0, "wrapper", 1, 1, "timeout needs a literal duration")]),
    ("env A=1 B=x/y echo {0}", (), []),
    ("env A=1 eval {0}", (), [(0, "evaluating-builtin", 1, 9, "eval")]),
    ("env -i echo {0}", (), [(0, "wrapper", 1, 5, "env -i")]),
    ("env {0}", (), [(0, "command-name", 1, 5, "")]),
    ('env A="1" eval {0}', (), [(0, "unknown-command", 1, 5, 'A="1"')]),
    ("A={0} command", (), [(0, "wrapper", 1, 11, "command")]),
    ("A={0} env A=1", (), [(0, "wrapper", 1, 15, "env")]),
    # a wrapper as the last word: nothing to follow, and no word past the end is read
    ("A={0} time", (), [(0, "wrapper", 1, 11, "time")]),
    ("A={0} time -p", (), [(0, "wrapper", 1, 16, "time")]),
    ("A={0} timeout", (), [(0, "wrapper", 1, 11, "timeout needs a literal duration")]),
    ("exec echo {0}", (), [(0, "wrapper", 1, 1, "exec")]),
    # -- test and [ ----------------------------------------------------------
    ("[ {0} = yes ]", (), []),
    ("[ {0} ]", (), []),
    ("[ -n {0} ]", (), []),
    ("[ {0} = x ] && echo ok", (), []),
    ("if [ {0} = y ]; then :; fi", (), []),
    ("test {0} = x", (), []),
    ("[[ {0} == x ]]", (), [(0, "double-bracket", 1, 4, "")]),
    ("[ {0} =~ x ]", (), [(0, "test-operator", 1, 3, "=~")]),
    ("[ -v {0} ]", (), [(0, "test-operator", 1, 6, "-v")]),
    ("test -v {0}", (), [(0, "test-operator", 1, 1, "-v/-R")]),
    ("[ {0} -lt 3 -a 1 = 1 ]", (), [(0, "test-operator", 1, 3, "a compound test")]),
    ("[ ! {0} = x ]", (), [(0, "test-operator", 1, 5, "a compound test")]),
    (
        "[ {0} = {1} ]",
        (),
        [(0, "test-operator", 1, 3, "two values"), (1, "test-operator", 1, 13, "two values")],
    ),
    (
        "test {0} = {1}",
        (),
        [(0, "test-operator", 1, 1, "two values"), (1, "test-operator", 1, 1, "two values")],
    ),
    ('eval "$([ {0} = x ])"', (), [(0, "evaluating-builtin", 1, 1, "eval")]),
    ("echo $(( {0} + 1 ))", (), [(0, "arithmetic", 1, 10, "")]),
    # -- NAME=value ----------------------------------------------------------
    ("A={0}", (), []),
    ("A={0} B={1}", (), []),
    ("(A={0})", (), []),
    ("A={0} echo hi", (), []),
    ("A={0} eval hi", (), [(0, "evaluating-builtin", 1, 11, "eval")]),
    ("A+={0}", (), [(0, "assignment", 1, 1, "")]),
    ("a[1]={0}", (), [(0, "assignment", 1, 1, "")]),
    ("PS4={0}", (), [(0, "shell-control", 1, 1, "PS4")]),
    ("LD_PRELOAD={0}", (), [(0, "shell-control", 1, 1, "LD_PRELOAD")]),
    ("declare A={0}", (), [(0, "declaration", 1, 1, "")]),
    # -- mentions of a variable that holds a value ---------------------------
    ('A={0}; echo "$A"', (), []),
    ("A={0}; A=2", (), []),
    ("A={0}; echo $A", (), [(0, "tainted-variable", 1, 18, "$A: a parameter expansion")]),
    (
        "A={0}; declare A=2",
        (),
        [(0, "tainted-variable", 1, 20, "$A: an assignment that is not a plain NAME=")],
    ),
    (
        "A={0}; A+=x",
        (),
        [(0, "tainted-variable", 1, 12, "$A: an assignment that is not a plain NAME=")],
    ),
    ('echo "$V"', ("V",), []),
    ('echo "${V}"', ("V",), []),
    ('echo "a $V"', ("V",), []),
    ('echo "$V" {0}', ("V",), []),
    ('echo VV "$VV"', ("V",), []),
    ("# $V\necho hi", ("V",), []),
    ("V=1", ("V",), []),
    ('echo "${V:-x}"', ("V",), [(None, "tainted-variable", 1, 9, "$V: a parameter expansion")]),
    ("echo $V", ("V",), [(None, "tainted-variable", 1, 7, "$V: a parameter expansion")]),
    ("echo ${!V}", ("V",), [(None, "tainted-variable", 1, 9, "$V: a parameter expansion")]),
    (
        'eval "$V"',
        ("V",),
        [
            (
                None,
                "tainted-variable",
                1,
                1,
                "$V: an argument of a builtin that evaluates code or takes variable names",
            )
        ],
    ),
    (
        "local V=1",
        ("V",),
        [(None, "tainted-variable", 1, 7, "$V: an assignment that is not a plain NAME=")],
    ),
    (
        "V+=1",
        ("V",),
        [(None, "tainted-variable", 1, 1, "$V: an assignment that is not a plain NAME=")],
    ),
    # -- the statement around the command: containers keep it a plain statement
    ("echo {0} &", (), []),
    ("{ echo {0}; }", (), []),
    ("while echo {0}; do :; done", (), []),
    ("until echo {0}; do :; done", (), []),
    ("case x in a) echo {0};; esac", (), []),
    ("for i in a; do echo {0}; done", (), []),
    ("select x in a; do echo {0}; done", (), []),
    ("f() { echo {0}; }", (), []),
    ("case {0} in a) ;; esac", (), []),
    ("case $(echo {0}) in a) ;; esac", (), []),
    ("echo $(A={0})", (), []),
    ("cat <<<{0}", (), []),
    ("echo a >{0}", (), []),
    ("echo a 2>&{0}", (), [(0, "redirect", 1, 8, ">&")]),
    ("case x in {0}) ;; esac", (), [(0, "case-pattern", 1, 11, "")]),
    ("echo `echo {0}`", (), [(0, "quoted", 1, 7, "backticks")]),
    ("echo ${x:-$(echo {0})}", (), [(0, "expansion", 1, 11, "")]),
    ("declare $(echo {0})", (), [(0, "declaration", 1, 9, "")]),
    # the parser puts a command after "<<EOF |" inside the heredoc's node
    ("cat <<EOF | grep {0}\nhi\nEOF", (), [(0, "heredoc", 1, 11, "heredoc_redirect")]),
    ("cat <<EOF\nV\nEOF", ("V",), [(None, "tainted-variable", 2, 1, "$V: a heredoc")]),
    # -- the command a value is an argument of -------------------------------
    ("echo {0}", (), []),
    ("printf -- {0}", (), []),
    ("printf %s {0}", (), []),
    ("printf {0}", (), [(0, "printf-option", 1, 8, "")]),
    ("printf -v x %s {0}", (), [(0, "evaluating-builtin", 1, 1, "printf -v")]),
    ("printf -vx %s {0}", (), [(0, "evaluating-builtin", 1, 1, "printf -v")]),
    ("bash -c {0}", (), [(0, "shell", 1, 1, "bash")]),
    ("/bin/sh {0}", (), [(0, "shell", 1, 1, "sh")]),
    ("f() { :; }; f {0}", (), [(0, "function", 1, 13, "f")]),
    ("$x {0}", (), [(0, "unknown-command", 1, 1, "$x")]),
    ("{0} x", (), [(0, "command-name", 1, 1, "")]),
    ("e\\val {0}", (), [(0, "unknown-command", 1, 1, "e\\val")]),
    ("read {0}", (), [(0, "evaluating-builtin", 1, 1, "read")]),
]


def findings(script: str, tainted=()) -> list[tuple]:
    text = script.replace("{0}", SENTINELS[0]).replace("{1}", SENTINELS[1])
    found = check_script(text, [s for s in SENTINELS if s in text], tainted)
    return [(f.index, f.rule, f.line, f.column, f.detail) for f in found]


@pytest.mark.parametrize(("script", "tainted", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_position_gets_its_exact_verdict(script, tainted, expected) -> None:
    assert sorted(findings(script, tainted), key=str) == sorted(expected, key=str)


def test_a_finding_message_names_the_position_the_detail_the_rule_and_the_fix() -> None:
    finding = Finding(0, "wrapper", 1, 6, "nice -n")
    assert finding.message == (
        "{{ }} an argument of a command that runs its arguments as a command (nice -n) "
        "[wrapper]: call the program directly (command, builtin, env, nohup, nice, setsid, "
        "time and timeout with a literal duration are followed)"
    )
    assert Finding(0, "double-bracket", 1, 1).message == (
        "{{ }} [[ ]], whose operands bash may evaluate as arithmetic [double-bracket]: "
        "use [ ] (test) instead"
    )


def test_a_script_without_values_or_tainted_names_is_not_parsed() -> None:
    assert check_script("this is ( not bash", []) == []
    assert findings("this is ( not bash {0}") == [(None, "syntax", 1, 9, "")]
