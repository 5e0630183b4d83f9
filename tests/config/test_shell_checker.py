"""Where a value may stand in a ``run`` command, attacked rule by rule, in-process.

The template tests reach the checker through rendering and mostly ask
"refused or not"; a checker that refuses for the wrong reason, at the wrong
place, or follows a wrapper one word too far passed them.  These call
``check_script`` directly and require the exact findings: placeholder,
rule, line, column and detail (the user's only clue to the fix).

``{0}`` and ``{1}`` stand for the sentinels of values 0 and 1.
"""

from __future__ import annotations

import pytest

from runner.config.shell.checker import Finding, check_script

SENTINELS = ["'RVtx0'", "'RVtx1'"]
#: The detail of wait's refusal of a computed word before --.
W = 'wait "$id" before --: write wait -- "$id"'

#: (script, tainted variables, findings as (value, rule, line, column, detail))
CASES = [
    # -- wrappers: followed to the command they run, or refused -----------------
    ("nice eval {0}", (), [(0, "evaluating-builtin", 1, 6, "eval")]),
    ("nice nice eval {0}", (), [(0, "evaluating-builtin", 1, 11, "eval")]),
    ("/usr/bin/nice eval {0}", (), [(0, "evaluating-builtin", 1, 15, "eval")]),
    ("nice -n 5 echo {0}", (), []),  # nice's and timeout's literal options are skipped
    ("nice -n 5 eval {0}", (), [(0, "evaluating-builtin", 1, 11, "eval")]),
    ("nice -n {0} echo hi", (), [(0, "wrapper", 1, 6, "nice -n needs a literal argument")]),
    ("nice -q echo {0}", (), [(0, "wrapper", 1, 6, "nice -q")]),
    ("timeout -k 5 -s TERM 9 eval {0}", (), [(0, "evaluating-builtin", 1, 24, "eval")]),
    ("timeout -k x 9 echo {0}", (), [(0, "wrapper", 1, 9, "timeout -k needs a literal argument")]),
    # GNU nice reads ' 10' as 10 and runs echo: refused, not judged as a command (W3)
    ("nice -n ' 10' echo {0}", (), [(0, "wrapper", 1, 6, "nice -n needs a literal argument")]),
    ("timeout --foreground=1 5 echo {0}", (), [(0, "wrapper", 1, 9, "timeout --foreground=1")]),
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
    ('env A="1" eval {0}', (), [(0, "evaluating-builtin", 1, 11, "eval")]),
    ("A={0} command", (), [(0, "wrapper", 1, 11, "command")]),
    ("A={0} env A=1", (), [(0, "wrapper", 1, 15, "env")]),
    # a wrapper as the last word: nothing to follow, and no word past the end is read
    ("A={0} time", (), [(0, "wrapper", 1, 11, "time")]),
    ("A={0} time -p", (), [(0, "wrapper", 1, 16, "time")]),
    ("A={0} timeout", (), [(0, "wrapper", 1, 11, "timeout needs a literal duration")]),
    ("exec echo {0}", (), [(0, "evaluating-builtin", 1, 1, "exec")]),
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
    ("A={0} eval hi", (), [(0, "evaluating-builtin", 1, 11, "eval, through its environment")]),
    ("A+={0}", (), [(0, "assignment", 1, 1, "")]),
    ("a[1]={0}", (), [(0, "assignment", 1, 1, "")]),
    ("PS4={0}", (), [(0, "shell-control", 1, 1, "PS4")]),
    ("LD_PRELOAD={0}", (), [(0, "shell-control", 1, 1, "LD_PRELOAD")]),
    ("declare A={0}", (), [(0, "declaration", 1, 1, "")]),
    # -- mentions of a variable that holds a value ---------------------------
    ('A={0}; echo "$A"', (), []),
    ("A={0}; A=2", (), []),
    ("A={0}; echo $A", (), [(0, "tainted-variable", 1, 17, "$A: a parameter expansion")]),
    (
        "A={0}; declare A=2",
        (),
        [],
    ),
    (
        "A={0}; A+=x",
        (),
        [],
    ),
    ('echo "$V"', ("V",), []),
    ('echo "${V}"', ("V",), []),
    ('echo "a $V"', ("V",), []),
    ('echo "$V" {0}', ("V",), []),
    ('echo VV "$VV"', ("V",), []),
    ("# $V\necho hi", ("V",), []),
    ("V=1", ("V",), []),
    ('echo "${V:-x}"', ("V",), [(None, "tainted-variable", 1, 7, "$V: a parameter expansion")]),
    ("echo $V", ("V",), [(None, "tainted-variable", 1, 6, "$V: a parameter expansion")]),
    (
        "echo ${!V}",
        ("V",),
        [
            (None, "indirection", 1, 6, "${!V}"),
            (None, "tainted-variable", 1, 6, "$V: a parameter expansion"),
        ],
    ),
    (
        'eval "$V"',
        ("V",),
        [(None, "evaluating-builtin", 1, 1, "eval"), (None, "rebinding", 1, 1, "eval")],
    ),
    (
        "local V=1",
        ("V",),
        [],
    ),
    (
        "V+=1",
        ("V",),
        [],
    ),
    # -- the statement around the command: containers keep it a plain statement
    ("echo {0} &", (), []),
    ("{ echo {0}; }", (), []),
    ("while echo {0}; do :; done", (), []),
    ("until echo {0}; do :; done", (), []),
    ("case x in a) echo {0};; esac", (), []),
    ("for i in a; do echo {0}; done", (), []),
    ("select x in a; do echo {0}; done", (), []),
    ("f() { echo {0}; }", (), [(None, "function", 1, 1, "f")]),
    ("case {0} in a) ;; esac", (), []),
    ("case $(echo {0}) in a) ;; esac", (), []),
    ("echo $(A={0})", (), [(0, "split", 1, 6, "")]),
    ("cat <<<{0}", (), []),
    ("echo a >{0}", (), []),
    ("echo a 2>&{0}", (), [(0, "redirect", 1, 8, ">&")]),
    ("case x in {0}) ;; esac", (), [(0, "case-pattern", 1, 11, "")]),
    ("echo `echo {0}`", (), [(0, "quoted", 1, 6, "backticks")]),
    ("echo ${x:-$(echo {0})}", (), [(0, "split", 1, 11, "")]),
    ("declare $(echo {0})", (), [(0, "split", 1, 9, "")]),
    # the parser puts a command after "<<EOF |" inside the heredoc's node
    ("cat <<EOF | grep {0}\nhi\nEOF", (), [(0, "heredoc", 1, 11, "heredoc_redirect")]),
    ("cat <<EOF\nV\nEOF", ("V",), []),
    # -- the command a value is an argument of -------------------------------
    ("echo {0}", (), []),
    ("printf -- {0}", (), []),
    ("printf %s {0}", (), []),
    ("printf {0}", (), [(0, "printf-option", 1, 8, "")]),
    ("printf -v x %s {0}", (), []),
    ("printf -vx %s {0}", (), []),
    ("bash -c {0}", (), [(0, "executor", 1, 1, "bash")]),
    ("/bin/sh {0}", (), [(0, "executor", 1, 1, "sh")]),
    ("f() { :; }; f {0}", (), [(None, "function", 1, 1, "f")]),
    ("$x {0}", (), [(0, "unknown-command", 1, 1, "$x")]),
    ("{0} x", (), [(0, "command-name", 1, 1, "")]),
    ("e\\val {0}", (), [(0, "evaluating-builtin", 1, 1, "eval")]),
    ("read {0}", (), [(0, "evaluating-builtin", 1, 1, "read")]),
    # -- issue 25: where values flow, and the whole script (verdicts reviewed by hand) --
    ("bash <<< {0}", (), [(0, "executor", 1, 1, "bash, through its stdin")]),
    ("cat <<< {0} | sh", (), [(0, "executor", 1, 19, "sh, through its stdin")]),
    ("sh < <(echo {0})", (), [(0, "executor", 1, 1, "sh, through its stdin")]),
    ("cat <(echo {0})", (), []),
    ("sh <(echo {0})", (), [(0, "executor", 1, 1, "sh, through a <( ) argument")]),
    ("echo {0} | grep x | sh", (), [(0, "executor", 1, 25, "sh, through its stdin")]),
    ('echo {0} | { read -r l; echo "$l"; }', (), []),
    ("{ echo {0}; } | bash", (), [(0, "executor", 1, 21, "bash, through its stdin")]),
    (
        "echo {0} > f.sh; sh f.sh",
        (),
        [(None, "executor", 1, 22, "sh, reading a file a value was written to")],
    ),
    (
        "echo {0} > f.sh; ./f.sh",
        (),
        [
            (None, "file-flow", 1, 22, "./f.sh"),
            (None, "file-flow", 1, 22, "./f.sh: a program this script made"),
        ],
    ),
    (
        "echo {0} | tee f.sh; bash f.sh",
        (),
        [(None, "executor", 1, 26, "bash, reading a file a value was written to")],
    ),
    ("cat f.sh > /dev/null; echo {0} > f.sh", (), []),
    ("echo {0} >> log; cat < log", (), []),
    ('read -r a b <<< {0}; echo "$a" "$b"', (), []),
    ("read -ra arr <<< {0}; (( arr ))", (), [(None, "arithmetic", 1, 30, "arr")]),
    ("read -r -a arr <<< {0}; (( arr ))", (), [(None, "arithmetic", 1, 32, "arr")]),
    ("read -p {0} x", (), [(0, "evaluating-builtin", 1, 1, "read")]),
    ("read -d '' x <<< {0}; (( x ))", (), [(None, "arithmetic", 1, 30, "x")]),
    ("read -t 5 x <<< {0}", (), []),
    ("read $n <<< {0}", (), [(None, "name-word", 1, 6, "$n")]),
    ("mapfile -t -n 2 lines <<< {0}; (( lines ))", (), [(None, "arithmetic", 1, 39, "lines")]),
    ("mapfile -C cb lines <<< {0}", (), [(None, "rebinding", 1, 1, "mapfile -C")]),
    (
        "getopts ab opt {0}; (( opt ))",
        (),
        [(0, "evaluating-builtin", 1, 1, "getopts"), (None, "arithmetic", 1, 28, "opt")],
    ),
    ("printf -v out %s {0}; (( out ))", (), [(None, "arithmetic", 1, 30, "out")]),
    ('printf -v "$n" %s {0}', (), [(0, "printf-option", 1, 11, "")]),
    ("x=5; (( x > 1 )); echo {0}", (), []),
    ("x=abc; (( x > 1 )); echo {0}", (), [(None, "arithmetic", 1, 11, "x")]),
    ("x=$((1+2)); (( x )); echo {0}", (), []),
    ("(( y )); echo {0}", (), [(None, "arithmetic", 1, 4, "y")]),
    ("(( RANDOM % 2 )); echo {0}", (), []),
    ("echo $(( $# + $? )) {0}", (), []),
    ("echo $(( $1 )) {0}", (), [(None, "arithmetic", 1, 10, "$1")]),
    ("for x in {0}; do (( x )); done", (), [(0, "arithmetic", 1, 25, "x")]),
    ("for x in 1 2; do (( x )); done; echo {0}", (), [(None, "arithmetic", 1, 21, "x")]),
    ('for x; do echo "$x"; done; echo {0}', (), []),
    ("select x in a; do (( x )); done; echo {0}", (), [(None, "arithmetic", 1, 22, "x")]),
    ("x=1; x=$(cat f); (( x )); echo {0}", (), [(None, "arithmetic", 1, 21, "x")]),
    (
        "v={0}; w=$v; (( w ))",
        (),
        [
            (0, "tainted-variable", 1, 14, "$v: a parameter expansion"),
            (None, "arithmetic", 1, 21, "w"),
        ],
    ),
    ('v={0}; w="$v"; echo "$w"', (), []),
    ('a=(1 2); echo "${a[1]}" {0}', (), []),
    ('echo "${a[$(touch x)]}" {0}', (), [(None, "arithmetic", 1, 11, "$(touch x)")]),
    ('echo "$_" {0}', (), []),
    # $_ (the last word, redirects left out) is tainted wherever it is read
    # (review 45 asked: a redirect after the value changes nothing)
    (
        "echo {0} >/dev/null; echo $_",
        (),
        [(None, "tainted-variable", 1, 31, "$_: a parameter expansion")],
    ),
    ("echo {0} 2>&1; (( _ ))", (), [(None, "arithmetic", 1, 23, "_")]),
    (': {0} >/dev/null; x="$_"; (( x ))', (), [(None, "arithmetic", 1, 34, "x")]),
    ('echo "$@" {0}', (), []),
    ('echo "$1"; echo {0}', (), []),
    ("echo ${#x} {0}", (), []),
    ('echo "${x@Q}" {0}', (), []),
    ('echo "${x@P}" {0}', (), [(None, "indirection", 1, 7, "${x@P}")]),
    ('echo "${x@A}" {0}', (), [(None, "indirection", 1, 7, "${x@A}")]),
    (
        "tee >(sh) <<< {0}",
        (),
        [(0, "file-flow", 1, 5, "a file named at run time"), (None, "interpreter", 1, 7, "sh")],
    ),
    ("exec 3< <(echo {0})", (), [(0, "evaluating-builtin", 1, 1, "exec, through its stdin")]),
    ("exec > out.log; echo {0}", (), []),
    ("exec sh; echo {0}", (), [(None, "rebinding", 1, 1, "exec with a command")]),
    ("unset x; echo {0}", (), []),
    ("unset -f x; echo {0}", (), []),
    ('unset "$v"; echo {0}', (), [(None, "name-word", 1, 7, '"$v"')]),
    ("export X; X={0}", (), []),
    ("export -n X; echo {0}", (), [(None, "declaration", 1, 8, "-n")]),
    ("local -a x; echo {0}", (), [(None, "declaration", 1, 7, "-a")]),
    ("readonly X={0}", (), [(0, "declaration", 1, 1, "")]),
    ("typeset x=1; echo {0}", (), []),
    ('declare "$n"; echo {0}', (), [(None, "declaration", 1, 9, '"$n"')]),
    ("shopt -u nullglob; echo {0}", (), []),
    ("shopt -q extglob; echo {0}", (), [(None, "rebinding", 1, 1, "shopt -q extglob")]),
    ('shopt "$o"; echo {0}', (), [(None, "rebinding", 1, 1, "shopt None")]),
    ("set -e; set +x; echo {0}", (), []),
    ("set -o nounset -o pipefail; echo {0}", (), []),
    ("set -- a b; echo {0}", (), [(None, "rebinding", 1, 5, "set with positional parameters")]),
    ("set -B; echo {0}", (), [(None, "rebinding", 1, 5, "set -B")]),
    ('set "$o"; echo {0}', (), [(None, "rebinding", 1, 5, "set with a word read at run time")]),
    ("wait -n -p x; echo {0}", (), []),  # a literal name (review 25)
    ('wait -p "$v"; echo {0}', (), [(None, "name-word", 1, 1, "wait -p")]),
    ("wait -p 'a[1]'; echo {0}", (), [(None, "name-word", 1, 1, "wait -p")]),
    # glued, the name is still read (review 27's W1); never a name the shell acts on (W2)
    ("wait -n -p'a[i]'; echo {0}", (), [(None, "name-word", 1, 1, "wait -p")]),
    ("wait -np'a[i]'; echo {0}", (), [(None, "name-word", 1, 1, "wait -p")]),
    ("wait -ppid; echo {0}", (), []),
    # bash takes the last -p; a computed word may be -p (review 28's W4)
    ("wait -n -p done -p 'a[i]'; echo {0}", (), [(None, "name-word", 1, 1, "wait -p")]),
    ("wait \"$f\" 'a[i]'; echo {0}", (), [(None, "name-word", 1, 1, W)]),
    ("wait -n -p done -p PATH; echo {0}", (), [(None, "shell-control", 1, 1, "wait -p PATH")]),
    ("wait %1 12 -- 13; echo {0}", (), []),
    # a computed word before -- may be -p NAME, glued too (review 29's W5, 30's W6)
    ('f=-pa[i]; wait -n "$f"; echo {0}', (), [(None, "name-word", 1, 11, W)]),
    ("f=x; wait -n $f; echo {0}", (), [(None, "name-word", 1, 6, W)]),
    ('a=(1); wait -n "${a[@]}"; echo {0}', (), [(None, "name-word", 1, 8, W)]),
    ("f=x; jobs -x wait -n $f; echo {0}", (), [(None, "name-word", 1, 14, W)]),
    ('p=1; wait -n -p got -- "$p" $p; echo {0}', (), []),  # after --: ids
    ("sleep 1 & wait $!; echo {0}", (), []),
    ("wait -n -p PATH; echo {0}", (), [(None, "shell-control", 1, 1, "wait -p PATH")]),
    ('a=1; wait -n "$a"; echo {0}', (), [(None, "name-word", 1, 6, W)]),  # "$a" may be -p...
    ("wait {0}", (), [(0, "evaluating-builtin", 1, 1, "wait")]),
    ("let x=1; echo {0}", (), [(None, "rebinding", 1, 1, "let")]),
    ("IFS=, read -r a b <<< {0}", (), []),
    ("IFS=, ; echo {0}", (), []),
    ("IFS= cat <<< {0}", (), []),
    ("BASH_ENV=/x; echo {0}", (), [(None, "shell-control", 1, 1, "BASH_ENV")]),
    (
        "GIT_SSH_COMMAND={0} git fetch",
        (),
        [
            (0, "env-name", 1, 1, "GIT_SSH_COMMAND"),
            # and an upper-case name may be exported already (review 10)
            (
                None,
                "executor",
                1,
                25,
                "git runs with a value in its environment ($GIT_SSH_COMMAND)",
            ),
        ],
    ),
    ("X={0} env", (), [(0, "wrapper", 1, 11, "env")]),
    (
        "EDITOR={0} crontab -e",
        (),
        [
            (0, "env-name", 1, 1, "EDITOR"),
            (None, "executor", 1, 16, "crontab runs with a value in its environment ($EDITOR)"),
        ],
    ),
    ("FOO={0} ls", (), []),
    ("env GIT_SSH=x ls {0}", (), [(0, "env-name", 1, 5, "GIT_SSH")]),
    ("env -- ls {0}", (), [(0, "wrapper", 1, 5, "env --")]),
    ("nice ls {0}", (), []),
    ("nohup ls {0}", (), []),
    ("setsid ls {0}", (), []),
    ("time ls {0}", (), []),
    ("timeout 5 sed s/a/b/ {0}", (), [(0, "executor", 1, 11, "sed")]),
    ("command -v ls {0}", (), [(0, "wrapper", 1, 9, "command -v")]),
    ("builtin echo {0}", (), []),
    ("builtin eval {0}", (), [(0, "evaluating-builtin", 1, 9, "eval")]),
    ("mywrap python3 {0}", (), [(0, "wrapper", 1, 8, "mywrap python3")]),
    ("mywrap /usr/bin/python3.11 {0}", (), [(0, "wrapper", 1, 8, "mywrap /usr/bin/python3.11")]),
    ("echo python3 {0}", (), []),
    ("grep -e {0} file", (), []),
    ("ls ./*.txt {0}", (), []),
    ("~/bin/tool {0}", (), [(0, "unknown-command", 1, 1, "~/bin/tool")]),
    ("$(which ls) {0}", (), [(0, "unknown-command", 1, 1, "$(which ls)")]),
    ("l''s {0}", (), []),
    ('"ls" {0}', (), []),
    ('echo "$(cat {0})"', (), []),
    ('x="$(echo {0})"; echo "$x"', (), []),
    ('case "$(echo {0})" in a) ;; esac', (), []),
    ("cat <<< $(echo {0})", (), []),
    ("echo {0} > $(echo out)", (), [(0, "file-flow", 1, 16, "a file named at run time")]),
    ("echo hi > {0}", (), []),
    ("cat < {0}", (), []),
    ("sh < {0}", (), [(0, "executor", 1, 1, "sh, through its stdin")]),
    ("echo hi 2> {0}", (), []),
    ('[ "$(echo {0})" = a ]', (), []),
    ('[ -n "$v" ] && echo {0}', (), []),
    ("[ -v x ] && echo {0}", (), []),
    # $x may hold a value read back from a file (a[$(cmd)] runs): issue 25, review 6
    ('[ -v "$x" ] && echo {0}', (), [(None, "test-operator", 1, 6, "-v/-R")]),
    ("[[ -v $x ]] && echo {0}", (), [(None, "test-operator", 1, 7, "-v/-R of a word not fixed")]),
    ("[ -n $x ] && echo {0}", (), [(None, "split", 1, 6, "$x")]),
    (
        'test "$x" "$y" && echo {0}',
        (),
        [(None, "test-operator", 1, 6, "a word in an operator's place")],
    ),
    ('[ "$x" = "$y" ] && [ ! "$x" ] && [ -n "$x" ] && echo {0}', (), []),
    ('printf "$x" && echo {0}', (), [(None, "printf-option", 1, 8, "")]),
    ("[[ -v x ]] && echo {0}", (), []),
    ("[[ $x == y ]] && echo {0}", (), []),
    ("[[ $x -lt 3 ]] && echo {0}", (), [(None, "arithmetic", 1, 4, "$x")]),
    ("[[ 2 -lt 3 ]] && echo {0}", (), []),
    ('s=abc; n=1; echo "${s:n:1}" {0}', (), []),
    ('s=abc; echo "${s:$m}" {0}', (), [(None, "syntax", 1, 18, "")]),
    ("echo $[ 1 + 1 ] {0}", (), []),
    (
        'echo "$V" | sh',
        ("V",),
        [
            (None, "executor", 1, 13, "sh reads its stdin from a pipe"),
            (None, "executor", 1, 13, "sh runs with a value in its environment ($V)"),
            (None, "executor", 1, 13, "sh, through its stdin"),
        ],
    ),
    (
        "bash -c 'echo \"$V\"'",
        ("V",),
        [(None, "executor", 1, 1, "bash runs with a value in its environment ($V)")],
    ),
    (
        "X=\"$V\"; export X; perl -e 'print $ENV{X}'",
        ("V",),
        [(None, "executor", 1, 19, "perl runs with a value in its environment ($V, $X)")],
    ),
    (
        "cat <<EOF | sh\n$V\nEOF",
        ("V",),
        [
            (None, "executor", 1, 13, "sh runs with a value in its environment ($V)"),
            (None, "tainted-variable", 2, 1, "$V: a heredoc"),
        ],
    ),
    (
        "echo {0} > /tmp/f.sh; . ./f.sh",
        (),
        [
            (None, "evaluating-builtin", 1, 27, "., reading a file a value was written to"),
            (None, "rebinding", 1, 27, "."),
        ],
    ),
    # /dev/null holds nothing, but sh may read the value elsewhere (file names, $PWD)
    ("echo {0} > /dev/null; sh /dev/null", (), [(None, "interpreter", 1, 27, "sh")]),
    ("echo {0} > /dev/null; cat /dev/null", (), []),
    ("echo {0} > null; cat null | wc -c", (), []),
    (
        'sh <<"EOF"\necho "$V"\nEOF',
        ("V",),
        [(None, "executor", 1, 1, "sh runs with a value in its environment ($V)")],
    ),
]


