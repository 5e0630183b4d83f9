"""What the shell checker knows about bash: its rules, builtins and dialects.

``checker`` does the judging; the facts it judges by live in three modules,
so that each can be read (and reviewed) on its own: this one (the rules and
their fixes, the builtins a script with values may use, the shells it
models), ``programs`` (who runs what it receives, who may receive a value
and what may run beside one) and ``variables`` (the names that change how
the shell runs, and those programs read as code).
"""

from __future__ import annotations

import re

#: rule -> (what is wrong, what to write instead).  Every refusal names one.
RULES: dict[str, tuple[str, str]] = {
    "quoted": (
        "inside quotes, a comment or a heredoc",
        "values are quoted for you: write {{ x }} as a word of its own, without quotes",
    ),
    "command-name": (
        "in command position",
        "a value may be an argument, never the command itself",
    ),
    "unknown-command": (
        "a command whose name is not a literal word, in a script with values",
        "call every program by its literal name",
    ),
    "evaluating-builtin": (
        "given to a builtin that evaluates code or takes variable names",
        "pass the value to echo, printf, cd, test or a program; assign with NAME={{ x }}",
    ),
    "executor": (
        "received by a program that can run what it receives as a command or code "
        "(GTFOBins lists it, or it is a shell or interpreter)",
        "if the program is meant to get the value, name it in consumers: (file or "
        "step level) and check what it does with it; never a shell",
    ),
    "consumer": (
        "received by a program or builtin not named in consumers:",
        "add the program (or a builtin such as cd) to consumers: if it treats the value "
        "as data, or pass the value to echo, printf (literal format), cat or test",
    ),
    "wrapper": (
        "an argument of a command that runs another command, or names a shell or "
        "interpreter among its arguments",
        "call the program directly (command, builtin, env, nohup, nice, setsid, time, "
        "jobs -x and timeout with a literal duration are followed, nice's and "
        "timeout's options as literal words)",
    ),
    "function": (
        "in a script that defines a function",
        "write the commands inline, or use one step per command",
    ),
    "rebinding": (
        "in a script that changes what later names mean (alias, hash, enable, trap, "
        "eval, source, let, exec, coproc, shopt or set beyond the usual options; "
        "set -x and -v, which print every value where no check follows it)",
        "drop the rebinding command: in a script with values, names mean what they say "
        "(to see what a step runs, use runner render)",
    ),
    "translation": (
        'in a script that holds a $"..." string, which bash replaces with a message '
        "catalog's text and then expands (code in the catalog runs)",
        "write the text with '...' or \"...\"",
    ),
    "printf-option": (
        "in printf's format or option words, which printf reads before any data",
        "give printf a literal format first: printf '%s\\n' {{ x }}",
    ),
    "test-operator": (
        "an operand of test/[ with another value, or with -v/-R",
        "test one value at a time, without -v/-R: [ {{ x }} = yes ]",
    ),
    "code-operand": (
        "where a data program reads code: jq's filter, its -f file or -L module path, "
        "an option word, or an operand before -- (a value --run-tests runs jq's input); "
        "or where a value may choose the environment variable printed (a secret is one): "
        "jq's $ENV or env beside a value, printenv's operand",
        "give jq the value as data: jq --arg name {{ x }} '$name', jq . <<< {{ x }}, "
        "or after the filter and --: jq -n '$ARGS' --args -- {{ x }}; "
        "print a fixed variable, not one a value names: printenv HOME, jq -n '$ENV.HOME'",
    ),
    "option-word": (
        "after an option word the checker cannot read before the script runs",
        "write options as literal words",
    ),
    "glued-option": (
        "glued to an option without = (-rn{{ x }}, --re{{ x }}) or after text that may "
        'be empty or start one ("$e"{{ x }}), before --: the value could add options '
        "of its own",
        "give the value a word of its own (head -n {{ x }}; an operand after --: grep -rn "
        "-- {{ x }} .), or glue it to a long option with = (--regexp={{ x }})",
    ),
    "redirect": (
        "the target of a redirection that can name a file descriptor",
        "use >, >>, < or <<< with a value",
    ),
    "assignment": (
        "an assignment that is not a plain NAME=",
        "assign to a plain variable: NAME={{ x }}",
    ),
    "shell-control": (
        "an assignment to a variable that changes how the shell runs (PATH, PS4, BASH_*, IFS)",
        "use another variable name; set PATH and the like in the step's env:",
    ),
    "env-name": (
        "in an environment variable that programs read as code or options "
        "(GIT_*, *EDITOR, *PAGER, PYTHON*, PERL5OPT, NODE_OPTIONS, LD_*...)",
        "use another variable name",
    ),
    "environment-dump": (
        "beside a command that prints every variable (set, export, declare with no "
        "names) or reads a process's environment or memory under /proc, where a "
        "step's secrets are: a value could choose which is printed, and how",
        'print the variables you need by name ("$NAME"), or read /proc in a step without values',
    ),
    "declaration": (
        "a declaration (declare, typeset, local, export, readonly) with a value "
        "or with options (declare -n, -i, export -f, local -a...)",
        "assign with NAME={{ x }} (no declaration), and declare without options",
    ),
    "name-word": (
        "a variable name that is not a literal word (read, mapfile, getopts, unset, printf -v)",
        "write the variable name as a literal word",
    ),
    "arithmetic": (
        "arithmetic, where bash evaluates a variable's text (a[$(cmd)]) as code",
        "compare as text or with test: [ {{ x }} -gt 0 ]; in (( )) use only "
        "variables this script sets to numbers",
    ),
    "double-bracket": (
        "[[ ]], whose operands bash may evaluate as arithmetic",
        "use [ ] (test) instead",
    ),
    "expansion": (
        "a parameter expansion",
        'put the value in a plain word, or assign NAME={{ x }} and use "$NAME"',
    ),
    "indirection": (
        "an indirect expansion (${!name}, ${!prefix*}) or a prompt transformation "
        "(${x@P}), which reads a name or code built at run time",
        "name the variable directly",
    ),
    "split": (
        "an unquoted $( ), variable, glob or brace expansion whose text bash splits into "
        "words and globs again (in a test, a word could become -v)",
        'quote it: "$(...)", "$v"',
    ),
    "stdin": (
        "a value reaching a reader the checker cannot follow (>( ), exec with input)",
        "pass the value to the command that reads it directly",
    ),
    "heredoc": (
        "a heredoc",
        "heredoc text is not re-quoted; write the file with a write: step instead",
    ),
    "case-pattern": (
        "a case pattern",
        'set a variable first (NAME={{ x }}) and write case "$NAME" in',
    ),
    "for-list": (
        "a for ... in list",
        "loop in the template instead: {% for item in x.items %}...{% endfor %}",
    ),
    "tainted-variable": (
        'a use of a variable that may hold a value, other than "$NAME" in an allowed position',
        'use the variable only as "$NAME" (in double quotes) in an argument',
    ),
    "interpreter": (
        "a shell or interpreter in a script that holds a value (its code can read the value "
        "from file names, $PWD, the environment or the process list)",
        "run the shell or interpreter in a step of its own, with no value in it; pass it "
        "data through a file a write: step made",
    ),
    "strict-program": (
        "runs a program nobody named that is not one of the data programs: a program "
        "may run code from its own option text (dpkg-buildpackage --hook-init) or its "
        "environment and read the values from the process list",
        "name the program in consumers: if you trust it with the values (this turns on "
        "strict mode), or run it in a step without values; only consumers, the builtins, "
        "echo, printf, cat, test and the data programs listed in docs/shell-rules.md run "
        "beside values, in either mode",
    ),
    "file-flow": (
        "run from, or run beside, a file this script writes a value to",
        "do not run a file that holds a value; a program that runs code (a shell, "
        "an interpreter, make, git, a test runner) may read files it is not given, so "
        "none runs in a script that writes a value to a file (in strict mode, only "
        "consumers and echo, printf, cat and test do)",
    ),
    "computed-path": (
        "a file name a program or the shell may open, computed at run time from a value "
        "($( ), a pipe or a file into read, mapfile, printf -v, p+=, $_)",
        "name the file with {{ x }} itself, or with a variable assigned words of literal "
        "text and values (p=out/{{ x }}), a for loop over such words, or read from a "
        "here-string of them (read -r f <<< {{ x }}); change a value in the template, not "
        "in the shell ({{ x | replace('/', '-') }}); text a program computed from a value "
        "may reach builtins (echo, printf, test) only",
    ),
    "computed-word": (
        "a word given to a program (or a redirect's file, or cd's folder) that expands "
        "text the script computed at run time ($( ), $((...)), a variable assigned one, "
        "read, p+=, a loop variable over a glob, $PWD, $?, $RANDOM): a test on a value "
        "may have spelled it, character by character",
        "give programs words of literal text, values ({{ x }}) and variables assigned "
        "only such words (out=build/{{ x }}); a computed text may reach builtins (echo, "
        "printf, test) only, or run the program in a step without values",
    ),
    "planted-name": (
        "a program run by a bare name after a value chose where a file is written "
        "(the value may have put that name on the step's PATH)",
        "run it by its path (/usr/bin/wc), or let the value choose only the content "
        "(printf '%s' {{ x }} > out.txt) or the file in a write: step",
    ),
    "shell-dialect": (
        "in a step whose shell the checker does not model, or in a construct that shell lacks",
        "use shell: bash (or sh without bash-only syntax), or pass the value through "
        "env: or a file",
    ),
    "syntax": (
        "in a command that does not parse, or that bash and sh may read differently",
        "fix the shell syntax (the check reads the command with a bash grammar); "
        "write $'...' text with '...' or printf",
    ),
    "unclassified": (
        "in a position the checker does not classify as data",
        "make the value an argument of a simple command",
    ),
}

