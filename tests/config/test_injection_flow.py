"""Injection safety, part 2: where a value *flows*, and who reads it (issue 25).

Each class the second review found, attacked at both layers as in
``test_injection_classes``: ``runner validate``'s static check refuses it,
and the run-time check refuses it on a template built without the static
check.  ``test_each_flow_is_a_real_exploit_without_the_check`` proves the
cases are not straw men: rendered with the check switched off and run in
real bash, each one runs a hostile value (a canary file appears).  The flows
the checker accepts run in real bash with the same values and run nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from agent_files import one_step_agent
from conftest import RUNNER_CLI

from runner.config.shell import checker as shell_check
from runner.config.shell.checker import check_script
from runner.config.templates import (
    _SHELL,
    Fields,
    Template,
    UnsafeTemplateError,
    compile_template,
    is_safe_destination,
)

#: A value that is code to a shell and to arithmetic: its first line runs a
#: command substitution as a shell line and as an arithmetic subscript.
HOSTILE = "a[$(touch CANARY_ARITH)]\ntouch CANARY_SHELL\n"
#: Values for the readers that need their own: one line for a variable name
#: (bash refuses a name with a newline), Python, and words that split.
PAYLOADS = {
    "name": "a[$(touch CANARY_NAME)]",
    "python": "__import__('os').system('touch CANARY_PY')",
    "split-test": "-v a[$(touch${IFS}CANARY_SPLIT)]",
    "split-find": "x -o -exec touch CANARY_FIND ;",
    "cmd": "touch CANARY_CMD",
    "perl": 'system("touch CANARY_PERL");',
    "cmake": "execute_process(COMMAND touch CANARY_CMAKE)",
    "make": "all:\n\ttouch CANARY_MAKE\n",
    "git": "[alias]\n\tst = !touch CANARY_GIT\n",
    "pwd": "d;touch CANARY_PWD;",
    "args": "sh -c 'touch CANARY_XARGS'",
    "split-or": "x -o -v a[$(touch${IFS}CANARY_OR)]",
    "split-printf": "-v a[$(touch${IFS}CANARY_PRINTF)] x",
    "read-d": "x a[$(touch${IFS}CANARY_READ)]",
    "glob-name": "za[$(touch CANARY_GLOB)]",
    "tar": "--use-compress-program=touch CANARY_TAR #",
    "sed": "a/p;e touch CANARY_SED\n#",
    "sort-option": "--compress-program=sh",
    "sort-command": "touch CANARY_SORT",
    "hook": ";touch CANARY_HOOK;",
    "grep-env": "touch CANARY_XZGREP; grep",
    "ansi": "\\'$(touch CANARY_ANSI)\" #",
    "prompt": "$(touch CANARY_PROMPT)",
    "brace": "}; touch CANARY_BRACE #",
    "regex": " ]]; touch CANARY_REGEX #",
    "arith-close": ")); touch CANARY_ARITH_CLOSE #",
}

#: The thirteenth review's readers of the script's own text: the first line
#: of the value as bash -c holds it (quoted: the text between the first
#: quotes), then evaluated in arithmetic, which runs its $( ).
_FIRST = " | tr '\\0' '\\n' | grep -a -m1 CANARY_ARITH | cut -d\"'\" -f2"
_RUN = 'echo "$(( y ))"'

#: The fourteenth review's class C (strict mode) and the seventeenth's B
#: (default mode): dpkg-buildpackage, given no value, runs shell code from its
#: own option text, which reads the script, values and all, from ps.
DPKG_HOOK_INIT = (
    "mkdir debian; printf 'p (1) u; urgency=low\\n\\n  * x\\n\\n"
    " -- A <a@b.c>  Thu, 01 Jan 2025 00:00:00 +0000\\n' > debian/changelog; "
    "printf 'Source: p\\n\\nPackage: p\\nArchitecture: all\\n' > debian/control; "
    "dpkg-buildpackage --hook-init='ps -eww -o args= "
    '| grep -a -m1 "^bash -c .*dpkg-buildp[a]ckage" | rev | cut -d";" -f2 | rev | sh\'; '
    "wc -c <<< {{ x.hook }}"
)

#: (class, template, tainted env names): refused by validate and at run time.
FLOWS = [
    # 1. a value read by an interpreter from stdin
    ("stdin", "bash <<< {{ x.v }}", ()),
    ("stdin", "sh < <(echo {{ x.v }})", ()),
    ("stdin", "echo {{ x.v }} | bash", ()),
    ("stdin", "printf '%s\\n' {{ x.v }} | grep -v nothing | sh", ()),
    ("stdin", "source /dev/stdin <<< {{ x.v }}", ()),
    ("stdin", "{ echo {{ x.v }}; } | sh", ()),
    ("stdin", 'echo "$(echo {{ x.v }})" | sh', ()),
    ("stdin", 'while read -r l; do sh -c "$l"; done <<< {{ x.v }}', ()),
    ("stdin", 'echo {{ x.v }} | while read -r l; do bash -c "$l"; done', ()),
    ("stdin", "echo {{ x.v }} | xargs -0 sh -c", ()),
    ("stdin", "echo {{ x.v }} > flow.sh; sh flow.sh", ()),
    ("stdin", "printf '%s\\n' {{ x.python }} | python3", ()),
    # 2. read/mapfile move a value into a variable that reaches arithmetic
    ("read", "read -r n <<< {{ x.v }}; (( n > 10 ))", ()),
    ("read", "read <<< {{ x.v }}; echo $(( REPLY + 1 ))", ()),
    ("read", "mapfile -t a <<< {{ x.v }}; echo $(( a[0] ))", ()),
    ("read", "while read -r n; do (( n )); done <<< {{ x.v }}", ()),
    ("read", "read -r n <<< {{ x.v }}; b[n]=1", ()),
    ("read", 'read -r n <<< {{ x.v }}; s=abc; echo "${s:n}"', ()),
    ("read", "read -r n <<< {{ x.v }}; [[ $n -eq 1 ]]", ()),
    ("read", 'read -r n <<< "$V"; (( n > 1 ))', ("V",)),
    ("read", "echo {{ x.v }} | { read -r n; echo $(( n )); }", ()),
    # 3. names after quote removal, and names built at run time
    ("names", 'read -r "C""NT" <<< {{ x.v }}; (( CNT ))', ()),
    ("names", "read -r C\\NT <<< {{ x.v }}; (( CNT ))", ()),
    ("names", "n=X; X={{ x.v }}; (( n ))", ()),
    ("names", "PRE_a={{ x.v }}; for n in ${!PRE*}; do (( $n )); done", ()),
    ("names", "X={{ x.name }}; declare -n r=X; (( r ))", ()),
    ("names", 'declare -i "N"; N={{ x.name }}', ()),
    # 4. options after quote removal
    ("options", 'printf "-v" {{ x.name }} %s x', ()),
    ("options", "printf \\-v {{ x.name }} %s x", ()),
    ("options", 'test "-v" {{ x.name }}', ()),
    ("options", "test $(echo -v) {{ x.name }}", ()),
    ("options", 'o=-v; [ "$o" {{ x.name }} ]', ()),
    # 5. an unquoted $( ) that carries a value is split again
    ("split", "[ $(echo {{ x.split_test }}) ]", ()),
    ("split", "find . -maxdepth 0 -name $(echo {{ x.split_find }})", ()),
    # 6. lines without values that change what later lines mean
    ("rebinding", "hash -p /bin/sh ls; ls -c {{ x.v }}", ()),
    ("rebinding", "BASH_CMDS[ls]=/bin/sh; ls -c {{ x.v }}", ()),
    ("rebinding", "enable -n echo; echo {{ x.v }}", ()),
    ("rebinding", "builtin alias ls=eval\nshopt -s expand_aliases\nls {{ x.v }}", ()),
    ("rebinding", "BASH_ALIASES[ls]=eval\nls {{ x.v }}", ()),
    ("rebinding", "eval 'ls() { sh -c \"$1\"; }'; ls {{ x.v }}", ()),
    ("rebinding", 'command_not_found_handle() { sh -c "$2"; }; nosuchcmd {{ x.v }}', ()),
    ("rebinding", "trap 'sh -c \"$BASH_COMMAND\"' DEBUG; : {{ x.v }}", ()),
    ("rebinding", "PATH=/nowhere; echo {{ x.v }}", ()),
    ("rebinding", "set -o posix; echo {{ x.v }}", ()),
    # 7. programs that run their arguments, missing from any hand-kept list
    ("wrapper", "sg root -c {{ x.v }}", ()),
    ("wrapper", "setarch x86_64 sh -c {{ x.v }}", ()),
    ("wrapper", "setpriv sh -c {{ x.v }}", ()),
    ("wrapper", "prlimit sh -c {{ x.v }}", ()),
    ("wrapper", "dbus-run-session -- sh -c {{ x.v }}", ()),
    ("wrapper", "some-new-launcher sh -c {{ x.v }}", ()),
    ("wrapper", "find . -maxdepth 0 -exec sh -c {{ x.v }} \\;", ()),
    # found by the second review: subscripts in names, programs made or
    # reached under another name, files written by any receiver
    ("review2", 'y={{ x.name }}; [ -v "a[y]" ]', ()),
    ("review2", "y={{ x.name }}; a=([y]=1)", ()),
    ("review2", "/proc/self/exe -c {{ x.v }}", ()),
    ("review2", "cp /bin/sh ./mysh; ./mysh -c {{ x.v }}", ()),
    ("review2", 'f=run.sh; echo {{ x.v }} | tee "$f" >/dev/null; sh run.sh', ()),
    ("review2", "sort -o run.sh <<< {{ x.v }}; sh run.sh", ()),
    ("review2", "echo {{ x.v }} > a; gzip a; zcat a.gz | sh", ()),
    ("review2", "echo {{ x.v }} > f; install -s --strip-program=sh f g", ()),
    # found by the third review: declarations behind builtin, arithmetic on
    # $- and in heredocs, files read without being named, programs under
    # other names, launchers, GNU option abbreviations
    ("review3", "echo {{ x.v }} > f; sh -c '. ./f; :'", ()),
    ("review3", "echo {{ x.v }} > f; gzip f; gzip -dc f.gz > g; sh g", ()),
    ("review3", "echo {{ x.v }} | c++ -wrapper /bin/sh,-s .", ()),
    ("review3", "echo {{ x.cmd }} | /lib64/ld-linux-x86-64.so.2 /usr/bin/xargs /usr/bin/env", ()),
    ("review3", "echo {{ x.python }} > f.py; python3 -c 'import f'", ()),
    ("review3", "builtin declare -i n; n={{ x.name }}", ()),
    ("review3", "command typeset -i n; n={{ x.name }}", ()),
    ("review3", "hBc={{ x.name }}; echo $(( $- ))", ()),
    ("review3", "read -r n <<< {{ x.v }}; cat <<EOF\n$(( n ))\nEOF", ()),
    ("review3", "builtin declare -n r=PS4; r={{ x.v }}; set -x; :", ()),
    ("review3", "mkdir t; echo {{ x.perl }} > t/a.t; prove", ()),
    ("review3", "echo {{ x.cmd }} | tini-static -s /usr/bin/xargs /usr/bin/env", ()),
    ("review3", "echo {{ x.cmake }} > s.cmake; ctest -S s.cmake", ()),
    ("review3", "echo {{ x.v }} >&f; sh f", ()),
    ("review3", "echo {{ x.v }} > f; csplit -s f 1; sh xx01", ()),
    ("review3", "echo {{ x.v }} > f; install -s --strip-prog=sh f g", ()),
    ("review3", "{ echo {{ x.v }}; seq 20000; } | sort -r -S 1k --compress=sh > out", ()),
    ("review3", "N={{ x.v }}; builtin export N; sh -c 'eval \"$N\"'", ()),
    ("review3", "echo {{ x.v }} | sort -of; sh f", ()),
    ("review3", "N={{ x.v }}; export N; /lib64/ld-linux-x86-64.so.2 /bin/sh -c 'eval \"$N\"'", ()),
    ("review3", "echo {{ x.make }} > Makefile; make -s", ()),
    ("review3", "git init -q .; printf '%s\\n' {{ x.git }} >> .git/config; git st", ()),
    # the same review, with programs the test machine runs from elsewhere
    ("review3-listed", "echo {{ x.v }} | ipython3 --no-banner --quick", ()),
    ("review3-listed", "echo {{ x.python }} > conftest.py; pytest -q", ()),
    ("review3-listed", "echo {{ x.v }} > l.py; pygmentize -x -l l.py:L /dev/null", ()),
    ("review3-listed", "echo {{ x.cmd }} | pyenv exec /usr/bin/xargs /usr/bin/env", ()),
    # found by the fourth review: a shell that reads the value where no parse
    # follows it (file names, $PWD, an exported variable, /proc), a group's
    # redirect, a file called null, /proc/self/exe spelled another way
    ("review4", "touch -- {{ x.cmd }}; sh -c 'ls | sh'", ()),
    ("review4", 'mkdir -p -- {{ x.pwd }} && cd -- {{ x.pwd }} && sh -c "ls $PWD"', ()),
    ("review4", "TERM={{ x.v }}; sh -c 'eval \"$TERM\"'", ()),
    ("review4", "{ cat; } < <(echo {{ x.v }}) > f; sh f", ()),
    ("review4", "{ cat; } < <(echo {{ x.make }}) > Makefile; make -s", ()),
    ("review4", "echo {{ x.v }} > null; sh null", ()),
    ("review4", "//proc/self/exe -c {{ x.v }}", ()),
    ("review4-listed", "cd / && proc/self/exe -c {{ x.v }}", ()),  # (would touch /)
    # found by the fifth review: a value as a file name read back by an
    # executor, words tree-sitter takes for a comment or for more redirect
    # targets, /dev/.. paths, programs that run their input
    ("review5", "touch -- {{ x.args }}; ls > list.txt; xargs -L1 -a list.txt env", ()),
    ("review5", "echo {{ x.v }} > f; echo a\f#; sh f", ()),
    ("review5", 'X={{ x.v }}; [ -n "$X" ]#; eval "$X"', ()),
    ("review5", "echo {{ x.v }} > f; cat\\\n#; sh f", ()),
    ("review5", "find >/dev/null . -maxdepth 0 -exec sh -c {{ x.v }} \\;", ()),
    ("review5", "printf '%s\\n' {{ x.make }} > /dev/../proc/self/cwd/Makefile; make -s", ()),
    ("review5-listed", "json_pp -f eval -t null <<< {{ x.perl }}", ()),
    # tree-sitter ends a word at a vertical tab or a form feed, bash does not:
    # bash runs sh f (with X=$'\vtrue'), the parser saw true sh f.  (A
    # carriage return never gets this far: YAML and Jinja make it a newline.)
    ("review6", "echo {{ x.v }} > f; X=\vtrue sh f", ()),
    ("review6", "echo {{ x.v }} > f; X=\ftrue sh f", ()),
    # tar * reads a file name as an option: fallocate made it (in the default
    # mode any program given a value as an argument may make a file it names)
    ("review8", "echo n > n.txt; fallocate -l1 -- {{ x.tar }}; tar -cf b.tar *", ()),
    # ninth review: "!" before a compound command made tree-sitter read "{"
    # (and if, then, fi...) as a command, hiding the eval inside
    ("review9", 'V={{ x.cmd }}; ! { eval "$V"; }', ()),
    ("review9", 'V={{ x.cmd }}; ! if true; then eval "$V"; fi', ()),
    # review 37: tree-sitter skips a backslash before a blank between tokens;
    # bash joins the lines of a continuation and keeps \<space> in the word
    ("review37", "x=1\\\necho eval {{ x.cmd }}", ()),
    ("review37", "LC_ALL=C\\\techo eval {{ x.cmd }}", ()),
    ("review37", 'label="b"\\ echo eval {{ x.cmd }}', ()),
    ("review37", "echo price: $\\\n{{ x.ansi }}", ()),
    ("review37", 't={{ x.prompt }}\necho "t: $\\\n{t@P}"', ()),
    ("review37", 'm={{ x.cmd }}\necho "m: $\\\n(eval $m)"', ()),
    # review 39: a quote or an escape tree-sitter keeps as text in a ${ }
    # operand or an =~ pattern, and a # it reads as a comment in arithmetic,
    # open or end a quote for bash: the value's word is no longer one
    ("review39", 'echo "${x%a"}" } {{ x.prompt }} # "', ()),
    ("review39", "echo ${x/'a} } {{ x.brace }} # '", ()),
    ("review39", 'echo "${x:-/\\}" {{ x.prompt }} "}"', ()),
    ("review39", "[[ a =~ '$ ]] && echo {{ x.regex }} #' ]]", ()),
    ("review39", "(( 1 #'\n)); echo {{ x.arith_close }} #'\n# ))", ()),
    # review 41: in a=( ... ) bash reads a word that starts with [ up to its
    # matching ], across ) ; and newlines, as one arithmetic key
    ("review41", "a=( [ ) ; echo {{ x.prompt }} ; a=( ]=1 )", ()),
    ("review41", "a+=( x [ )\necho {{ x.prompt }}\na=( ]=1 )", ()),
    # review 42: [ is a command to bash, so | and << in it are the shell's;
    # tree-sitter joins a lone $ to the word after a blank ($<newline>eval)
    ("review42", "[ a << true ]\necho {{ x.prompt }}\ntrue", ()),
    ("review42", "printf '%s\\n' {{ x.cmd }} > ']'\n[ a | sh ]", ()),
    ("review42", "x=$\neval echo {{ x.v }}", ()),
    ("review42", "x=$ #; echo {{ x.v }}", ()),
    # review 44: bash reads an extglob pattern in [[ == ]] to its matching ),
    # quotes and # included, extglob on or off
    ("review44", "[[ x == +(#' ]]; echo {{ x.prompt }}; #') ]]", ()),
    ("review44", "[[ x == @(a ]]  # '\necho {{ x.prompt }}  # ') ]]", ()),
    # review 48: outside [[ ]], tree-sitter reads a "pattern" after == or =~
    # over ; | and lines (bash runs them); <<"E"x ends at Ex for bash only
    ("review48", "echo [[ a =~ x|eval : ]] {{ x.hook }}", ()),
    ("review48", "echo =~ x\neval : ]] {{ x.hook }}", ()),
    ("review48", "echo == x;cat<<true;: ]\necho {{ x.prompt }}\ntrue", ()),
    ("review48", ': <<"E"x\nE\necho "\nEx\necho " {{ x.prompt }} "\n#"', ()),
    ("review48", ': <<\'E\'x\nE\necho "\nEx\necho " {{ x.prompt }} "\n#"', ()),
    ("review48", ': <<"E"1\nE\necho "\nE1\necho " {{ x.prompt }} "\n#"', ()),
    # review 50: a line ends [ ] for bash; [[-n is a word, not [[; <( in
    # [[ ]], a ${ } pattern or =~ is a process to bash; words after a
    # heredoc's start with no command before are bash's command
    ("review50", "[ a = b -o\neval = {{ x.hook }} ]", ()),
    ("review50", '[[-n "$CI" || tee <<true ]]\necho {{ x.prompt }}\ntrue', ()),
    ("review50", "printf '%s\\n' {{ x.cmd }} > ']]'\n[[-n \"$CI\" || sh ]]", ()),
    ("review50", "echo {{ x.cmd }} | [[ -n x<(sh) ]]", ()),
    ("review50", 'x=1; echo {{ x.cmd }} | echo "${x%<(sh)}"', ()),
    ("review50", 'printf "%s\\n" {{ x.cmd }} | [[ a =~ x<(sh) ]]', ()),
    ("review50", "printf '%s\\n' {{ x.cmd }} > f\n2>/dev/null <<E sh f\nE", ()),
    ("review5-listed", "echo {{ x.python }} > f.py; pydoc3 ./f.py", ()),
    # the tenth review: a name the process exports already (TERM) and a
    # shell find starts; printenv reads an env: value back untainted; $(cat)
    # inside a block whose stdin is a value
    ("review10", "TERM={{ x.cmd }}; find . -maxdepth 0 -exec sh -c 'eval \"$TERM\"' \\;", ()),
    ("review10", 'v="$(printenv V)"; echo "$(( v + 1 ))"', ("V",)),
    (
        "review10",
        '{ w="$(cat)"; } < <(printf \'%s\' {{ x.sed }}); echo a > w.txt; sed -n "/$w/p" w.txt',
        (),
    ),
    ("review10", 'printf \'%s\' {{ x.sed }} | { w="$(cat)"; echo a | sed -n "/$w/p"; }', ()),
    # the environment: an interpreter's own code names a tainted variable
    ("environment", "python3 -c 'import os; exec(os.environ[\"P\"])'", ("P",)),
    ("environment", "X={{ x.v }}; export X; sh -c 'eval \"$X\"'", ()),
    ("environment", "X={{ x.v }} sh -c 'eval \"$X\"'", ()),
    # the thirteenth review: select's menu and what a $( ) prints on stderr
    # go where the statement's stderr goes; a glob that expands to file names
    # values chose, read as options; the script's text read back through
    # /proc spelled as a pattern, relative after cd /, or pmap; a launcher
    # whose executor comes after an option's argument
    ("review13", "select i in {{ x.make }}; do break; done 2>Makefile; make -s", ()),
    ("review13", '{ y="$(echo {{ x.make }} >&2)"; } 2>Makefile; make -s', ()),
    (
        "review13",
        "touch -- {{ x.sort_option }} {{ x.sort_command }}; { ls; seq 30000; } > data.txt; "
        "sort -S 1k * > /dev/null",
        (),
    ),
    (
        "review13",
        f'echo {{{{ x.v }}}} >/dev/null; y="$(cat /[p]roc/$$/cmdline{_FIRST})"; {_RUN}',
        (),
    ),
    ("review13", f'echo {{{{ x.v }}}} >/dev/null; y="$(cat /pr?c/$$/cmdline{_FIRST})"; {_RUN}', ()),
    (
        "review13",
        f'echo {{{{ x.v }}}} >/dev/null; y="$(cat /{{proc,x}}/$$/cmdline{_FIRST})"; {_RUN}',
        (),
    ),
    (
        "review13",
        f'echo {{{{ x.v }}}} >/dev/null; cd / && y="$(cat proc/$$/cmdline{_FIRST})"; cd - >/dev/null; {_RUN}',
        (),
    ),
    ("review13", f'echo {{{{ x.v }}}} >/dev/null; y="$(pmap $${_FIRST})"; {_RUN}', ()),
    ("review13-listed", "my-launcher -s st flock lk -c {{ x.cmd }}", ()),
    ("review13-listed", "debconf -f noninteractive flock lk -c {{ x.cmd }}", ()),
    ("review13-listed", "echo {{ x.v }} > main.tf; terraform apply -auto-approve", ()),
    # the sixteenth review (N2): a GTFOBins program, given no value, runs sh -c
    # from a short option (tar -I; gcc -wrapper, git -c core.pager, zip -TT
    # alike), whose code reads the script back from the process list
    (
        "review16",
        'tar -cf x.tar -I \'ps -eww -o args= | grep -ao "touch CANARY_[A-Z][A-Z]*" '
        "| head -1 | sh; cat' /etc/hostname; wc -c <<< {{ x.hook }}",
        (),
    ),
    # the seventeenth review: a shell script that evaluates its environment
    # (xzgrep runs $GREP); a program outside GTFOBins that runs shell code
    # from its own option text, beside a value in the default mode
    ("review17", "GREP={{ x.grep_env }} xzgrep -c root /etc/hostname; true", ()),
    (
        "review17",
        DPKG_HOOK_INIT,
        (),
    ),
]


def _values() -> dict:
    fields = {key.replace("-", "_"): value for key, value in PAYLOADS.items()}
    return {"x": Fields({"v": HOSTILE, "w": "-v", **fields})}


#: The environment the scripts run with: V holds the hostile value, P the
#: Python one; TERM is one a process usually has already.
ENV = {"PATH": "/usr/bin:/bin", "V": HOSTILE, "P": PAYLOADS["python"], "TERM": "dumb"}


def _ids(flows: list) -> list[str]:
    return [f"{kind}:{source}" for kind, source, _ in flows]


@pytest.mark.parametrize(("kind", "source", "tainted"), FLOWS, ids=_ids(FLOWS))
def test_each_flow_is_refused_by_validate(kind, source, tainted) -> None:
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, tainted_env=tainted
    )
    assert template is None and problems, source


@pytest.mark.parametrize(("kind", "source", "tainted"), FLOWS, ids=_ids(FLOWS))
def test_each_flow_is_refused_at_run_time_without_the_static_check(kind, source, tainted) -> None:
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source), frozenset(tainted))
    with pytest.raises(UnsafeTemplateError, match="refused before it ran"):
        template.render(_values())


#: The flows whose programs every test machine has (bash, sh, coreutils,
#: findutils, python3): run with the check switched off, each runs the value.
EXPLOITABLE = [
    flow
    for flow in FLOWS
    if flow[0]
    not in (
        "wrapper",
        "rebinding",
        "review3-listed",
        "review4-listed",
        "review5-listed",
        "review13-listed",
    )
    or flow[1].startswith(("hash", "BASH_CMDS", "eval", "command_not", "find"))
]


@pytest.mark.parametrize(("kind", "source", "tainted"), EXPLOITABLE, ids=_ids(EXPLOITABLE))
def test_each_flow_is_a_real_exploit_without_the_check(
    tmp_path, monkeypatch, kind, source, tainted
) -> None:
    """The mutation that removes the whole defence: every case then runs the value."""
    monkeypatch.setattr(shell_check, "check_script", lambda *args, **kwargs: [])
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source), frozenset(tainted))
    script = template.render(_values())
    subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )
    assert list(tmp_path.rglob("CANARY*")), f"not an exploit: {script!r}"


#: Flows that stay data: accepted, and run in bash without running the value.
SAFE_FLOWS = [
    'read -r n <<< {{ x.v }}; echo "$n"',
    "IFS= read -r line <<< {{ x.v }}; printf '%s\\n' \"$line\"",
    "mapfile -t a <<< {{ x.v }}; printf '%s\\n' \"${a[@]}\"",
    'echo {{ x.v }} | while IFS= read -r l; do echo "$l"; done',
    'for i in {{ x.v }} {{ x.w }}; do echo "$i"; done',
    'n=0; for ((i=0; i<3; i++)); do n=$((n + i)); done; echo {{ x.v }} "$n"',
    '[ "$(echo {{ x.v }})" = x ] || echo no',
    "echo {{ x.v }} | grep -c touch",
    "cat <<< {{ x.v }} | wc -c",
    "printf -- {{ x.v }}",
    'X={{ x.v }}; export X; echo "$X"',
    "echo {{ x.v }} > out.txt; cat out.txt",
    "shopt -s nullglob; set -euo pipefail; echo {{ x.v }}",
    '[ "$V" = a ] || echo "$V"',
    # cd takes a value (bash sets PWD from it; the review-7 fix of a refusal)
    "mkdir -p -- {{ x.glob_name }}; cd -- {{ x.glob_name }} && pwd && ls",
    # a line continued after a blank, and an escaped blank inside a word
    "printf '%s\\n' \\\n  {{ x.v }} \\\n  end",
    'echo "a\\ b" a\\ b {{ x.v }}',
    # an array of globs and plain words beside a value
    'touch a.txt; a=( *.txt [ab]* one ); echo {{ x.v }} "${a[@]}"',
]


@pytest.mark.parametrize("source", SAFE_FLOWS)
def test_accepted_flows_run_without_running_the_value(tmp_path, source) -> None:
    tainted = ("V",) if "$V" in source else ()
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, tainted_env=tainted
    )
    assert problems == [], problems
    script = template.render(_values())
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )
    assert not list(tmp_path.glob("CANARY*")), script
    assert result.returncode == 0, result


# --- strict mode: consumers ---------------------------------------------------------


def test_strict_mode_lets_only_the_consumers_and_the_builtin_set_receive() -> None:
    sentinel = ["'RVtx0'"]
    strict = {"consumers": ["git"]}
    assert check_script("git clone -- 'RVtx0' repo", sentinel, **strict) == []
    assert check_script("echo 'RVtx0' | cat", sentinel, **strict) == []
    (finding,) = check_script("sort -- 'RVtx0'", sentinel, **strict)
    assert (finding.rule, finding.detail) == ("consumer", "sort")
    (finding,) = check_script("echo 'RVtx0' | jq .", sentinel, **strict)
    assert (finding.rule, finding.detail) == ("consumer", "jq, through its stdin")
    # printf takes a literal format in strict mode, even after --
    assert [f.rule for f in check_script("printf -- 'RVtx0'", sentinel, **strict)] == [
        "printf-option"
    ]
    # the default mode refuses git (GTFOBins lists it) and sort (not a data
    # program), and lets a data program receive the value
    assert [f.rule for f in check_script("git clone -- 'RVtx0'", sentinel)] == ["executor"]
    assert [f.rule for f in check_script("sort -- 'RVtx0'", sentinel)] == ["strict-program"]
    assert check_script("grep -c -- 'RVtx0' f", sentinel) == []


def test_strict_mode_runs_only_named_and_data_programs_beside_values() -> None:
    """Either mode is a closed world: a program that receives no value still
    may not run beside one unless it is a consumer, the built-in set or a
    data program (``STRICT_PROGRAMS``); the seventeenth review ran
    ``dpkg-buildpackage --hook-init`` beside a value in the default mode."""
    sentinel = ["'RVtx0'"]
    strict = {"consumers": ["wc"]}
    data = "mkdir -p out; cp a out/; ls out | head -n 1; sleep 0; wc -c -- 'RVtx0'"
    assert check_script(data, sentinel, **strict) == []
    assert check_script("/usr/bin/head -c1 /etc/hostname; wc -- 'RVtx0'", sentinel, **strict) == []
    for program in (
        "dpkg-buildpackage --hook-init=x",
        "gpg --list-keys",
        "sort a",
        "./build",
        "./bin/head f",  # whatever an earlier step put there
        "/usr/local/bin/cat f",
    ):
        findings = check_script(f"{program}; wc -c -- 'RVtx0'", sentinel, **strict)
        assert [(f.rule, f.index) for f in findings] == [("strict-program", None)], program
    # named, it runs; a followed wrapper is judged by what it runs
    assert check_script("timeout 5 gpg -k; wc -- 'RVtx0'", sentinel, consumers=["wc", "gpg"]) == []
    (finding,) = check_script("timeout 5 gpg -k; wc -- 'RVtx0'", sentinel, **strict)
    assert (finding.rule, finding.detail) == ("strict-program", "gpg, not in consumers:")
    # the default mode is a closed world too
    for program in ("dpkg-buildpackage --hook-init=x", "gpg -k", "./build"):
        findings = check_script(f"{program}; wc -c -- 'RVtx0'", sentinel)
        assert [(f.rule, f.index) for f in findings] == [("strict-program", None)], program


#: The third review's strict-mode bypasses: (template, consumers).  Each one
#: reached a program nobody named (a shell, python3, make, git) through a
#: file, a declaration behind ``builtin`` or arithmetic the pass missed.
STRICT_FLOWS = [
    ("echo {{ x.v }} > f; sh -c '. ./f; :'", ["grep"]),
    ("echo {{ x.python }} > f.py; python3 -c 'import f'", ["grep"]),
    ("echo {{ x.v }} > f; gzip f; gzip -dc f.gz > g; sh g", ["gzip"]),
    ("builtin declare -n r=PS4; r={{ x.v }}; set -x; :", ["grep"]),
    ("builtin declare -i n; n={{ x.name }}", ["grep"]),
    ("hBc={{ x.name }}; echo $(( $- ))", ["grep"]),
    ("read -r n <<< {{ x.v }}; cat <<EOF\n$(( n ))\nEOF", ["grep"]),
    ("echo {{ x.v }} >&f; sh f", ["grep"]),
    ("N={{ x.v }}; builtin export N; sh -c 'eval \"$N\"'", ["grep"]),
    ("echo {{ x.v }} | sort -of; sh f", ["sort"]),
    ("echo {{ x.make }} > Makefile; make -s", ["grep"]),
    ("git init -q .; printf '%s\\n' {{ x.git }} >> .git/config; git st", ["grep"]),
    (": > {{ x.cmd }}; sh -c 'ls | sh'", ["grep"]),
    ("TERM={{ x.v }}; sh -c 'eval \"$TERM\"'", ["grep"]),
    ("{ cat; } < <(echo {{ x.v }}) > f; sh f", ["grep"]),
    ("echo {{ x.v }} > null; sh null", ["grep"]),
    ("xargs sh -c {{ x.v }} < /dev/null", ["xargs"]),
    (": > {{ x.args }}; xargs -L1 -a <(ls) env", ["grep"]),
    ("printf '%s\\n' {{ x.make }} > /dev/../proc/self/cwd/Makefile; make -s", ["grep"]),
    ("echo {{ x.v }} > f; echo a\v#; sh f", ["grep"]),
    ('X={{ x.v }}; y=(a)#; eval "$X"', ["grep"]),
    ("echo {{ x.v }} > f; cat\\\t#; sh f", ["grep"]),
    ("find >/dev/null . -maxdepth 0 -exec sh -c {{ x.v }} \\;", ["grep"]),
    # the sixth review: a value read back from a file, a file name or git is
    # not tainted; test -v, an unquoted test word or printf's format runs it
    ('echo {{ x.name }} > n; m="$(< n)"; if [ -v "$m" ]; then echo set; fi', ["grep"]),
    ('echo {{ x.name }} > n; m="$(< n)"; if [[ -v $m ]]; then echo set; fi', ["grep"]),
    ('echo {{ x.split_or }} > n; v="$(< n)"; if [ -n $v ]; then echo "$v"; fi', ["grep"]),
    ('echo {{ x.split_printf }} > n; m="$(< n)"; printf $m', ["grep"]),
    ('echo {{ x.split_or }} > n; { m="$(cat)"; } < n; if [ -n $m ]; then echo "$m"; fi', ["grep"]),
    (
        'echo done > {{ x.split_or }}; for f in *; do if [ -n $f ]; then echo "$f"; fi; done',
        ["grep"],
    ),
    (
        "git init -q r && cd r && git -c user.name=b -c user.email=b@x commit -q --allow-empty"
        ' -m {{ x.split_or }}; t="$(git log -1 --format=%s)"; if [ -n $t ]; then echo "$t"; fi',
        ["git"],
    ),
    # the eighth review: text tree-sitter keeps as a leaf where bash expands
    ('V={{ x.cmd }}; n=o.txt; echo "${n%$(eval "$V")}"', ["grep"]),
    ('V={{ x.name }}; f=a.txt; echo "${f%.${EXT[V]}}"', ["grep"]),
    ('V={{ x.cmd }}; echo "${L:-\'$(eval "$V")\'}"', ["grep"]),
    ("V={{ x.name }}; cat <<EOF\ncount: $[V]\nEOF", ["grep"]),
    # the ninth review: a ${ } operand inside arithmetic; ! (( )) read as
    # two subshells by tree-sitter, as arithmetic by bash
    ('V={{ x.name }}; n=1; echo "total: $(( ${n:+V} ))"', ["grep"]),
    ("V={{ x.name }}; n=1; echo $(( ${n/1/V} ))", ["grep"]),
    ("read -r n <<< {{ x.name }}; if ! (( n > 1 )); then echo small; fi", ["grep"]),
    # jobs -x runs a command: followed like a wrapper
    ("printf '%s\\n' {{ x.make }} > Makefile; jobs -x make -s", ["grep"]),
    ("T={{ x.cmd }}; export T; jobs -x bash -c 'eval \"$T\"'", ["grep"]),
    # the seventh review: read's option words, control blanks around a
    # redirect, brace expansion around a value
    ('echo done > {{ x.read_d }}; m="$(echo *)"; read -r -d $m line <<< hello', ["grep"]),
    ("echo s > out.log; echo done > {{ x.glob_name }}; read -r -d * line <<< hello", ["grep"]),
    ('read -r line <<<\v {{ x.name }}; echo "$line"', ["grep"]),
    ("test -v >\f {{ x.name }}", ["grep"]),
    ("if test {-v,{{ x.name }}}; then echo set; fi", ["grep"]),
    ("[ -n {x,-o,-v,{{ x.name }}} ] || echo no", ["grep"]),
    # the tenth review: bash evaluates what is assigned to OPTIND, RANDOM,
    # SRANDOM and HISTCMD; SHLVL is a number only until assigned; $(cat)
    # in a block fed a value; a name exported already reaches find's shell
    ('read -r OPTIND <<< {{ x.name }}; echo "$OPTIND"', ["grep"]),
    ('printf -v RANDOM %s {{ x.name }}; echo "$RANDOM"', ["grep"]),
    (': > {{ x.glob_name }}; SRANDOM="$(echo za*)"; echo "$SRANDOM"', ["grep"]),
    (': > {{ x.glob_name }}; SHLVL="$(echo za*)"; echo "$(( SHLVL + 1 ))"', ["grep"]),
    ('{ n="$(cat)"; } <<< {{ x.name }}; echo "$(( n + 1 ))"', ["grep"]),
    ('printf \'%s\' {{ x.name }} | { n="$(cat)"; echo "$(( n + 1 ))"; }', ["grep"]),
    ("TERM={{ x.cmd }}; find . -maxdepth 0 -exec sh -c 'eval \"$TERM\"' \\;", ["grep"]),
    # the eleventh review: a backtick in an unquoted heredoc runs, unseen by
    # tree-sitter; {a[m]}> evaluates m as a subscript; $(</dev/stdin) in a
    # block fed a value holds it
    ("V={{ x.cmd }}; export V\ncat <<EOF >/dev/null\n`printenv V | sh`\nEOF", ["grep"]),
    ('read -r m <<< {{ x.name }}; echo "$m" {a[m]}>/dev/null', ["grep"]),
    ('{ m="$(</dev/stdin)"; } <<< {{ x.name }}; echo "$(( m + 1 ))"', ["grep"]),
    # the twelfth review: a nested subscript in a descriptor variable
    ('read -r m <<< {{ x.name }}; echo "$m" {a[b[m]]}>/dev/null', ["grep"]),
    # unset through a wrapper, and array keys with += or nested brackets
    ("read -r m <<< {{ x.name }}; a=(1); command unset 'a[m]'", ["grep"]),
    ("read -r m <<< {{ x.name }}; a=([m]+=1)", ["grep"]),
    ("read -r m <<< {{ x.name }}; a=([b[m]]=1)", ["grep"]),
    # the thirteenth review: sort, named by nobody and given no value, runs
    # sh on a file a $( )'s stderr filled; the script's text through /[p]roc
    (
        '{ y="$(echo {{ x.sort_command }} >&2; printf "%s\\n" {1..30000} >&2)"; } 2>d; '
        "sort -S 1k --compress-program=sh d > /dev/null",
        ["grep"],
    ),
    (f'echo {{{{ x.v }}}} >/dev/null; y="$(cat /[p]roc/$$/cmdline{_FIRST})"; {_RUN}', ["grep"]),
    # the fifteenth review: a backup renames the old copy of a shell under the consumer's name
    ("cp /bin/b?sh w; cp -b -S c /bin/true w; ./wc -c {{ x.cmd }}", ["wc"]),
    # the fourteenth review (C): a program nobody named, given no value, runs
    # shell code from its own option text, which reads the script from ps
    (
        DPKG_HOOK_INIT,
        ["wc"],
    ),
]


@pytest.mark.parametrize(("source", "consumers"), STRICT_FLOWS)
def test_each_strict_flow_is_refused_statically_and_at_run_time(source, consumers) -> None:
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, consumers=consumers
    )
    assert template is None and problems, source
    unchecked = Template(
        source,
        True,
        frozenset({"x"}),
        _SHELL.parse(source),
        frozenset(),
        consumers=frozenset(consumers),
    )
    with pytest.raises(UnsafeTemplateError, match="refused before it ran"):
        unchecked.render(_values())


@pytest.mark.parametrize(("source", "consumers"), STRICT_FLOWS)
def test_each_strict_flow_is_a_real_exploit_without_the_check(
    tmp_path, monkeypatch, source, consumers
) -> None:
    monkeypatch.setattr(shell_check, "check_script", lambda *args, **kwargs: [])
    template = Template(source, True, frozenset({"x"}), _SHELL.parse(source), frozenset())
    subprocess.run(
        ["bash", "-c", template.render(_values())],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )
    assert list(tmp_path.rglob("CANARY*")), f"not an exploit: {source!r}"


def test_what_pwd_prints_and_what_zip_reads_carry_a_value() -> None:
    """The sixth review's last two classes, without a program every machine
    has: a templated ``cwd:`` (PWD tainted) reaches ``$(pwd)``; ``ZIPOPT``
    is read by zip as options (``-TT cmd`` runs cmd)."""
    pwd = 'd="$(basename "$(pwd)")"; if [ -v "$d" ]; then echo set; fi'
    assert "test-operator" in [f.rule for f in check_script(pwd, [], ("PWD",), consumers=["git"])]
    refused = check_script('d="$(pwd)"; git log -- "$d"', [], ("PWD",))
    assert {(f.rule, f.detail) for f in refused} >= {("executor", "git")}
    (finding,) = check_script("ZIPOPT='RVz0' zip -q o.zip f", ["'RVz0'"], consumers=["zip"])
    assert (finding.rule, finding.detail) == ("env-name", "ZIPOPT")


#: Scripts that write a value to a file and run only programs that do not
#: run code (or, in strict mode, consumers that are not executors): accepted.
FILE_SAFE = [
    ("echo {{ x.v }} > out.txt; wc -c out.txt; sort out.txt > sorted.txt", ["sort", "wc"]),
    ("echo {{ x.v }} | sort -o sorted.txt; cat sorted.txt", ["sort"]),
    ("echo {{ x.v }} | grep -c touch; git status --short", ["git", "grep"]),
    ("git clone -- {{ x.v }} src; git -C src log -1", ["git"]),
    ("echo {{ x.v }} > title.txt; grep -c a title.txt", ["grep"]),
]


@pytest.mark.parametrize(("source", "consumers"), FILE_SAFE)
def test_files_that_hold_values_beside_programs_that_run_none(source, consumers) -> None:
    """The file rule's edge: a stream filter (grep) writes no file, so git may
    run after it; a value given to git as an argument is git's to keep."""
    _, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, consumers=consumers
    )
    assert problems == [], problems


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True)