def findings(script: str, tainted=()) -> list[tuple]:
    text = script.replace("{0}", SENTINELS[0]).replace("{1}", SENTINELS[1])
    found = check_script(text, [s for s in SENTINELS if s in text], tainted)
    return [(f.index, f.rule, f.line, f.column, f.detail) for f in found]


@pytest.mark.parametrize(("script", "tainted", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_position_gets_its_exact_verdict(script, tainted, expected) -> None:
    assert sorted(findings(script, tainted), key=str) == sorted(expected, key=str)


def test_a_finding_message_names_the_position_the_detail_the_rule_and_the_fix() -> None:
    assert Finding(None, "function", 1, 1, "f").message == (
        "a script with values: in a script that defines a function (f) [function]: "
        "write the commands inline, or use one step per command"
    )
    assert Finding(None, "syntax", 1, 1).message.startswith("{{ }} in a command that does not")
    finding = Finding(0, "wrapper", 1, 6, "nice -q")
    assert finding.message == (
        "{{ }} an argument of a command that runs another command, or names a shell or "
        "interpreter among its arguments (nice -q) "
        "[wrapper]: call the program directly (command, builtin, env, nohup, nice, setsid, "
        "time, jobs -x and timeout with a literal duration are followed, nice's and "
        "timeout's options as literal words)"
    )
    assert Finding(0, "double-bracket", 1, 1).message == (
        "{{ }} [[ ]], whose operands bash may evaluate as arithmetic [double-bracket]: "
        "use [ ] (test) instead"
    )


def test_a_script_without_values_or_tainted_names_is_not_parsed() -> None:
    assert check_script("this is ( not bash", []) == []
    assert findings("this is ( not bash {0}") == [(None, "syntax", 1, 9, "")]


# --- the tenth review: names and shells the checker missed --------------------


@pytest.mark.parametrize("name", ["c99-gcc", "c89-gcc", "gpic", "x86_64-linux-gnu-gcc-12"])
def test_listed_programs_under_distribution_spellings_are_executors(name) -> None:
    from runner.config.shell.programs import is_executor

    assert is_executor(name)


@pytest.mark.parametrize("name", ["grep", "gzip", "gunzip", "c99-grep", "g"])
def test_the_spellings_do_not_make_every_program_an_executor(name) -> None:
    from runner.config.shell.programs import is_executor

    assert not is_executor(name)


@pytest.mark.parametrize("name", ["DBUS_SESSION_BUS_ADDRESS", "CLOUDSDK_PYTHON_ARGS"])
def test_addresses_and_argument_lists_are_code_bearing(name) -> None:
    from runner.config.shell.variables import is_code_bearing_env

    assert is_code_bearing_env(name)


def test_rbash_is_bash_and_other_shells_get_no_env_values() -> None:
    script = 'msg="$V"; eval "echo $msg"'
    assert "rebinding" in {f.rule for f in check_script(script, [], ["V"], shell="/bin/rbash")}
    assert [f.rule for f in check_script(script, [], ["V"], shell="zsh")] == ["shell-dialect"]
    assert check_script("import os; print(os.environ['V'])", [], ["V"], shell="python3") == []


def test_strict_mode_runs_no_other_program_beside_an_env_value() -> None:
    """``consumers:`` promises no value reaches an unnamed program, through
    its environment too: dbus-send ran a ``unixexec:`` bus address."""
    found = check_script(
        "dbus-send --session x", [], ["DBUS_SESSION_BUS_ADDRESS"], consumers=["grep"]
    )
    assert [(f.rule, f.detail.split(" ")[0]) for f in found] == [("consumer", "dbus-send")]
    assert check_script('grep -c x -- "$V" f', [], ["V"], consumers=["grep"]) == []


def test_what_prints_variables_carries_their_values() -> None:
    """``$(printenv V)`` and ``$(declare -p)`` read a value back untainted."""
    for script in ('v="$(printenv V)"; echo $(( v ))', 'v="$(declare -p V)"; echo $(( v ))'):
        assert "arithmetic" in {f.rule for f in check_script(script, [], ["V"])}, script


# --- the eleventh review -------------------------------------------------------


@pytest.mark.parametrize(
    "script",
    [
        'x={0}; v="$(declare)"; echo "$(( v ))"',  # a bare declaration prints variables
        'x={0}; v="$(export)"; echo "$(( v ))"',
        'echo {0}; v="$BASH_EXECUTION_STRING"; echo "$(( v ))"',  # the script's own text
        'echo {0}; v="$BASH_COMMAND"; echo "$(( v ))"',
        'echo {0}; v="$(tr -d x < /proc/$$/cmdline)"; echo "$(( v ))"',
        'echo {0}; v="$(< /proc/self/cmdline)"; echo "$(( v ))"',
        'echo {0}; v="$(ps -o args= -p $$)"; echo "$(( v ))"',
    ],
)
def test_text_that_holds_the_script_or_its_variables_is_tainted(script) -> None:
    assert "arithmetic" in {f[1] for f in findings(script)}, script


def test_a_static_env_name_assigned_a_value_is_exported() -> None:
    """``env: {app: demo}`` exports ``app``: ``app={{ x }}; make`` hands make
    the value, a lower-case name included."""
    script = "app='RVx0'; make -s"
    (unexported,) = check_script(script, ["'RVx0'"])  # make beside a value, not named
    assert (unexported.rule, unexported.detail) == ("executor", "make, not named in consumers:")
    (found,) = check_script(script, ["'RVx0'"], exported=["app"])
    assert (found.rule, found.detail) == (
        "executor",
        "make runs with a value in its environment ($app)",
    )
    assert check_script("app='RVx0'; wc -c f", ["'RVx0'"], exported=["app"]) == []


@pytest.mark.parametrize("shell", ["/usr/bin/script", "tmux", "su", "zsh", "busybox"])
def test_only_known_interpreters_get_env_values_unchecked(shell) -> None:
    assert [f.rule for f in check_script('echo "$V"', [], ["V"], shell=shell)] == ["shell-dialect"]


@pytest.mark.parametrize("shell", ["python3", "/usr/bin/node", "perl5.36", "ruby3.1"])
def test_interpreters_read_env_values_as_their_code_says(shell) -> None:
    assert check_script("print(1)", [], ["V"], shell=shell) == []


@pytest.mark.parametrize("name", ["cpan5.36-x86_64-linux-gnu", "scriptlive"])
def test_the_eleventh_reviews_programs_are_executors(name) -> None:
    from runner.config.shell.programs import is_executor

    assert is_executor(name)


# --- the twelfth review ----------------------------------------------------------


@pytest.mark.parametrize(
    "script",
    [
        'echo {0} >/dev/null & v="$(jobs)"; echo "$(( v ))"',  # jobs prints the command
        'echo {0}; v="$(cat /pro\'\'c/$$/cmdline)"; echo "$(( v ))"',  # quotes removed
        'echo {0}; v="$(pstree.x11 -a -p $$)"; echo "$(( v ))"',  # a lister's other name
        'echo {0}; p=/proc; v="$(cat "$p/$$/cmdline")"; echo "$(( v ))"',  # through a variable
        'echo {0}; cd /proc/$$ && v="$(tr -d x < cmdline)"; echo "$(( v ))"',  # relative
    ],
)
def test_the_twelfth_reviews_readers_carry_values(script) -> None:
    assert "arithmetic" in {f[1] for f in findings(script)}, script


def test_a_program_the_script_links_is_not_a_consumer() -> None:
    found = check_script(
        "link /usr/bin/dash grep; ./grep -c 'RVx0'", ["'RVx0'"], consumers=["grep"]
    )
    assert found, "./grep is dash, made by link"


@pytest.mark.parametrize(
    "name", ["dbus-send", "dbus-monitor", "not", "sdiff", "make-first-existing-target"]
)
def test_the_twelfth_reviews_programs_are_executors(name) -> None:
    from runner.config.shell.programs import is_executor

    assert is_executor(name)


def test_the_environment_and_secret_names_count_as_exported(tmp_path) -> None:
    """``environment.env`` and a step's ``secrets:`` names are exported before
    the script runs: ``app={{ x }}; make`` hands make the value."""
    from runner.config import ConfigError, load

    def config(environment_env: str, secrets: str) -> object:
        path = tmp_path / "agent.yaml"
        path.write_text(
            "version: 1\n"
            "secrets:\n  tok: {from_env: TOK}\n"
            "inputs:\n  acme.x:\n    as: x\n"
            "    schema: {type: object, properties: {v: {type: string}}}\n"
            "agent:\n  model: m\n  environment:\n    sandbox: local\n"
            f"{environment_env}"
            "    hooks:\n      - name: h\n        on_create:\n"
            "          - run: app={{ x.v }}; make -s\n"
            f"{secrets}"
        )
        return load(path)

    with pytest.raises(ConfigError, match="make, not named in consumers:"):
        config("", "")  # app is not known to be exported: make is refused as an executor
    for environment_env, secrets in (
        ("    env: {app: demo}\n", ""),
        ("", "            secrets: {app: tok}\n"),
    ):
        with pytest.raises(ConfigError, match="make runs with a value in its environment"):
            config(environment_env, secrets)


# --- the thirteenth review ---------------------------------------------------------


@pytest.mark.parametrize(
    "script",
    [
        'echo {0} >/dev/null; y="$(cat /[p]roc/$$/cmdline)"; touch -- $y',  # /proc as a glob
        'echo {0} >/dev/null; y="$(cat /pr?c/$$/cmdline)"; touch -- $y',
        'echo {0} >/dev/null; y="$(cat /{{proc,x}}/$$/cmdline)"; touch -- $y',  # as braces
        'echo {0} >/dev/null; cd / && y="$(cat proc/$$/cmdline)"; touch -- $y',  # relative
        'echo {0} >/dev/null; y="$(pmap $$)"; touch -- $y',  # a lister not named before
    ],
)
def test_the_thirteenth_reviews_readers_carry_values(script) -> None:
    """What reads the script's text back holds its values: ``$y`` unquoted is refused."""
    assert "tainted-variable" in {
        f[1] for f in findings(script.replace("{{", "{").replace("}}", "}"))
    }
    # the same file read from elsewhere holds none, but its text is computed
    # while the script runs: no program takes it beside a value (review 35)
    elsewhere = findings('echo {0} >/dev/null; y="$(cat /tmp/x)"; touch -- $y')
    assert {f[1] for f in elsewhere} == {"computed-word"}


def test_cd_into_proc_relative_to_root_is_refused() -> None:
    assert "file-flow" in {f[1] for f in findings("echo {0} >/dev/null; cd / && cd proc")}


@pytest.mark.parametrize("name", ["debconf", "fakeroot-sysv", "fakeroot-tcp", "terraform", "tofu"])
def test_the_thirteenth_reviews_programs_are_executors(name) -> None:
    from runner.config.shell.programs import is_executor

    assert is_executor(name)


@pytest.mark.parametrize("name", ["LUA_INIT", "LUA_INIT_5_4", "MAGICK_CONFIGURE_PATH", "PHPRC"])
def test_the_thirteenth_reviews_env_names_carry_code(name) -> None:
    from runner.config.shell.variables import is_code_bearing_env

    assert is_code_bearing_env(name)


@pytest.mark.parametrize(
    "script",
    ["set -x; echo {0}", "set -ex; echo {0}", "set -o xtrace; echo {0}", "set -v; echo {0}"],
)
def test_tracing_that_prints_every_value_is_refused(script) -> None:
    """set -x prints assignments, for lists and case subjects to stderr, where no
    check follows them (``{ set -x; y={0}; } 2>f; sort --compress-program=sh f``)."""
    assert [f[1] for f in findings(script)] == ["rebinding"]


@pytest.mark.parametrize(
    "script", ["set +x; echo {0}", "set +o xtrace; echo {0}", "set -eu; echo {0}"]
)
def test_turning_tracing_off_is_allowed(script) -> None:
    assert findings(script) == []


@pytest.mark.parametrize(
    "script",
    [
        "echo {0}; find . -maxdepth 0 -exec sh -c 'echo hi' \\;",  # a shell find starts
        "echo {0}; sort -S 1k --compress-program=sh /etc/services",  # as an option's value
        "echo {0}; my-launcher -f frontend bash f",  # after an option's argument
        "echo {0}; find . -maxdepth 0 -exec env sh -c 'echo hi' \\;",  # after an executor
    ],
)
def test_a_shell_another_program_starts_is_a_shell_beside_the_values(script) -> None:
    assert "interpreter" in {f[1] for f in findings(script)}


def test_an_executor_after_an_options_argument_is_launched() -> None:
    """``debconf -f noninteractive flock lk -c {{ x }}``: the launcher check
    took the option's argument for the program and missed flock."""
    assert "wrapper" in {f[1] for f in findings("my-launcher -s st flock lk -c {0}")}
    assert findings("my-launcher -s st flock") == []  # no value: nothing to judge


def test_a_glob_beside_files_a_value_named_needs_an_end_of_options() -> None:
    """``touch -- {{ x }}; sort *``: the glob may expand to a name the value
    chose (``--compress-program=sh``), read by sort as an option."""
    assert "file-flow" in {f[1] for f in findings("touch -- {0}; sort -S 1k *")}
    assert "file-flow" in {f[1] for f in findings("touch -- {0}; wc -l *")}
    assert findings("touch -- {0}; wc -l -- *") == []  # after --, names are operands
    assert findings("touch -- {0}; cat *") == []  # the strict receivers run nothing


# --- the fourteenth review (strict mode) ---------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/[^a]roc/$$/cmdline",  # bash's [^...] is fnmatch's [!...]
        "/[[:alpha:]]roc/$$/cmdline",  # a class
        "/{p..p}roc/$$/cmdline",  # a sequence brace
        "/PRO[C]/$$/cmdline",  # shopt -s nocaseglob
        "/dev/./fd/0",
        "/dev//fd/0",
    ],
)
def test_the_fourteenth_reviews_proc_spellings_carry_values(path) -> None:
    script = f'echo {{0}} >/dev/null; y="$(cat {path})"; touch -- $y'
    assert "tainted-variable" in {f[1] for f in findings(script)}, path