#: Builtins that may receive a value as an argument: they treat it as data.
SAFE_BUILTINS = frozenset(
    {"echo", "printf", "cd", "pwd", "true", "false", ":", "test", "[", "pushd", "popd"}
)
#: Builtins that may read a value from stdin: they store it as data.
STDIN_BUILTINS = frozenset({"read", "mapfile", "readarray"})
#: Builtins (and reserved words tree-sitter reads as commands) that make later
#: lines mean something else, or run text as code: refused anywhere in a
#: script with values.
REBINDING_BUILTINS = frozenset(
    {
        "alias",
        "unalias",
        "hash",
        "enable",
        "trap",
        "eval",
        "source",
        ".",
        "let",
        "bind",
        "complete",
        "compgen",
        "compopt",
        "fc",
        "coproc",
        "history",
    }
)
#: Builtins that declare names: written plainly, tree-sitter parses them as
#: declarations (checked as such); reached through ``builtin``/``command`` or
#: a quoted name they are plain commands, so they are refused there.
DECLARATION_BUILTINS = frozenset({"declare", "typeset", "local", "export", "readonly"})
#: Every bash builtin: one outside ``SAFE_BUILTINS`` never receives a value.
BUILTINS = frozenset(
    {
        *SAFE_BUILTINS,
        *STDIN_BUILTINS,
        *REBINDING_BUILTINS,
        "bg",
        "break",
        "builtin",
        "caller",
        "command",
        "continue",
        "declare",
        "dirs",
        "disown",
        "exec",
        "exit",
        "export",
        "fg",
        "getopts",
        "help",
        "jobs",
        "kill",
        "local",
        "logout",
        "readonly",
        "return",
        "set",
        "shift",
        "shopt",
        "suspend",
        "times",
        "type",
        "typeset",
        "ulimit",
        "umask",
        "unset",
        "wait",
        "select",
        "function",
        "time",
    }
)
#: ``shopt`` options a script with values may set: they change globbing only.
SAFE_SHOPT = frozenset({"nullglob", "failglob", "dotglob", "globstar", "nocaseglob", "nocasematch"})
#: ``set`` options a script with values may use.
#: Not -x/-v (xtrace, verbose): they print every value to stderr, in
#: assignments, for lists and case subjects the flow check treats as
#: printing nothing (review 13).
SAFE_SET_LETTERS = frozenset("eufCo")
SAFE_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "noclobber", "noglob"})