def test_a_templated_cwd_taints_pwd_for_the_command(tmp_path: Path) -> None:
    """The fourth review's E: a step whose ``cwd:`` is templated runs in a
    directory a value named, so ``$PWD`` holds the value: its ``run`` holds
    a value even with no ``{{ }}``, and a shell in it is refused."""
    refused = _validate(one_step_agent(tmp_path, 'sh -c "ls $PWD"', cwd="{{ x.v }}"))
    assert refused.returncode != 0 and "[executor]" in refused.stderr, refused.stderr
    assert "sh runs with a value in its environment ($OLDPWD, $PWD)" in refused.stderr
    assert _validate(one_step_agent(tmp_path, "ls", cwd="{{ x.v }}")).returncode == 0


def test_consumers_from_the_installed_cli(tmp_path: Path) -> None:
    """runner validate (the installed wheel): git needs consumers:, a shell can never be one."""
    run = "git clone -- {{ x.url }} repo"
    refused = _validate(one_step_agent(tmp_path, run))
    assert refused.returncode != 0 and "[executor]" in refused.stderr, refused.stderr
    assert "consumers:" in refused.stderr
    assert _validate(one_step_agent(tmp_path, run, consumers=["git"])).returncode == 0
    assert _validate(one_step_agent(tmp_path, run, top={"consumers": ["git"]})).returncode == 0
    shell = _validate(one_step_agent(tmp_path, "echo {{ x.v }}", consumers=["bash"]))
    assert shell.returncode != 0 and "can never be a consumer" in shell.stderr, shell.stderr