def test_an_escape_in_brackets_that_tree_sitter_splits_is_a_disagreement() -> None:
    """tree-sitter reads ``/[\\p]roc/...`` as two words, bash as one."""
    script = 'echo {0} >/dev/null; y="$(cat /[\\p]roc/$$/cmdline)"; touch -- $y'
    assert "syntax" in {f[1] for f in findings(script)}


def test_a_path_built_from_a_variable_may_name_proc_in_strict_mode() -> None:
    script = 'wc -c {0}; p=/pr; y="$(cat "${p}oc/$$/cmdline")"; touch -- $y'
    text = script.replace("{0}", SENTINELS[0])
    strict = check_script(text, [SENTINELS[0]], consumers=["wc"])
    assert "tainted-variable" in {f.rule for f in strict}


@pytest.mark.parametrize(
    "script",
    [
        "mkdir -p .venv/bin; cp /bin/bash .venv/bin/wc; wc -c {0}",  # on PATH, run bare
        'xxd -p "$BASH" | xxd -r -p - wc; chmod +x wc; ./wc -c {0}',  # a writer no list names
        "lz4 -d -f packed wc; ./wc -c {0}",
    ],
)
def test_a_program_made_under_a_consumers_name_is_not_that_consumer(script) -> None:
    text = script.replace("{0}", SENTINELS[0])
    found = check_script(text, [SENTINELS[0]], consumers=["wc"])
    assert "file-flow" in {f.rule for f in found}, found