#: Shells the checker models, by the name ``environment.shell`` gives: "bash"
#: reads bash; "posix" reads bash and refuses what dash and busybox sh lack.
DIALECTS = {"bash": "bash", "rbash": "bash", "sh": "posix", "dash": "posix", "ash": "posix"}

#: The ``shell:`` programs besides bash and sh that may get a value through
#: ``env:``: interpreters that read their environment only as the step's own
#: code says.  Any other (``zsh``, ``tmux``, ``script``, ``su``: they run
#: ``$SHELL -c`` or expand by rules the checker does not model) gets no value
#: at all: an allow-list, since the eleventh review found three that a list
#: of shells to refuse had missed.
_DATA_INTERPRETER = re.compile(
    r"(python|pypy|node|nodejs|deno|bun|perl|ruby|php|lua|luajit|Rscript|julia)[0-9.]*"
)


def reads_env_as_data(shell: str | None) -> bool:
    """May a step of ``shell`` (not bash or sh) get values through ``env:``?"""
    return _DATA_INTERPRETER.fullmatch(shell_base(shell)) is not None


def shell_base(shell: str | None) -> str:
    """The base name of a configured shell's program (``/bin/rbash -e``: ``rbash``)."""
    if shell is None:
        return "bash"
    return shell.strip().split()[0].rsplit("/", 1)[-1] if shell.strip() else ""


def dialect_of(shell: str | None) -> str | None:
    """The dialect of a configured shell (its base name), or None for one not modelled."""
    return DIALECTS.get(shell_base(shell))