# --- the configured shell ------------------------------------------------------------


def test_a_shell_the_checker_does_not_model_refuses_placeholders(tmp_path: Path) -> None:
    """shell: python3 reads the text as Python: a quoted word is no protection."""
    path = one_step_agent(tmp_path, "print({{ x.v }})", environment={"shell": "python3"})
    result = _validate(path)
    assert result.returncode != 0 and "[shell-dialect]" in result.stderr, result.stderr
    # env values still may: the program reads its environment as data
    ok = one_step_agent(
        tmp_path,
        "import os; print(os.environ['V'])",
        env={"V": "{{ x.v }}"},
        environment={"shell": "python3"},
    )
    assert _validate(ok).returncode == 0
    # and at run time, the sandbox's shell decides
    template, problems = compile_template("echo {{ x.v }}", shell=True, fields_by_name={"x": None})
    assert problems == [] and template is not None
    with pytest.raises(UnsafeTemplateError, match=r"\[shell-dialect\]"):
        template.render(_values(), shell="/usr/bin/python3")
    assert template.render(_values(), shell="/bin/bash").startswith("echo '")


@pytest.mark.parametrize(
    "source",
    [
        "cat <<< {{ x.v }}",
        "a=({{ x.v }})",
        "[[ {{ x.v }} == a ]]",
        "cat <(echo {{ x.v }})",
        # review 41's F2: an array without a value in it, or with a [k]= key
        "a=( one ); echo {{ x.v }}",
        "a=( [1]=one ); echo {{ x.v }}",
    ],
)
def test_sh_refuses_what_dash_lacks(source) -> None:
    template, _ = compile_template(source, shell=True, fields_by_name={"x": None})
    if template is None:
        return  # refused for bash already
    with pytest.raises(UnsafeTemplateError, match=r"\[shell-dialect\]"):
        template.render(_values(), shell="sh")