def test_a_copy_made_by_a_known_copier_is_refused_by_its_bare_name_too() -> None:
    text = "cp /bin/bash /usr/local/bin/grep; grep -c {0} f".replace("{0}", SENTINELS[0])
    assert "file-flow" in {f.rule for f in check_script(text, [SENTINELS[0]])}


@pytest.mark.parametrize(
    "name", ["SHELLOPTS", "PS4", "BASH_ENV", "PROMPT_COMMAND", "BASH_FUNC_x%%"]
)
def test_a_static_env_that_changes_how_bash_runs_is_refused_beside_values(name) -> None:
    """``env: {SHELLOPTS: xtrace, PS4: "${BASH_COMMAND@P}"}`` traced and ran a value."""
    found = check_script(f"wc -c {SENTINELS[0]}", [SENTINELS[0]], exported=[name])
    assert ("rebinding", f"env: {name}") in {(f.rule, f.detail) for f in found}
    assert check_script(f"wc -c {SENTINELS[0]}", [SENTINELS[0]], exported=["LC_ALL"]) == []


#: The fifteenth review's classes, as the checker must judge them:
#: (script, consumers or None, the rule and detail expected among the findings).
FIFTEENTH_REVIEW = [
    # F1: a backup renames the old file under a derived name (w -> wc)
    (
        "cp -b -S c /bin/true w; ./wc -c 'RVtx0'",
        ["wc"],
        ("file-flow", "cp -b: a backup names a file"),
    ),
    (
        "mv --suffix=c a w; wc -c 'RVtx0'",
        None,
        ("file-flow", "mv --suffix=c: a backup names a file"),
    ),
    # F1/F2: names (and sources) bash expands: a glob that copies a shell, braces, tilde
    (
        "cp /bin/b?sh w; wc -c 'RVtx0'",
        None,
        (
            "file-flow",
            "cp /bin/b?sh: names bash expands (copy them in a step without values, or name each file)",
        ),
    ),
    (
        "cp x {wc,}; ./wc 'RVtx0'",
        ["wc"],
        (
            "file-flow",
            "cp {wc,}: names bash expands (copy them in a step without values, or name each file)",
        ),
    ),
    (
        "ln -s x ~+/wc; ./wc 'RVtx0'",
        None,
        (
            "file-flow",
            "ln ~+/wc: names bash expands (copy them in a step without values, or name each file)",
        ),
    ),
    # F3: egrep and fgrep are shell scripts that look grep up on PATH
    ("egrep -c a f; wc 'RVtx0'", ["wc"], ("strict-program", "egrep, not in consumers:")),
    # F4: the loader's files, and where the system finds code
    (
        "echo /tmp/x.so > /etc/ld.so.preload; wc 'RVtx0'",
        None,
        ("file-flow", "/etc/ld.so.preload: the system runs what is written there"),
    ),
    (
        "printf x > /proc/sys/kernel/core_pattern; wc 'RVtx0'",
        ["wc"],
        ("file-flow", "/proc/sys/kernel/core_pattern: the system runs what is written there"),
    ),
    # F5: a program find or xargs starts, named at run time, may be a shell
    (
        "wc 'RVtx0'; find . -exec /bin/b?sh -c x \\;; true",
        None,
        ("interpreter", "find starts /bin/b?sh"),
    ),
    (
        "wc 'RVtx0'; find . -exec \"$BASH\" -c x \\;",
        ["wc", "find"],
        ("interpreter", 'find starts "$BASH"'),
    ),
    ("wc 'RVtx0'; xargs -n 1 \"$B\" < /dev/null", None, ("interpreter", 'xargs starts "$B"')),
    # F7: a wrapper called by a path is whatever put it there
    ("./timeout 5 wc -c 'RVtx0'", None, ("executor", "timeout")),
    ("/tmp/x/nice wc 'RVtx0'", ["wc"], ("consumer", "nice")),
    # F6: a /proc path completed by a variable, in the default mode too
    (
        "wc -c 'RVtx0'; p=/pr; cut -d';' -f2 \"${p}oc/$$/cmdline\" > f; xargs -a f env",
        None,
        ("executor", "xargs, reading a file a value was written to"),
    ),
    # F8: with PATH unset, bash looks bare names up in the working directory
    ("unset PATH; wc -c 'RVtx0'", ["wc"], ("shell-control", "unset PATH")),
    ("command unset -v PATH; wc 'RVtx0'", None, ("shell-control", "unset PATH")),
]


