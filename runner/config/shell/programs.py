"""Who runs what it receives, who may receive a value, and what may run beside one.

Who *runs* what it receives comes from GTFOBins (``executors``) plus a short
supplement for what GTFOBins does not list, the shells and interpreters, and
the options that make an ordinary program run another.  Who may *receive* a
value in strict mode (``STRICT_RECEIVERS``), which programs only filter
(``STREAM_FILTERS``), and which may *run* beside a value in strict mode
(``STRICT_PROGRAMS``, the closed world) are fixed lists here.
"""

from __future__ import annotations

import re

from .executors import EXECUTORS
from .rules import STDIN_BUILTINS

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


#: Programs Debian ships as shell scripts that evaluate their environment or
#: rebuild a command line: ``xzgrep`` runs ``$GREP``, ``xzdiff`` ``$DIFF``,
#: ``zcmp`` ``$CMP`` (the seventeenth review ran each with a value there).
#: Shells in all but name: they count as interpreters.
_SHELL_SCRIPTS = re.compile(
    r"(?:z|xz|bz|lz|lzma|zstd)(?:e?grep|fgrep|diff|cmp|less|more)|gzexe|znew|zforce|ldd"
)


def is_interpreter(name: str) -> bool:
    """A shell or an interpreter (a shell script among them): never a
    consumer, never named among a receiver's words."""
    return (
        name in INTERPRETERS
        or _INTERPRETER.fullmatch(name) is not None
        or _SHELL_SCRIPTS.fullmatch(name) is not None
    )


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


#: Programs whose destination words name what they write or link.
FILE_WRITERS = frozenset(
    {"cp", "mv", "ln", "install", "tee", "dd", "touch", "link", "rsync", "uniq", "mktemp"}
    | {"rm", "rmdir", "mkdir", "chmod", "chown", "chgrp", "truncate"}
)


#: What ``consumers:`` mode always lets receive a value: these print it, read
#: it into a variable, or compare it, and run nothing.
STRICT_RECEIVERS = frozenset({"echo", "printf", "cat", "test", "[", "true", ":", *STDIN_BUILTINS})

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

#: The programs besides the consumers and ``STRICT_RECEIVERS`` that may run
#: (not receive a value) in a strict-mode script with values: the stream
#: filters and file utilities, none of which has an option that runs a
#: program or reads code.  Strict mode is a closed world: any other program
#: is refused, since a program may run shell code from its own option text
#: (``dpkg-buildpackage --hook-init``, ``git filter-branch``) and read the
#: script, values and all, from the process list (the fourteenth review).
#: ``sort`` (``--compress-program``), ``find``, ``xargs``, ``tar``, ``sed``
#: and ``awk`` are not on it.
#: ``egrep`` and ``fgrep`` are not: they are shell scripts that look ``grep``
#: up on PATH (the fifteenth review ran a copy of dash named grep).
STRICT_PROGRAMS = (STREAM_FILTERS - {"egrep", "fgrep"}) | frozenset(
    {
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "mkdir",
        "rmdir",
        "rm",
        "ls",
        "touch",
        "chmod",
        "cp",
        "mv",
        "ln",
        "tee",
        "mktemp",
        "stat",
        "du",
        "df",
        "date",
        "sleep",
        "seq",
        "uniq",
        "id",
        "whoami",
        "uname",
        "true",
        "false",
    }
)