def test_the_dash_dialect_runs_what_it_accepts(tmp_path: Path) -> None:
    source = 'X={{ x.v }}; echo "$X" | while read -r l; do echo "$l"; done'
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == []
    script = template.render(_values(), shell="sh")
    dash = shutil.which("dash") or shutil.which("sh")
    result = subprocess.run([dash, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert "touch CANARY_SHELL" in result.stdout
    assert not list(tmp_path.glob("CANARY*"))


def test_every_flow_is_refused_by_the_installed_cli(tmp_path: Path) -> None:
    """The installed wheel's ``runner validate``: one step per flow, each one a problem."""
    steps = []
    for _, source, tainted in FLOWS:
        step: dict = {"run": source}
        if tainted:
            step["env"] = {name: "{{ x.v }}" for name in tainted}
        steps.append(step)
    document = {
        "version": 1,
        "inputs": {"acme.x": {"as": "x", "schema": {"type": "object"}}},
        "agent": {
            "model": "m",
            "environment": {"sandbox": "local", "hooks": [{"name": "h", "on_create": steps}]},
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(json.dumps(document))
    result = _validate(path)
    assert result.returncode != 0
    refused = {int(index) for index in re.findall(r"on_create\[(\d+)\]\.run\)", result.stderr)}
    assert refused == set(range(len(FLOWS))), result.stderr


#: (template, the value of x.p): a value that chooses where a write lands or
#: where cd goes may not name the system's directories nor climb with ..
#: (the seventeenth review's V1 wrote a library and /etc/ld.so.preload so).
SYSTEM_DESTINATIONS = [
    ("printf '%s' {{ x.v }} > {{ x.p }}", "/etc/ld.so.preload", None),
    ("printf '%s' {{ x.v }} > {{ x.p }}", "//etc/./ld.so.preload", ["wc"]),
    ("printf '%s' {{ x.v }} > out/{{ x.p }}", "../../../etc/ld.so.preload", None),
    ("printf '%s\\n' {{ x.v }} | tee -a {{ x.p }}", "/etc/nsswitch.conf", ["tee"]),
    ("cd -- {{ x.p }} && printf '%s' {{ x.v }} > ld.so.preload", "/etc", None),
    # review 18: the whole word counts, and a link's or a move's source
    ("printf '%s' {{ x.v }} > /{{ x.p }}", "etc/ld.so.preload", ["wc"]),
    ("cd {{ x.p }}tc && printf '%s' {{ x.v }} > ld.so.preload", "/e", None),
    ("cp -s -- {{ x.p }} c.conf; printf '%s' {{ x.v }} > c.conf", "/etc/nsswitch.conf", None),
    ("mv -- {{ x.p }} old.conf; printf '%s' {{ x.v }} > n", "/etc/nsswitch.conf", None),
]


@pytest.mark.parametrize(("source", "path", "consumers"), SYSTEM_DESTINATIONS)
def test_a_value_may_not_choose_a_system_destination(source, path, consumers) -> None:
    """(A variable that holds a value, ``> "$d"``, is refused by validate
    already: a file named at run time.)"""
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, consumers=consumers
    )
    assert problems == [], problems  # validate cannot know the value
    with pytest.raises(UnsafeTemplateError, match="a value names where a file is written"):
        template.render({"x": Fields({"v": "x", "p": path})})
    # the same template with a path in the workspace renders
    assert "out.txt" in template.render({"x": Fields({"v": "x", "p": "out.txt"})})


def test_a_system_destination_is_refused_by_the_installed_cli(tmp_path: Path) -> None:
    """Through ``runner run``: refused before the step runs (exit 2).  The
    path is under /proc/sys, where nothing is written even without the check."""
    path = one_step_agent(tmp_path, "printf '%s' x > {{ x.p }}")
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--input", "acme.x.p=/proc/sys/kernel/canary_x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "a value names where a file is written" in result.stderr


#: (template, how x.p names the place): a directory on PATH, where a later
#: bare name finds what a value wrote (the nineteenth review's F1 wrote
#: ``~/.cargo/bin/wc``, then ran ``wc``), and a dot-file of HOME.
PROGRAM_DIRECTORIES = [
    # (a bare wc after it is refused by validate: test_held_text.py, G3; a
    # later step's wc would still find the file, so the render refuses it)
    ("printf '%s\\n' {{ x.v }} > {{ x.p }}; /bin/chmod 755 {{ x.p }}", "bin/wc"),
    ("cd -- {{ x.p }} && printf '%s\\n' {{ x.v }} > wc", "bin"),
    ("printf '%s\\n' {{ x.v }} > {{ x.p }}", "home/.bashrc"),
    ("printf '%s\\n' {{ x.v }} > {{ x.p }}", "home/.local/lib/python3/site-packages/x.pth"),
]


@pytest.mark.parametrize(("source", "place"), PROGRAM_DIRECTORIES)
def test_a_value_may_not_write_where_programs_are_found(
    source: str, place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems  # validate cannot know the value
    with pytest.raises(UnsafeTemplateError, match="a directory on PATH or a dot-file of HOME"):
        template.render({"x": Fields({"v": "x", "p": str(tmp_path / place)})})
    # beside them, in a directory not on PATH or not a dot-file, it renders
    for ordinary in ("other/wc", "home/report.txt"):
        template.render({"x": Fields({"v": "x", "p": str(tmp_path / ordinary)})})


def test_a_value_cannot_plant_a_program_on_path_through_the_installed_cli(tmp_path: Path) -> None:
    """F1 end to end, with a directory of the test's own on PATH: without the
    check the value's script lands there as ``wc``, for any later ``wc`` (a
    bare ``wc`` in the same script is refused by validate: [planted-name])."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = one_step_agent(
        tmp_path, "printf '%s\\n' {{ x.v }} > {{ x.p }}; /bin/chmod 755 {{ x.p }}"
    )
    value = json.dumps({"v": f"touch {tmp_path}/CANARY_F1", "p": str(bin_dir / "wc")})
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--input", f"acme.x={value}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    assert "a directory on PATH" in result.stderr
    assert not list(tmp_path.glob("CANARY*")) and not list(bin_dir.iterdir())


#: Templates in which a program or the shell opens a file a value names:
#: /proc/self/environ holds the step's secrets (the nineteenth review's F3:
#: ``od -c`` printed one in a form the scrubber does not know).
PROCESS_READS = [
    ("od -An -c {{ x.p }}", "/proc/self/environ"),
    ("rev {{ x.p }}", "//proc/./self/environ"),
    ("wc -c < {{ x.p }}", "/proc/self/cmdline"),
    ('p={{ x.p }}; od -An -c "$p"', "/proc/self/environ"),
    ("od -An -c /{{ x.p }}", "proc/self/environ"),
    ("od -An -c {{ x.p }}", "/dev/fd/0"),
]


@pytest.mark.parametrize(("source", "place"), PROCESS_READS)
def test_a_value_may_not_name_a_process_file_for_a_program_to_read(source, place) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match="a value names a file under /proc or /dev/fd"):
        template.render({"x": Fields({"p": place})})
    assert "notes.txt" in template.render({"x": Fields({"p": "notes.txt"})})
    # a value is one quoted word: its * or {a,b} is text, not a pattern
    for text in ("*", "p*", "{proc,x}", "[p]roc/$$"):
        assert "'" in template.render({"x": Fields({"p": text})})
    # echo and printf open nothing: the same text as data renders
    echo, _ = compile_template("echo {{ x.p }}", shell=True, fields_by_name={"x": None})
    assert "/proc" in echo.render({"x": Fields({"p": "/proc/self/environ"})})


def test_a_secret_is_not_read_from_proc_by_a_value_through_the_installed_cli(
    tmp_path: Path,
) -> None:
    """F3 end to end: without the check, ``od -c`` prints the secret one
    character at a time, past the scrubber."""
    path = one_step_agent(
        tmp_path,
        "od -An -c {{ x.p }}",
        secrets={"TOKEN": "tok"},
        top={"secrets": {"tok": {"from_env": "RUNNER_TEST_TOKEN"}}},
    )
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--input", 'acme.x={"p": "/proc/self/environ"}'],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "RUNNER_TEST_TOKEN": "hunter2secret"},
    )
    assert result.returncode == 2, result.stderr
    assert "a value names a file under /proc" in result.stderr
    assert "h   u   n   t" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TMPDIR", "{bin}", "env TMPDIR: a value chooses where programs write"),
        ("TMP", "{bin}", "env TMP: a value chooses where programs write"),
        ("P", "/proc/self/environ", "env P: a value names a file under /proc"),
    ],
)
def test_a_templated_env_value_is_checked_when_the_step_renders(
    name: str, value: str, message: str, tmp_path: Path
) -> None:
    """F4: ``TMPDIR: {{ x.dir }}`` chose the directory ``mktemp`` wrote a
    script into (``/etc/profile.d``).  Run here with a directory on the
    runner's PATH, so without the check the file lands in the test's own
    directory, never in /etc (the system's directories are judged by the
    same function: the next test)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = one_step_agent(
        tmp_path,
        'mktemp --suffix=.sh > /dev/null; od -c "$P" || true',
        env={name: "{{ x.v }}", **({} if name == "P" else {"P": "agent.yaml"})},
    )
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--input", f"acme.x.v={value.format(bin=bin_dir)}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not list(bin_dir.iterdir())


@pytest.mark.parametrize(
    ("path", "safe"),
    [
        ("/etc/profile.d", False),
        ("//usr/./lib", False),
        ("out/../../etc", False),
        ("~root/.bashrc", False),
        ("/", False),
        ("/tmp/work", True),
        ("out/dir", True),
    ],
)
def test_which_destinations_a_value_may_choose(path: str, safe: bool, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin")
    monkeypatch.setenv("HOME", "/home/user")
    assert is_safe_destination(path) is safe


@pytest.mark.parametrize(
    ("where", "locale", "refused"),
    [
        ("step", "zh_TW.BIG5", True),
        ("step", "zh_TW", True),
        ("environment", "zh_CN.GBK", True),
        ("step", "ja_JP.SJIS", True),
        # review 46: glibc reads any spelling of a codeset; JOHAB was not listed
        ("step", "zh_TW.b+i+g+5", True),
        ("step", "ko_KR.JOHAB", True),
        ("environment", "en_US.ISO-8859-1", True),
        ("step", "de_DE.utf8@euro", False),
        ("step", "C.UTF-8", False),
        ("environment", "en_US.UTF-8", False),
    ],
)
def test_a_locale_that_reads_a_backslash_as_a_trail_byte_is_refused_beside_values(
    tmp_path: Path, where: str, locale: str, refused: bool
) -> None:
    """Review 39's F3: under BIG5, bash reads the bytes of 中 and the next
    backslash as two characters, so ``echo 中\\' ; echo {{ x }} #'`` runs the
    value as code while the checker read an escaped quote."""
    env = {"LC_ALL": locale}
    extra = {"env": env} if where == "step" else {"environment": {"env": env}}
    path = one_step_agent(tmp_path, "echo 中\\' ; echo {{ x.v }} #'", **extra)
    result = subprocess.run(
        [*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    if refused:
        assert result.returncode == 2, result.stdout
        assert "backslash byte" in result.stderr and "LC_ALL" in result.stderr, result.stderr
        assert "only C, POSIX or a UTF-8 locale" in result.stderr, result.stderr
    else:
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "source",
    [flow[1] for flow in FLOWS if flow[0] == "review39" and "\\" not in flow[1]],
)
def test_a_quote_the_parser_kept_as_text_is_refused_even_without_its_own_rule(
    monkeypatch, source
) -> None:
    """The backstop: with the rule that found review 39's quotes in ${ }
    operands switched off, a leaf outside quotes that holds a quote is still
    a disagreement (``stray_quote``), so the next such corner is refused too."""
    from runner.config.shell.agreement import AgreementCheck

    monkeypatch.setattr(AgreementCheck, "unparsed_expansion", lambda self: None)
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert template is None and any("[syntax]" in p.message for p in problems), problems