@pytest.mark.parametrize(("script", "consumers", "expected"), FIFTEENTH_REVIEW)
def test_the_fifteenth_reviews_classes_are_refused(script, consumers, expected) -> None:
    found = check_script(script, [SENTINELS[0]], consumers=consumers)
    assert expected in {(f.rule, f.detail) for f in found}, found


def test_the_fifteenth_reviews_neighbours_still_pass() -> None:
    """What the new rules leave alone: plain copies, a wrapper from /usr/bin,
    xargs with a literal program, find with a quoted pattern, unset of a
    plain name."""
    for script in (
        "mkdir -p out; cp -a src out; cp -- 'RVtx0' out/",
        "/usr/bin/timeout 5 wc -c 'RVtx0'",
        "unset x; wc 'RVtx0'",
        "echo done > out.txt; wc 'RVtx0'",
        "d=out; n=a; cat \"$d/${n}.txt\"; wc 'RVtx0'",
    ):
        assert check_script(script, [SENTINELS[0]]) == [], script


def test_a_step_env_that_controls_the_loader_is_refused_beside_values() -> None:
    for name in ("LD_PRELOAD", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES"):
        (finding,) = check_script("wc 'RVtx0'", [SENTINELS[0]], exported=[name], consumers=["wc"])
        assert (finding.rule, finding.detail) == ("rebinding", f"env: {name}")
    assert check_script("wc 'RVtx0'", [SENTINELS[0]], exported=["LANG"]) == []


#: The sixteenth review's classes that the checker now refuses.
SIXTEENTH_REVIEW = [
    # N1: $"..." is replaced by a message catalog's text, then expanded
    ("printf x > t.mo; TEXTDOMAIN=t; wc -c 'RVtx0'\necho $\"hi\"", ["wc"], ("translation", "")),
    ("wc -c 'RVtx0'\necho $\"hi\"", None, ("translation", "")),
    # R2: the loader's variables, set in the script
    ("export GCONV_PATH=./g; wc -c 'RVtx0'", ["wc"], ("shell-control", "GCONV_PATH")),
    ("GCONV_PATH=./g cmp a b; wc -c 'RVtx0'", None, ("shell-control", "GCONV_PATH")),
    # R3: the system's directories, however the path is spelled
    (
        "echo x > //etc/ld.so.preload; wc 'RVtx0'",
        ["wc"],
        ("file-flow", "/etc/ld.so.preload: the system runs what is written there"),
    ),
    (
        "printf 'passwd: hesiod' > /etc/nsswitch.conf; wc 'RVtx0'",
        None,
        ("file-flow", "/etc/nsswitch.conf: the system runs what is written there"),
    ),
    (
        "cp q.so /usr/lib/x86_64-linux-gnu/libnss_hesiod.so.2; wc 'RVtx0'",
        None,
        (
            "file-flow",
            "/usr/lib/x86_64-linux-gnu/libnss_hesiod.: the system runs what is written there",
        ),
    ),
    # R1: a file made under a name known only at run time may be any program
    (
        "cat < /usr/bin/dash > w${e}c; chmod +x w*; ./wc -c 'RVtx0'",
        None,
        ("file-flow", "./wc: this script makes a file under a name known only at run time"),
    ),
    (
        "d=wc; cat < /usr/bin/dash > \"$d\"; wc -c 'RVtx0'",
        ["wc"],
        ("file-flow", "wc: this script makes a file under a name known only at run time"),
    ),
    # N2: an option that makes a program run sh -c CODE, no shell word needed
    (
        "wc -c 'RVtx0'; tar -cf /dev/null --checkpoint-action=exec=x f",
        None,
        ("executor", "tar --checkpoint-action=exec=x"),
    ),
    # R3's rest: a system path reached through cd, a variable, an expansion
    # beside text, a glob, .. above the workspace or a link
    (
        "cd /etc && echo x > ld.so.preload; wc 'RVtx0'",
        ["wc"],
        ("file-flow", "cd /etc: into the system's directories"),
    ),
    (
        "cd /; echo x > etc/ld.so.preload; wc 'RVtx0'",
        None,
        ("file-flow", "cd /: into the system's directories"),
    ),
    (
        "cd ..; echo x > etc/ld.so.preload; wc 'RVtx0'",
        None,
        ("file-flow", "cd ..: may climb out to /"),
    ),
    (
        "cd a; for i in 1 2; do cd ..; done; wc 'RVtx0'",
        None,
        ("file-flow", "cd ..: may climb out to /"),
    ),
    (
        "d=/etc; echo x > \"$d/ld.so.preload\"; wc 'RVtx0'",
        None,
        ("file-flow", "/etc/ld.so.preload: the system runs what is written there"),
    ),
    (
        "echo x > /e${e}tc/ld.so.preload; wc 'RVtx0'",
        None,
        ("file-flow", "/e${e}tc/ld.so.preload: the system runs what is written there"),
    ),
    (
        "echo x > /e?c/nsswitch.conf; wc 'RVtx0'",
        ["wc"],
        ("file-flow", "/e?c/nsswitch.conf: the system runs what is written there"),
    ),
    (
        "echo x > ../etc/ld.so.preload; wc 'RVtx0'",
        None,
        ("file-flow", "../etc/ld.so.preload: may climb out of the workspace to /etc..."),
    ),
    (
        "ln -s /etc e; echo x > e/ld.so.preload; wc 'RVtx0'",
        ["wc"],
        ("file-flow", "/etc: the system runs what is written there"),
    ),
    (
        "uniq a /etc/ld.so.preload; wc 'RVtx0'",
        ["wc"],
        ("file-flow", "/etc/ld.so.preload: the system runs what is written there"),
    ),
    # N2's neighbours: short options and configuration that run code, in the
    # default mode too (an executor runs beside values only when named)
    ("gcc -wrapper ./w,x t.c; wc -c 'RVtx0'", None, ("executor", "gcc, not named in consumers:")),
    (
        "git -c core.pager=./p log; wc -c 'RVtx0'",
        None,
        ("executor", "git, not named in consumers:"),
    ),
    ("make -f m; wc -c 'RVtx0'", None, ("executor", "make, not named in consumers:")),
    ("zip -TT ./t o.zip f; wc -c 'RVtx0'", ["wc"], ("executor", "zip, not named in consumers:")),
    ("tar -cf o.tar -I ./c d; wc -c 'RVtx0'", None, ("executor", "tar, not named in consumers:")),
]


@pytest.mark.parametrize(("script", "consumers", "expected"), SIXTEENTH_REVIEW)
def test_the_sixteenth_reviews_classes_are_refused(script, consumers, expected) -> None:
    found = check_script(script, [SENTINELS[0]], consumers=consumers)
    assert expected in {(f.rule, f.detail) for f in found}, found


def test_an_executor_named_in_consumers_runs_beside_values() -> None:
    """The way out of the default mode's executor rule: name the program
    (which turns on strict mode, so the data programs beside it too)."""
    for script, consumers in (
        ("tar -czf o.tgz d; wc 'RVtx0'", ["tar", "wc"]),
        ("git status --short; wc 'RVtx0'", ["git", "wc"]),
        ("find . -name '*.py' -print; wc 'RVtx0'", ["find", "wc"]),
    ):
        assert check_script(script, [SENTINELS[0]]) != [], script
        assert check_script(script, [SENTINELS[0]], consumers=consumers) == [], script


def test_writes_and_cd_that_stay_out_of_the_system_pass() -> None:
    """The neighbours of the system-write rules: a subdirectory and back, a
    cd to /tmp, a relative .. that stays below where it started, a copy
    from /etc, a file a value names (the author's choice, said in SECURITY.md)."""
    for script in (
        "mkdir -p build && cd build && echo x > f && cd ..; wc 'RVtx0'",
        "cd sub; echo x > ../f; cd ..; wc 'RVtx0'",
        "cd /tmp && echo x > f; wc 'RVtx0'",
        "cp /etc/hosts out/; wc 'RVtx0'",
        'd=out; mkdir -p "$d"; echo x > "$d/f"; wc \'RVtx0\'',
        "cat /etc/os-release > os.txt; wc 'RVtx0'",
    ):
        assert check_script(script, [SENTINELS[0]]) == [], script
    assert check_script("echo x > 'RVtx0'", [SENTINELS[0]]) == []


def test_reading_system_files_still_passes() -> None:
    for script in (
        "cp /etc/hosts out/; wc 'RVtx0'",
        "LC_ALL=C head f; wc 'RVtx0'",
        "echo \"hi\"; wc 'RVtx0'",
        "date > \"$log\"; wc -c 'RVtx0'",  # the default mode: bare names stay
        "date > \"$log\"; /usr/bin/wc -c 'RVtx0'",
    ):
        assert check_script(script, [SENTINELS[0]]) == [], script


def test_a_backup_option_is_read_per_program() -> None:
    """``-S`` names a suffix for cp and gzip (``gzip -S c w`` writes ``wc``),
    but strips debug data for strip and objcopy: only the first are refused."""
    for script in ("gzip -S c w; ./wc 'RVtx0'", "cp -b -S c x w; ./wc -c 'RVtx0'"):
        assert "file-flow" in {f.rule for f in check_script(script, [SENTINELS[0]])}, script
    for script in ("strip -S a.out; wc 'RVtx0'", "objcopy -S a.out b.out; wc 'RVtx0'"):
        found = check_script(script, [SENTINELS[0]], consumers=["strip", "objcopy", "wc"])
        assert found == [], script


#: The seventeenth review's classes that the checker now refuses.
SEVENTEENTH_REVIEW = [
    # A: a shell script that evaluates its environment (xzgrep runs $GREP)
    (
        "GREP='RVtx0' xzgrep -c root /etc/hostname; true",
        None,
        ("executor", "xzgrep, through its environment"),
    ),
    (
        "GREP='RVtx0' xzgrep -c root /etc/hostname; true",
        ["xzgrep"],
        ("consumer", "xzgrep, through its environment"),
    ),
    ("zgrep -c -- 'RVtx0' f", ["zgrep"], ("consumer", "zgrep")),
    # B: a program outside GTFOBins, given no value, in the default mode
    (
        "dpkg-buildpackage --hook-init=x; wc -c 'RVtx0'",
        None,
        ("strict-program", "dpkg-buildpackage, not in consumers:"),
    ),
    ("gpg --photo-viewer x; wc -c 'RVtx0'", None, ("strict-program", "gpg, not in consumers:")),
    # not an environment's file name: w${e}c is wc when e is unset
    (
        "cat < /usr/bin/dash > w\"$E\"c; ./wc -c 'RVtx0'",
        ["wc"],
        ("file-flow", "./wc: this script makes a file under a name known only at run time"),
    ),
    (
        "d=wc; cat < /usr/bin/dash > \"$d\"; wc -c 'RVtx0'",
        ["wc"],
        ("file-flow", "wc: this script makes a file under a name known only at run time"),
    ),
    # C2: a glob fills a variable with names a value chose
    (
        "touch -- 'RVtx0'; for f in *; do nm \"$f\"; done",
        ["nm", "touch"],
        ("file-flow", "*: a file name a value chose may come out as an option (write ./* )"),
    ),
    (
        "touch -- 'RVtx0'; a=(*); nm \"${a[@]}\"",
        ["nm", "touch"],
        ("file-flow", "*: a file name a value chose may come out as an option (write ./* )"),
    ),
]


@pytest.mark.parametrize(("script", "consumers", "expected"), SEVENTEENTH_REVIEW)
def test_the_seventeenth_reviews_classes_are_refused(script, consumers, expected) -> None:
    found = check_script(script, [SENTINELS[0]], consumers=consumers)
    assert expected in {(f.rule, f.detail) for f in found}, found


def test_the_seventeenth_reviews_neighbours_pass() -> None:
    """``./*`` names start with ``./``, never an option; data programs run
    in the default mode; a loop over a glob with no value-named file."""
    for script, consumers in (
        ("touch -- 'RVtx0'; for f in ./*; do nm \"$f\"; done", ["nm", "touch"]),
        ("touch -- 'RVtx0'; nm ./*", ["nm", "touch"]),
        ("for f in *; do wc -c \"$f\"; done; echo 'RVtx0'", None),
        ("mkdir -p out; grep -c -- 'RVtx0' f > out/n; sha256sum out/n", None),
        # one whole variable the environment sets names a file fixed before the script runs
        ("echo n=1 >> \"$GITHUB_OUTPUT\"; wc -c 'RVtx0'", ["wc"]),
    ):
        assert check_script(script, [SENTINELS[0]], consumers=consumers) == [], script


#: The eighteenth review's static classes: the destination's spellings the
#: system-write rules missed.
EIGHTEENTH_REVIEW = [
    (
        "cp --target-directory=/etc f; wc 'RVtx0'",
        ("file-flow", "/etc: the system runs what is written there"),
    ),
    (
        "cp --target=/etc f; wc 'RVtx0'",
        ("file-flow", "/etc: the system runs what is written there"),
    ),
    ("cp -t/etc f; wc 'RVtx0'", ("file-flow", "/etc: the system runs what is written there")),
    (
        "cp -s /etc/nsswitch.conf c; wc 'RVtx0'",
        ("file-flow", "/etc/nsswitch.conf: the system runs what is written there"),
    ),
    ("mv /etc/x y; wc 'RVtx0'", ("file-flow", "/etc/x: the system runs what is written there")),
    ("chmod 777 /etc; wc 'RVtx0'", ("file-flow", "/etc: the system runs what is written there")),
    ("CDPATH=/; cd etc; wc 'RVtx0'", ("shell-control", "CDPATH")),
    ("HOME=/etc; cd; wc 'RVtx0'", ("shell-control", "HOME")),
    ("OLDPWD=/etc; cd -; wc 'RVtx0'", ("shell-control", "OLDPWD")),
    ("DIRSTACK[1]=/etc; pushd +1; wc 'RVtx0'", ("shell-control", "DIRSTACK")),
    ("cd ~root/../etc; wc 'RVtx0'", ("file-flow", "cd ~root/../etc: may climb from a home to /")),
    # the depth after cd a/../b is one level down, not two
    ("cd a/../b; cd ../..; wc 'RVtx0'", ("file-flow", "cd ../..: may climb out to /")),
    ("echo x > ~/../etc/x; wc 'RVtx0'", ("file-flow", "~/../etc/x: may climb from a home to /")),
]


@pytest.mark.parametrize(("script", "expected"), EIGHTEENTH_REVIEW)
def test_the_eighteenth_reviews_classes_are_refused(script, expected) -> None:
    for consumers in (None, ["wc"]):
        found = check_script(script, [SENTINELS[0]], consumers=consumers)
        assert expected in {(f.rule, f.detail) for f in found}, found


def test_the_eighteenth_reviews_neighbours_pass() -> None:
    """Reading from /etc, HOME for one program, IFS for one read."""
    for script, consumers in (
        ("cp /etc/hosts out/; wc 'RVtx0'", None),
        ("IFS= read -r l <<< 'RVtx0'", None),
        ("HOME=/tmp/h git status; wc 'RVtx0'", ["git", "wc"]),
        ("cd ~ && wc -c 'RVtx0'", None),
    ):
        assert check_script(script, [SENTINELS[0]], consumers=consumers) == [], script
