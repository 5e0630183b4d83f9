"""What the shell checker knows about bash: its rules, and the names it judges by.

``checker`` does the judging; this module holds the facts it judges by, so
that each can be read (and reviewed) on its own: the rules and their fixes,
the builtins a script with values may use, the variables that change how the
shell runs, the environment variables programs read as code, and who may
receive a value.  Who *runs* what it receives comes from GTFOBins
(``executors``) plus a short supplement for what GTFOBins does not list.
"""

from __future__ import annotations

import re

from .executors import EXECUTORS

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
        "received by a program not named in consumers:",
        "add the program to consumers: if it treats the value as data, or pass the "
        "value to echo, printf (literal format), cat or test",
    ),
    "wrapper": (
        "an argument of a command that runs another command, or names a shell or "
        "interpreter among its arguments",
        "call the program directly (command, builtin, env, nohup, nice, setsid, time, "
        "jobs -x and timeout with a literal duration are followed)",
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
    "printf-option": (
        "in printf's format or option words, which printf reads before any data",
        "give printf a literal format first: printf '%s\\n' {{ x }}",
    ),
    "test-operator": (
        "an operand of test/[ with another value, or with -v/-R",
        "test one value at a time, without -v/-R: [ {{ x }} = yes ]",
    ),
    "option-word": (
        "after an option word the checker cannot read before the script runs",
        "write options as literal words",
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
    "file-flow": (
        "run from, or run beside, a file this script writes a value to",
        "do not run a file that holds a value; a program that runs code (a shell, "
        "an interpreter, make, git, a test runner) may read files it is not given, so "
        "none runs in a script that writes a value to a file (in strict mode, only "
        "consumers and echo, printf, cat and test do)",
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

#: Commands whose arguments are another command, followed to it: the program
#: they run is the one judged.  Any other program that runs its arguments is
#: an executor (GTFOBins) and receives no value.
FOLLOWED_WRAPPERS = frozenset(
    {"command", "builtin", "env", "nohup", "nice", "setsid", "time", "timeout"}
)

#: Shells and interpreters that read code from their arguments or their stdin.
#: GTFOBins lists most; this names what it does not (``sh``, ``python3``...),
#: and ``_INTERPRETER`` catches versioned names (``python3.12``, ``perl5.36``).
INTERPRETERS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "ash",
        "zsh",
        "ksh",
        "mksh",
        "yash",
        "posh",
        "rbash",
        "fish",
        "csh",
        "tcsh",
        "busybox",
        "toybox",
        "python",
        "python2",
        "python3",
        "pypy",
        "pypy3",
        "perl",
        "ruby",
        "irb",
        "node",
        "nodejs",
        "deno",
        "bun",
        "php",
        "lua",
        "luajit",
        "tclsh",
        "wish",
        "expect",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "Rscript",
        "R",
        "julia",
        "osascript",
        "pwsh",
        "guile",
        "racket",
        "sbcl",
        "ghci",
        "runghc",
        "jshell",
        "groovy",
        "scala",
        "kotlinc",
        "elixir",
        "erl",
        "escript",
        "swipl",
    }
)
_INTERPRETER = re.compile(
    r"(python|pypy|perl|ruby|php|lua|luajit|node|tclsh|wish|guile|gawk|awk"
    r"|ipython|isympy|bpython|ptpython|jupyter)[0-9.]*([-_.].*)?"
)
#: What GTFOBins does not list that runs a command from its arguments.
EXECUTOR_SUPPLEMENT = frozenset(
    {
        "scriptlive",  # util-linux: runs its -c command through $SHELL (eleventh review)
        # the thirteenth review: debconf PROGRAM runs it; Debian's other names
        # of fakeroot; terraform runs a local-exec provisioner of any *.tf
        "debconf",
        "fakeroot-sysv",
        "fakeroot-tcp",
        "terraform",
        "tofu",
        # the twelfth review: a unixexec: bus address runs a program; LLVM's
        # `not` runs its arguments; sdiff's `e` starts ed, whose `!` runs a
        # shell; make-first-existing-target runs make with its options
        "dbus-send",
        "dbus-monitor",
        "not",
        "sdiff",
        "make-first-existing-target",
        "prlimit",
        "setpriv",
        "runuser",
        "dbus-run-session",
        "parallel",
        "setsid",
        "sg",
        "newgrp",
        "systemd-run",
        "flatpak-spawn",
        "unbuffer",
        "firejail",
        "bwrap",
        "proot",
        "fakeroot",
        "fakechroot",
        "faketime",
        "catchsegv",
        "valgrind",
        "ltrace",
        "xvfb-run",
        "at",
        "batch",
        "crontab",
        "sudoedit",
        # aliases and wrappers GTFOBins does not name (found in review)
        "gmake",
        "linux32",
        "linux64",
        "i386",
        "x86_64",
        "aarch64",
        "nvim",
        "tini",
        "dumb-init",
        "dpkg-architecture",
        "memusage",
        "heaptrack",
        "groff",
        "troff",
        "npx",
        "pdb",
        "pdb3",
        "gpg-agent",
        "msgexec",
        "cpp",
        "gcc",
        "cc",
        "clang",
        "lli",
        "slogin",
        "sudoreplay",
        "chpst",
        "su-exec",
        "gosu",
        "s6-setuidgid",
        "capsh",
        "sensible-editor",
        "sensible-pager",
        "sensible-browser",
        "editor",
        "pager",
        "x-www-browser",
        "xdg-open",
        "run-parts",
        "man",
        # they read commands from stdin: ! runs a shell command in each
        "gdb",
        "lldb",
        "sqlite3",
        "psql",
        "mysql",
        "ed",
        "ex",
        "dc",
        # found in the third review: compilers and loaders under other names,
        # launchers, build and test drivers that run the files they find
        "c++",
        "g++",
        "clang++",
        "ld.so",
        "tini-static",
        "docker-init",
        "pyenv",
        "rbenv",
        "nodenv",
        "asdf",
        "mise",
        "direnv",
        "dotenv",
        "ctest",
        "cpack",
        "ninja",
        "meson",
        "scons",
        "bmake",
        "pmake",
        "remake",
        "just",
        "rake",
        "bundle",
        "tox",
        "nox",
        "pytest",
        "py.test",
        "prove",
        "pygmentize",
        "rust-gdb",
        "rust-lldb",
        "gdbtui",
        "gdb-multiarch",
        "cpan",
        "uclampset",
        "sotruss",
        "poetry",
        "pipenv",
        "pipx",
        "uv",
        "uvx",
        "pdm",
        "hatch",
        "conda",
        "mamba",
        "yarn",
        "pnpm",
        "corepack",
        "cargo",
        "rustc",
        "go",
        "mvn",
        "gradle",
        "ant",
        "sbt",
        "dotnet",
        "mono",
        # found in the fifth review: they run their input or the file they are given
        "json_pp",
        "pydoc",
        "pydoc3",
    }
)
#: A listed program under a toolchain spelling: a target triplet before it
#: (``x86_64-linux-gnu-gcc-12``), a ``-static`` build after it.
_SPELLING = re.compile(r"(?:[A-Za-z0-9_]+-linux-[A-Za-z0-9_]+-)?(.+?)(?:-static)?")
#: The dynamic loader under its real names (GTFOBins lists it as ``ld.so``).
_LOADER = re.compile(r"ld-linux[-A-Za-z0-9_.]*|ld64\.so[.0-9]*|ld\.so[.0-9]*|ld-musl-.*")


#: Options that make an ordinary program run another one (``sort
#: --compress-program=sh``, ``install --strip-program=sh``): a program given
#: a value may not get one.
RUNNING_OPTIONS = (
    "--strip-program",
    "--compress-program",
    "--use-compress-program",
    "--rsync-path",
    "--rsh",
    "--checkpoint-action",
    "--to-command",
    "--info-script",
    "--new-volume-script",
    "--pager",
    "--editor",
    "--eval",
    "--filter",
    "-exec",
    "-execdir",
    "-ok",
    "-okdir",
)


def is_interpreter(name: str) -> bool:
    """A shell or an interpreter: never a consumer, never named among a receiver's words."""
    return name in INTERPRETERS or _INTERPRETER.fullmatch(name) is not None


def is_executor(name: str) -> bool:
    """Can the program ``name`` (a base name) run what it receives as a command or code?

    Variants count as the program: ``vim.basic`` as ``vim``, ``gcc-12`` as
    ``gcc``, ``perl5.36-x86_64-linux-gnu`` as ``perl`` (Debian's alternatives
    and versioned names)."""
    if _LOADER.fullmatch(name):
        return True
    stem = _SPELLING.fullmatch(name)
    names = {name, stem.group(1)} if stem else {name}
    for prefix in _WRAPPER_PREFIXES:  # c99-gcc is gcc run in C99 mode
        names |= {n[len(prefix) :] for n in names if n.startswith(prefix)}
    # a target triplet after the name too (cpan5.36-x86_64-linux-gnu, the
    # eleventh review), then a version after the name or its first dot
    names |= {re.sub(r"-[A-Za-z0-9_]+-linux-[A-Za-z0-9_]+$", "", n) for n in names}
    variants = {
        v
        for n in names
        for m in (n, n.split(".", 1)[0])
        for v in (m, re.sub(r"-?[0-9][0-9.]*$", "", m))
    }
    variants |= {v[1:] for v in variants if v in _GNU_PREFIXED}
    return any(
        v in EXECUTORS or v in EXECUTOR_SUPPLEMENT or is_interpreter(v) for v in variants if v
    )


#: Prefixes under which distributions install a listed program (the tenth
#: review ran Debian's ``c99-gcc -wrapper /bin/sh,-s``).
_WRAPPER_PREFIXES = ("c89-", "c99-", "c11-", "c17-")
#: GNU builds installed with a ``g`` before the name (groff's ``gpic``, the
#: coreutils, findutils and sed of BSD-flavoured systems): the program
#: without it.  A list, not a rule: ``gzip`` is not ``zip``, ``gpg`` not ``pg``.
_GNU_PREFIXED = frozenset(
    {
        "gpic",
        "gtbl",
        "geqn",
        "grefer",
        "gsoelim",
        "gtroff",
        "gnroff",
        "gsed",
        "gawk",
        "gtar",
        "gfind",
        "gxargs",
        "gmake",
        "gm4",
        "genv",
        "gtimeout",
        "gnice",
        "gnohup",
        "gstdbuf",
        "gchroot",
        "gsplit",
        "gcsplit",
        "gsort",
        "gtee",
        "gdate",
        "ginstall",
    }
)


#: Variables whose assignment makes later lines run something else (PATH
#: picks the programs, PS4 is expanded as a prompt, BASH_CMDS and
#: BASH_ALIASES rebind names): no script with values assigns them at all.
#: Set them in the step's ``env:`` instead.
REBINDING_NAMES = frozenset(
    {
        "PATH",
        "ENV",
        "PS0",
        "PS1",
        "PS2",
        "PS3",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "EXECIGNORE",
    }
)
_REBINDING_PREFIXES = ("BASH", "LD_")
#: Variables bash reads from its environment at start-up that change how it
#: runs every later line (tracing, prompts, start-up files, options): a
#: step's or the environment's static ``env:`` may not set them when the
#: script holds values (the fourteenth review: ``SHELLOPTS: xtrace`` with
#: ``PS4: "${BASH_COMMAND@P}"`` ran a value).
#: PATH is left to the step: a program the script makes on it is refused by
#: name (``made_programs``).
STARTUP_CONTROL_NAMES = (REBINDING_NAMES - {"PATH"}) | frozenset(
    {"BASH_ENV", "BASH_XTRACEFD", "BASH_COMPAT", "GLOBIGNORE", "IFS", "CDPATH"}
)

#: Variables that change how bash (or the dynamic loader) runs, or that bash
#: computes itself: no script with values may assign them.
SHELL_CONTROL_NAMES = REBINDING_NAMES | frozenset(
    {
        "IFS",
        "CDPATH",
        "GLOBIGNORE",
        "HISTFILE",
        "HISTCMD",
        "HISTCONTROL",
        "HISTIGNORE",
        "INPUTRC",
        "TMOUT",
        "MAIL",
        "MAILPATH",
        "MAILCHECK",
        "OPTIND",
        "OPTARG",
        "OPTERR",
        "FUNCNEST",
        "POSIXLY_CORRECT",
        "RANDOM",
        "SRANDOM",
        "SECONDS",
        "LINENO",
        "EPOCHSECONDS",
        "EPOCHREALTIME",
        "GROUPS",
        "FUNCNAME",
        "DIRSTACK",
        "PIPESTATUS",
        "PPID",
        "UID",
        "EUID",
        "SHELL",
        "SHLVL",
        "TIMEFORMAT",
        "COLUMNS",
        "LINES",
        "HOSTFILE",
        "FIGNORE",
        "READLINE_LINE",
        "READLINE_POINT",
        "PWD",
        "OLDPWD",
        "REPLY",
        "MAPFILE",
        "COPROC",
        "LANG",
        "LANGUAGE",
    }
)
# LC_*: a multibyte locale where "\\" ends a character changes how text is read.
_SHELL_CONTROL_PREFIXES = ("BASH", "LD_", "COMP_", "HIST", "BASH_FUNC_", "LC_")

#: Variables bash evaluates as arithmetic when they are assigned
#: (``declare -i``): ``OPTIND='a[$(cmd)]'`` runs cmd, so only a number may be
#: assigned to them in a script with values (found by the tenth review;
#: ``env -i bash -c 'compgen -v'`` tried one by one lists exactly these).
INTEGER_ASSIGNED = frozenset({"OPTIND", "RANDOM", "SRANDOM", "HISTCMD"})

#: Variables bash keeps as integers: safe to name in arithmetic while the
#: script does not assign them (``SHLVL="$(echo *)"`` makes one text).
BASH_INTEGERS = frozenset(
    {
        "RANDOM",
        "SRANDOM",
        "SECONDS",
        "LINENO",
        "PPID",
        "UID",
        "EUID",
        "SHLVL",
        "OPTIND",
        "EPOCHSECONDS",
    }
)
#: Variables that always may hold a value: bash sets them from input.
#: BASH_COMMAND and BASH_EXECUTION_STRING hold the script's own text, values
#: and all (the eleventh review).
ALWAYS_TAINTED = frozenset(
    {
        "REPLY",
        "MAPFILE",
        "OPTARG",
        "BASH_REMATCH",
        "COPROC",
        "_",
        "BASH_COMMAND",
        "BASH_EXECUTION_STRING",
    }
)

#: Environment variables programs read as code, commands or options: no value
#: may go into one (``GIT_SSH_COMMAND``, ``EDITOR``, ``PERL5OPT``...).
_CODE_BEARING_ENV = re.compile(
    r"(GIT_(?!AUTHOR_|COMMITTER_).*|.*EDITOR|VISUAL|.*PAGER|LESS.*|PERL.*|PYTHON.*|RUBY.*|"
    r"NODE_.*|NPM_CONFIG_.*|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|.*ASKPASS|"
    r"BROWSER|MAKEFLAGS|MFLAGS|GNUMAKEFLAGS|SSH_.*|PROMPT_.*|.*_COMMAND|.*_CMD|"
    r"GCONV_PATH|MANPAGER|MANOPT|GIT|SYSTEMD_.*|DOCKER_.*|PIP_.*|CC|CXX|CPP|LDFLAGS|"
    r"CFLAGS|CXXFLAGS|CPPFLAGS|RUSTC.*|CARGO_.*|GO.*|TAR_OPTIONS|GZIP|BZIP2?|XZ_.*|"
    r"ZSTD_.*|GREP_OPTIONS|SHELL.*|TERMINFO.*|MANPATH|INFOPATH|XDG_CONFIG_.*|"
    r"CURL_HOME|WGETRC|SUDO_.*|GNUPGHOME|HOME|ZDOTDIR|"
    # found in the sixth review (ZIPOPT -TT runs a command), and their kind:
    # options, remote shells, helper programs and config files by name
    r".*OPTS?|.*OPTIONS|.*FLAGS|.*_RSH|RSH|.*_PROG|.*_PROGRAM|.*WGETRC|INPUTRC|.*_RC|"
    r"TAPE|CVS_.*|RSYNC_.*|OPENSSL_.*|ZIP.*|UNZIP.*|.*_CONF|.*_CONFIG|"
    # the tenth review: a D-Bus address runs a program (unixexec:), the
    # Cloud SDK hands *_ARGS to Python; addresses and argument lists by kind
    r"DBUS_.*|.*_ADDRESS|.*_ARGS|.*_ARGV|CLOUDSDK_.*|"
    # the thirteenth review: lua and luajit run LUA_INIT (and LUA_INIT_5_4) at
    # start-up; ImageMagick and its kin read a policy and delegates by path
    r"LUA_.*|MAGICK_.*|TCL.*|R_PROFILE.*|R_ENVIRON.*|PHP_INI_.*|PHPRC|.*_INIT)"
)


def is_shell_control_name(name: str) -> bool:
    """True for variables a value must never be assigned to (``PS4``, ``LD_PRELOAD``...)."""
    return name in SHELL_CONTROL_NAMES or name.startswith(_SHELL_CONTROL_PREFIXES)


def is_rebinding_name(name: str) -> bool:
    """True for variables no script with values may assign (``PATH``, ``BASH_CMDS``...)."""
    return name in REBINDING_NAMES or name.startswith(_REBINDING_PREFIXES)


def is_code_bearing_env(name: str) -> bool:
    """True for environment variables some program reads as code or options."""
    return is_shell_control_name(name) or _CODE_BEARING_ENV.fullmatch(name) is not None


#: What ``consumers:`` mode always lets receive a value: these print it, read
#: it into a variable, or compare it, and run nothing.
STRICT_RECEIVERS = frozenset({"echo", "printf", "cat", "test", "[", "true", ":", *STDIN_BUILTINS})

#: Shells the checker models, by the name ``environment.shell`` gives: "bash"
#: reads bash; "posix" reads bash and refuses what dash and busybox sh lack.
#: Programs that only filter what they read to their stdout and write no
#: file, whatever their words: a value they read stays out of files.  Any
#: other program that reads a value as content may write it to a file
#: (``sort -of``, ``split``, ``csplit``), after which no program that runs
#: code may run in the script.
STREAM_FILTERS = frozenset(
    {
        "cat",
        "grep",
        "egrep",
        "fgrep",
        "wc",
        "head",
        "tail",
        "cut",
        "tr",
        "rev",
        "tac",
        "nl",
        "fold",
        "fmt",
        "base64",
        "base32",
        "basenc",
        "md5sum",
        "sha1sum",
        "sha224sum",
        "sha256sum",
        "sha384sum",
        "sha512sum",
        "b2sum",
        "cksum",
        "sum",
        "od",
        "hexdump",
        "jq",
        "column",
        "expand",
        "unexpand",
        "paste",
        "cmp",
        "diff",
        "comm",
    }
)

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
