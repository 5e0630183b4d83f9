"""The variables that change how bash runs, and those programs read as code.

A script with values may not assign the first (``PATH``, ``PS4``,
``BASH_*``, ``IFS``), nor put a value into the second (``GIT_SSH_COMMAND``,
``EDITOR``, ``PERL5OPT``...).  Bash's own integers and the variables it sets
from input are here too: the taint pass judges arithmetic and input by them.
"""

from __future__ import annotations

import re

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
        # what the C library loads or reads as code in every program it
        # starts (review 16: export GCONV_PATH=./g, then cmp loaded g/*.so)
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "GETCONF_DIR",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        # where cd goes without a literal directory (review 18: CDPATH=/
        # then cd etc; HOME=/etc then cd; OLDPWD=/etc then cd -)
        "CDPATH",
        "HOME",
        "OLDPWD",
        "DIRSTACK",
        # bash's message catalogs for $"..." (review 16: a catalog's
        # translation is expanded, $( ) and all)
        "TEXTDOMAIN",
        "TEXTDOMAINDIR",
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
#: Variables the dynamic loader and the C library act on in every program
#: they start (the fifteenth review: ``LD_PRELOAD: ./x.so`` beside a value,
#: the library written by the script itself); with ``LD_*``, refused in a
#: step's static ``env:`` beside values, like ``STARTUP_CONTROL_NAMES``.
LOADER_CONTROL_NAMES = frozenset({"GCONV_PATH", "GLIBC_TUNABLES", "GETCONF_DIR", "LOCPATH"})


#: The locale variables that choose how bash reads the script's bytes.
LOCALE_NAMES = frozenset({"LC_ALL", "LC_CTYPE", "LANG"})


def reads_backslash_as_a_trail_byte(locale: str) -> bool:
    """Might bash, under the locale ``locale`` (a value of LC_ALL, LC_CTYPE
    or LANG), read a backslash byte as the end of a character (BIG5, GBK,
    GB18030, Shift_JIS, JOHAB...), so that ``中\\'`` is a character and a
    quote where the checker read an escaped quote (review 39's F3)?  Decided
    by an allow-list, since glibc resolves any spelling of a codeset
    (``zh_TW.b+i+g+5`` is BIG5: review 46): only ``C``, ``POSIX`` and a UTF-8
    codeset (glibc's normalized ``utf8``) are safe; any other locale may be
    one (a name without a codeset, ``zh_TW``, is BIG5)."""
    if locale in ("", "C", "POSIX"):
        return False
    codeset = locale.partition("@")[0].partition(".")[2]
    return re.sub(r"[^a-z0-9]", "", codeset.lower()) != "utf8"


def controls_start_up(name: str) -> bool:
    """Does a static ``env:`` name change how bash, or any program the
    loader starts, runs before the script's first line?"""
    return (
        name in STARTUP_CONTROL_NAMES
        or name in LOADER_CONTROL_NAMES
        or name.startswith(("BASH_FUNC_", "LD_"))
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
