"""Jinja2 templates for hook steps, compiled once, rendered per session.

Two flavours share one ``SandboxedEnvironment`` setup with ``StrictUndefined``:

- ``shell``: for ``run`` steps.  Jinja's ``finalize`` prints each ``{{ }}``
  value as a sentinel word; ``Template.render`` checks the exact text with
  ``shell_check`` and then puts each value in as one single-quoted word, so
  an input reaches the shell as one word of data, whatever it holds.  Lists
  and mappings are refused (they are not one word: loop over them), and so
  is NUL.
- ``text``: for ``write`` content, ``env`` values and paths: values are
  inserted as they are (NUL still refused).

Names a template uses are checked when the file is compiled: an undeclared
name, or a field its input's schema does not declare, is a validation error
before any session starts.

The pieces live beside this module: ``template_values`` (values, sentinels,
errors), ``jinja_sandbox`` (the environment, the guards) and
``template_checks`` (what ``runner validate`` checks); this one compiles and
renders, and re-exports their names.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping
from typing import Any

from jinja2 import TemplateSyntaxError, meta, nodes

from .chosen_text import CHOSEN_TEXT, value_text
from .host_paths import RUNNER_NAMES
from .jinja_sandbox import _SHELL as _SHELL
from .jinja_sandbox import _TEXT as _TEXT
from .jinja_sandbox import FORBIDDEN_ATTRIBUTES as FORBIDDEN_ATTRIBUTES
from .jinja_sandbox import GUARD_FILTER as GUARD_FILTER
from .jinja_sandbox import MASKED_CONTEXT as MASKED_CONTEXT
from .jinja_sandbox import InputGuard as InputGuard
from .jinja_sandbox import _environment as _environment
from .jinja_sandbox import _inputs_read as _inputs_read
from .jinja_sandbox import _unsafe_access as _unsafe_access
from .jinja_sandbox import guard_outputs as guard_outputs
from .template_checks import ALLOWED_FILTERS as ALLOWED_FILTERS
from .template_checks import ALLOWED_TESTS as ALLOWED_TESTS
from .template_checks import MAX_SKELETONS as MAX_SKELETONS
from .template_checks import SHAPED_MARK as SHAPED_MARK
from .template_checks import _jinja_problems as _jinja_problems
from .template_checks import _name_offset as _name_offset
from .template_checks import _offset_of_line as _offset_of_line
from .template_checks import _shell_problems as _shell_problems
from .template_checks import shell_skeletons as shell_skeletons
from .template_values import _RENDERING as _RENDERING
from .template_values import BUILTIN_NAMES as BUILTIN_NAMES
from .template_values import Fields as Fields
from .template_values import OptionLikeValueError as OptionLikeValueError
from .template_values import TemplateProblem as TemplateProblem
from .template_values import TemplateSecurityError as TemplateSecurityError
from .template_values import TemplateValueError as TemplateValueError
from .template_values import UnsafeTemplateError as UnsafeTemplateError
from .template_values import _RenderedValues as _RenderedValues
from .template_values import _scalar_text as _scalar_text
from .template_values import _text as _text
from .template_values import literal_text as literal_text
from .template_values import shell_word as shell_word
from .template_values import wrap as wrap


class Template:
    """One checked template and the names it reads.

    ``tree`` is the parsed template; it is compiled to Python on first
    render, once, so that validating a large file pays only for parsing.
    A template without Jinja markup has no tree and renders as itself.
    ``tainted`` (run commands only) names environment variables that hold a
    value, whose uses the run-time check follows too; ``consumers`` (None:
    the default mode) the only programs that may receive a value.
    """

    __slots__ = (
        "_compiled",
        "consumers",
        "exported",
        "names",
        "reads_secret",
        "secret_chosen_text",
        "shaped",
        "shell",
        "source",
        "tainted",
        "touches_option_guard",
        "touches_secret",
        "tree",
    )

    def __init__(
        self,
        source: str,
        shell: bool,
        names: frozenset[str],
        tree: Any = None,
        tainted: frozenset[str] = frozenset(),
        consumers: frozenset[str] | None = None,
        exported: frozenset[str] = frozenset(),
        shaped: bool = False,
    ) -> None:
        self.source = source
        self.shell = shell
        self.names = names
        self.tree = tree
        self.tainted = tainted
        self.consumers = consumers
        #: the step's env: names: exported before the script runs
        self.exported = exported
        #: its text is repeated once per item of a value (``chosen_text``): its
        #: script is checked as one that holds a value, even with none printed
        self.shaped = shaped
        #: a {{ }} of it reads a ``secret: true`` input (``guard_outputs`` sets it):
        #: a ``write:`` whose content does fills a file no value may name for a read
        self.reads_secret = False
        #: any name it reads holds a secret input's value (``guard_outputs`` sets it)
        self.touches_secret = False
        #: any name it reads holds a ``no_leading_option`` input's value, and
        #: its words go to programs (``guard_outputs`` sets it)
        self.touches_option_guard = False
        #: the line of its own text in a branch a secret input chooses, or None
        self.secret_chosen_text: int | None = None
        self._compiled: Any = None

    @property
    def is_static(self) -> bool:
        return self.tree is None

    def render(
        self,
        context: Mapping[str, Any],
        *,
        shell: str | None = None,
        secret_files: Collection[str] = (),
        env: Mapping[str, str] | None = None,
        copies: set[str] | None = None,
    ) -> str:
        """The text to run.  For a ``run`` command this is the guarantee:
        the exact text is checked with sentinels before any value goes in,
        as the shell that runs it (``shell``: its path or name; None: bash)
        reads it.  ``secret_files``: the files ``secret_file:`` steps, and
        ``write:`` steps whose content reads a secret input, wrote in this
        sandbox, which no value may name for a program to read.
        ``env``: the step's templated ``env:`` values as rendered, put in
        where the script uses them (``tee "$OUT"``: review 22's I2).
        ``copies`` receives the files the script copies or links from a
        secret's file (``shell.copies``), as secret from then on."""
        if self.tree is None:
            if self.shell and copies is not None:  # ln -s .netrc l.txt, for a later step
                secret_files = _note_secret_copies(
                    self.source, _RenderedValues(), secret_files, copies
                )
            if self.shell and self.tainted:
                self._check_words(self.source, _RenderedValues(), shell, secret_files, env)
            return self.source
        if self._compiled is None:
            environment = _SHELL if self.shell else _TEXT
            self._compiled = environment.from_string(self.tree)
        if not self.shell:
            return self._render(context)
        values = _RenderedValues()
        token = _RENDERING.set(values)
        try:
            text = self._render(context)
        finally:
            _RENDERING.reset(token)
        # A value shaped the text: checked as holding one (SHAPED_MARK says how).
        checked = SHAPED_MARK.format(values.add("")) + text if self.shaped else text
        if not values.all_present(checked):
            # A value was printed, then rewritten (an escaping or filtering tag):
            # the command would not hold the value the check saw.
            raise UnsafeTemplateError(
                "run command refused before it ran: a value was changed after it was quoted "
                "(a Jinja tag that filters or escapes output); use plain {{ }}"
            )
        if copies is not None:  # ln -s /proc/self me too, with no secret file yet
            secret_files = _note_secret_copies(checked, values, secret_files, copies)
        self._check_words(checked, values, shell, secret_files, env)
        return values.substitute(text)

    def _render(self, context: Mapping[str, Any]) -> str:
        """The compiled template rendered.  In a template that reads a secret
        input, an error of Jinja's or of a filter is reported by its kind
        only: its message may quote what it was given, the secret too
        (``{{ roles[s.key | lower] }}``: review 27's S2; ``select(s.key)``,
        ``filesizeformat``: 28's S3).  The runner's own errors say no value."""
        try:
            return str(self._compiled.render(**context))
        except (TemplateSecurityError, TemplateValueError):
            raise
        except Exception as failed:
            if not self.touches_secret:
                raise
            kind = type(failed).__name__
        raise TemplateValueError(
            f"the template failed to render ({kind}; the message is not shown: the "
            "template reads a secret input)"
        )

    def _check_words(
        self,
        text: str,
        values: Any,
        shell: str | None,
        secret_files: Collection[str],
        env: Mapping[str, str] | None,
    ) -> None:
        """The checker on ``text`` (sentinels in), then the words it reports
        checked with the values and templated ``env:`` values put in."""
        destinations: set[str] = set()
        reads: set[str] = set()
        read_sources: set[str] = set()
        options: set[str] = set()
        option_sources: set[str] = set()
        _refuse_unsafe(
            text,
            values.sentinels,
            self.tainted,
            shell,
            self.consumers,
            self.exported,
            destinations,
            reads,
            read_sources,
            options,
            option_sources,
            shaped=self.shaped,
        )
        words = _WithEnv(values, {n: v for n, v in (env or {}).items() if n in self.tainted})
        _refuse_system_destinations(words, destinations)
        _refuse_process_reads(words, reads, read_sources)
        _refuse_secret_file_reads(words, reads, read_sources, secret_files)
        _refuse_secret_files_beside_values(text, values, secret_files, self.tainted)
        for word in destinations:  # cd {{ d }} && rev *.txt (review 23's J2)
            refuse_secret_directory(words.literal(word), secret_files)
        _refuse_option_values(words, options, option_sources)


class _WithEnv:
    """A render's values, and the step's templated ``env:`` values, which the
    checker's words spell ``${NAME}`` (``held_text``)."""

    def __init__(self, values: Any, env: Mapping[str, str]) -> None:
        self.values = values
        self.env = env

    def literal(self, word: str) -> str:
        text = self.values.literal(word)
        for name, value in self.env.items():
            text = text.replace("${" + name + "}", literal_text(value))
        return text

    def unquoted(self, word: str) -> str:
        text = self.values.unquoted(word)
        for name, value in self.env.items():
            text = text.replace("${" + name + "}", value)
        return text


def _refuse_system_destinations(values: Any, destinations: set[str]) -> None:
    """A word holding a value that chooses where a write lands or where
    ``cd`` goes may not name the system's directories (``> /{{ path }}``
    with ``etc/ld.so.preload`` loads a library into every later program:
    reviews 17 and 18) nor climb with ``..``.  Only the render knows the
    text, so it checks the whole word, values put in and quotes removed;
    the message never shows a value."""
    from .shell.system_paths import destination_path

    for word in sorted(destinations):
        if not is_safe_destination(destination_path(values.literal(word))):
            raise UnsafeTemplateError(
                "run command refused before it ran: a value names where a file is written or "
                "where cd goes, under the system's directories (/etc, /usr, /lib...), a "
                "directory on PATH or a dot-file of HOME, or climbing with ..; write under "
                "the workspace or $TMPDIR"
            )


#: How a rendered path starts in the sandbox's HOME: ``~``, or ``$HOME``
#: (``tee "$HOME"/{{ x }}`` wrote ``~/.jq``: review 38's F1).
_HOME_WORDS = ("~", "$HOME", "${HOME}")


def is_safe_destination(path: str) -> bool:
    """May a value choose ``path`` (its text, as rendered) as where a file is
    written, ``cd`` goes or ``mktemp`` makes its files?  Not under the
    system's directories, not in a directory on the runner's ``PATH`` nor a
    dot-file of its ``HOME`` (where a later bare name or a program's start-up
    finds code), not climbing with ``..``, not ``~user/...``."""
    import os

    from .shell.proc_paths import names_process_path
    from .shell.system_paths import names_program_directory, names_system_path
    from .shell.system_paths import program_search_path as search_path

    parts = path.split("/")
    return not (
        names_system_path(path)
        # cd {{ d }} into /dev/fd or /dev, then od ../environ or fd/3 (review 21's H1)
        or names_process_path(path)
        or os.path.normpath(path) == "/dev"
        or ".." in parts
        or (path.startswith(_HOME_WORDS) and len(parts) > 1)
        or names_program_directory(
            path, search_path(), os.environ.get("HOME", os.path.expanduser("~"))
        )
    )


def _refuse_process_reads(values: Any, reads: set[str], sources: Collection[str] = ()) -> None:
    """A word holding a value that a program or the shell opens may not name
    /proc or /dev/fd: ``od -c {{ path }}`` with ``/proc/self/environ``
    printed a step's secret in a form the scrubber does not know (the
    nineteenth review).  ``sources`` are texts ``read`` cuts such a word
    from: no piece of one may spell those names, so none may hold ``proc``,
    ``fd`` or ``stdin`` (backslashes out, any case).  The message never
    shows a value."""
    from .shell.proc_paths import names_process_path

    refused = any(names_process_path(values.literal(word)) for word in reads) or any(
        may_spell_a_process_path(values.unquoted(text)) for text in sources
    )
    if refused:
        raise UnsafeTemplateError(
            "run command refused before it ran: a value names a file under /proc or "
            "/dev/fd (a process's environment, command line or descriptors) for a "
            "program to read"
        )


def _refuse_secret_file_reads(
    values: Any, reads: set[str], sources: Collection[str], secret_files: Collection[str]
) -> None:
    """A value may not name, for a program to read, a file a ``secret_file:``
    step wrote: ``od -c {{ f }}`` with ``.netrc`` printed the secret in a
    form the scrubber does not know (the twentieth review's G5), nor one a
    ``write:`` step filled from a secret input (review 22's I5).  Judged by
    the file's last name, whatever directory the value puts before it."""
    import posixpath

    names = {posixpath.basename(path.rstrip("/")) for path in secret_files} - {"", ".", ".."}
    if not names:
        return
    lowered = {name.lower() for name in names}
    named = any(_names_one_of(values.literal(w), names) for w in reads) or any(
        any(name in values.unquoted(text).replace("\\", "").lower() for name in lowered)
        for text in sources
    )
    if named:
        raise UnsafeTemplateError(
            "run command refused before it ran: a value names a secret's file for a program "
            "to read (one a secret_file: step wrote, a write: step filled from a secret "
            "input, or a from_file: secret is read from; it could print the secret in a "
            "form the scrubber does not know); read it with a fixed name in the template"
        )


def _note_secret_copies(
    text: str, values: Any, secret_files: Collection[str], copies: set[str] | None
) -> Collection[str]:
    """``secret_files`` and the files ``text`` copies or links from one of
    them (review 23's J4), which ``copies`` (if given) receives too."""
    from .shell.copies import copied_words
    from .shell.proc_paths import names_process_path

    names = {posixpath.basename(path.rstrip("/")) for path in secret_files} - {"", ".", ".."}
    directories = secret_directory_names(secret_files)
    found: set[str] = set()
    for destination, sources in copied_words(text):
        copied = [values.literal(source) for source in sources]
        target = values.literal(destination)
        if any(_names_one_of(source, names) for source in copied):
            found.add(target)
        for source in copied:
            last = posixpath.basename(posixpath.normpath(source.rstrip("/") or "/"))
            if last in directories:  # ln -sfn creds view; cp -r creds b (review 24's K2)
                found |= {posixpath.join(target, name) for name in names}
            if names_process_path(source):  # ln -s /proc/self me; od me/environ
                found.add(posixpath.join(target, "environ"))
    if copies is not None:
        copies |= found
    return {*secret_files, *found}


def _refuse_secret_files_beside_values(
    text: str, values: Any, secret_files: Collection[str], tainted: Collection[str] = ()
) -> None:
    """A command that holds a value or a templated ``env:`` value
    (``tainted``), with its pipeline and redirects, may not name a secret's
    file by a fixed word: the value would choose how the file is printed
    (``grep -o {{ key }} npmrc.txt``, ``fold -w {{ w }} npmrc.txt``: review
    24's K7); nor read folders recursively, or the files a list names,
    while a secret's file exists (review 49's G2; any folder: a link may
    lead anywhere, review 51's F2)."""
    from .shell.secret_reads import fixed_words_beside_values, recursive_readers_beside_values

    names = {posixpath.basename(path.rstrip("/")) for path in secret_files} - {"", ".", ".."}
    if not names or not (values.sentinels or tainted):
        return
    for word in fixed_words_beside_values(text, values.sentinels, tainted):
        if _names_one_of(word, names):
            shown = "a name built when it runs" if word == "*" else posixpath.basename(word)
            raise UnsafeTemplateError(
                "run command refused before it ran: a command that holds a value names a "
                f"secret's file ({shown}); the value could choose how it "
                "is printed: read the file in a command without values, or name files "
                "by fixed words while a secret's file is in the sandbox"
            )
    readers = recursive_readers_beside_values(text, values.sentinels, tainted)
    if readers:
        raise UnsafeTemplateError(
            f"run command refused before it ran: a command that holds a value ({readers[0]}) "
            "reads folders recursively, or the files a list names, while a secret's file "
            "is in the sandbox; the value could choose how it is printed: name the files "
            "(grep -n -- {{ q }} src/*.py), or run the search in a step without values"
        )


def secret_directory_names(secret_files: Collection[str]) -> set[str]:
    """The name of every directory on the path of a secret's file."""
    return {
        part
        for secret in secret_files
        for part in posixpath.dirname(secret).split("/")
        if part not in ("", ".", "..")
    }


def refuse_secret_directory(path: str, secret_files: Collection[str]) -> None:
    """A value may not choose, as where ``cd`` goes (or a step's ``cwd:``, or
    where a write lands), a directory that holds a secret's file: there a
    fixed name or glob of the template reads it (``cd -- {{ d }} && rev
    *.txt`` with ``creds`` printed ``creds/token.txt`` reversed: review 23's
    J2).  Judged by name: the path's last name may not be the name of any
    directory on a secret file's path."""
    import posixpath

    names = secret_directory_names(secret_files)
    last = posixpath.basename(posixpath.normpath(path.rstrip("/") or "/"))
    # cd - goes back, pushd +1 round the stack: to a place the check cannot name
    moves = path == "-" or (path[:1] in "+-" and path[1:].isdigit())
    if names and (last in names or moves):
        raise UnsafeTemplateError(
            "run command refused before it ran: a value chooses a directory that holds "
            f"a secret's file ({last}), where the command's own names could read it; "
            "name that directory in the template, or keep secret files out of it"
        )


def names_a_secret_file(path: str, secret_files: Collection[str]) -> bool:
    """Might ``path`` name one of ``secret_files`` (by last name, a glob too)?"""
    names = {posixpath.basename(p.rstrip("/")) for p in secret_files} - {"", ".", ".."}
    return bool(names) and _names_one_of(path, names)


def _names_one_of(word: str, names: set[str]) -> bool:
    """Might ``word`` (a literal text; a value's own pattern characters are
    inert) name a file whose last name is one of ``names``, its own glob too
    (``{{ dir }}/*.txt``: review 22's I4)?"""
    import fnmatch
    import posixpath

    last = posixpath.basename(word.rstrip("/"))
    if any(c in last for c in "*?["):
        return any(fnmatch.fnmatchcase(name, last) for name in names)
    return last in names


def _refuse_option_values(values: Any, options: set[str], sources: Collection[str] = ()) -> None:
    """A value that starts a program's argument before ``--`` may not start
    with ``-``: the program would read it as an option (``grep -rn {{ q }} .``
    with ``-ohe.`` printed a secret file one character a line: the
    twentieth review's G5).  The message never shows the value."""
    pieces = any(_may_cut_an_option(values.unquoted(text)) for text in sources)
    if pieces or any(values.literal(word).startswith("-") for word in options):
        raise UnsafeTemplateError(
            "run command refused before it ran: a value that starts with - reaches a "
            "program where it would be read as an option; put -- before the program's "
            "operands (grep -rn -- {{ q }} .), or glue the value to its option "
            "(--regexp={{ q }}), or declare the input no_leading_option"
        )


def _may_cut_an_option(text: str) -> bool:
    """Could ``read`` cut from ``text`` a piece that starts with ``-`` (at
    a line's or a field's start, or after any character that is not a
    letter or digit, which a script's own IFS may split at: review 22's I3)?"""
    import re

    return re.search(r"(^|[^0-9A-Za-z])-", text, flags=re.M) is not None


def may_spell_a_process_path(text: str) -> bool:
    """Could a piece that ``read`` cuts from ``text`` (a field, a line, its
    backslashes removed) name a path under /proc or /dev/fd?"""
    flat = text.replace("\\\n", "").replace("\\", "").lower()
    return any(name in flat for name in ("proc", "fd", "stdin"))


def refuse_unsafe_env_values(env: Mapping[str, str], templated: Collection[str]) -> None:
    """A step's templated ``env:`` values, as rendered: one may not name a
    file under /proc or /dev/fd (the script may hand it to a program to
    read: ``od -c "$P"``), and one in a variable that names where programs
    write (``TMPDIR``, ``HOME``, ``XDG_*``) is a destination (the
    nineteenth review's ``TMPDIR: /etc/profile.d``).  The message names the
    variable, never the value."""
    from .shell.proc_paths import names_process_path
    from .shell.system_paths import DESTINATION_ENV

    for name in sorted(templated):
        text = literal_text(env[name])
        if names_process_path(text):
            raise UnsafeTemplateError(
                f"run command refused before it ran: env {name}: a value names a file under "
                "/proc or /dev/fd (a process's environment, command line or descriptors)"
            )
        if name in DESTINATION_ENV and not is_safe_destination(text):
            raise UnsafeTemplateError(
                f"run command refused before it ran: env {name}: a value chooses where "
                "programs write, under the system's directories, a directory on PATH or a "
                "dot-file of HOME, or climbing with ..; use a path under the workspace or $TMPDIR"
            )


def _refuse_unsafe(
    text: str,
    sentinels: list[str],
    tainted: Collection[str],
    shell: str | None = None,
    consumers: Collection[str] | None = None,
    exported: Collection[str] = (),
    destinations: set[str] | None = None,
    reads: set[str] | None = None,
    read_sources: set[str] | None = None,
    options: set[str] | None = None,
    option_sources: set[str] | None = None,
    *,
    shaped: bool,
) -> None:
    from .shell.checker import check_script

    findings = check_script(
        text,
        sentinels,
        tainted,
        shaped=shaped,
        shell=shell,
        consumers=consumers,
        exported=exported,
        destinations=destinations,
        reads=reads,
        read_sources=read_sources,
        options=options,
        option_sources=option_sources,
    )
    if findings:
        where = "; ".join(
            f"line {f.line}, column {f.column}"
            + (f" (value {f.index + 1})" if f.index is not None else "")
            + f": {f.message}"
            for f in findings
        )
        raise UnsafeTemplateError(f"run command refused before it ran: {where}")


def compile_template(
    source: str,
    *,
    shell: bool,
    fields_by_name: Mapping[str, frozenset[str] | None],
    tainted_env: Collection[str] = (),
    shell_name: str | None = None,
    consumers: Collection[str] | None = None,
    exported_env: Collection[str] = (),
) -> tuple[Template | None, list[TemplateProblem]]:
    """Compile ``source`` and check the names it uses.

    ``fields_by_name`` maps each usable name to the fields its schema declares
    (None: any field).  ``tainted_env`` (run commands): environment variables
    of the step whose values are templated; ``shell_name`` the configured
    shell (None: bash, or sh where the image has no bash); ``consumers`` the
    programs of strict mode (None: the default mode); ``exported_env`` every
    name of the step's ``env:`` (exported before the script runs, templated
    or not).  Returns the template
    (None when there are problems) and the problems found.
    """
    tainted = frozenset(tainted_env) if shell else frozenset()
    strict = frozenset(consumers) if consumers is not None and shell else None
    exported = frozenset(exported_env) if shell else frozenset()
    if not any(marker in source for marker in ("{{", "{%", "{#")):
        # Plain text: nothing to compile (most step fields are like this).
        problems = (
            _shell_problems(source, None, tainted, shell_name, strict, exported, shaped=False)
            if tainted
            else []
        )
        if problems:
            return None, problems
        return (
            Template(
                source, shell, frozenset(), tainted=tainted, consumers=strict, exported=exported
            ),
            [],
        )
    environment = _SHELL if shell else _TEXT
    try:
        tree = environment.parse(source)
    except TemplateSyntaxError as exc:
        message = f"template syntax: {exc.message}"
        if "{#" in source and "comment" in (exc.message or ""):
            # bash's ${#x} and ${#a[@]} open a Jinja comment (review 23's U1)
            message += (
                "; `{#` starts a Jinja comment: put bash's `${#name}` inside "
                "{% raw %}...{% endraw %} (n={% raw %}${#name}{% endraw %})"
            )
        return None, [TemplateProblem(_offset_of_line(source, exc.lineno), message)]
    problems = [
        TemplateProblem(
            _offset_of_line(source, line),
            f"templates may not use {what}: it reaches outside the template sandbox",
        )
        for line, what in _unsafe_access(tree)
    ]
    names = frozenset(meta.find_undeclared_variables(tree))
    known = set(fields_by_name) | BUILTIN_NAMES
    for name in sorted(names - known):
        if name == "secrets":
            problems.append(
                TemplateProblem(
                    _name_offset(source, name),
                    "secrets are never templated into text; give the step "
                    "`secrets: {ENV_NAME: secret}` and use $ENV_NAME in the command",
                )
            )
            continue
        declared = ", ".join(sorted(fields_by_name)) or "none"
        problems.append(
            TemplateProblem(
                _name_offset(source, name),
                f"undeclared name {name!r} (declared inputs: {declared}; "
                "give an input `as: name` to use it here)",
            )
        )
    for node in tree.find_all(nodes.Getattr):
        if isinstance(node.node, nodes.Name) and node.node.ctx == "load":
            fields = fields_by_name.get(node.node.name)
            if fields is not None and node.attr not in fields:
                problems.append(
                    TemplateProblem(
                        _name_offset(source, f"{node.node.name}.{node.attr}"),
                        f"input {node.node.name!r} has no field {node.attr!r} "
                        f"(its schema declares: {', '.join(sorted(fields)) or 'none'})",
                    )
                )
    shaped = False
    if shell:
        found = value_text(tree, names - RUNNER_NAMES)
        if found.chosen is not None:
            problems.append(TemplateProblem(_offset_of_line(source, found.chosen), CHOSEN_TEXT))
        shaped = found.shaped
        problems.extend(
            _shell_problems(source, tree, tainted, shell_name, strict, exported, shaped=shaped)
        )
    if problems:
        return None, sorted(problems, key=lambda p: p.offset)
    return Template(source, shell, names, tree, tainted, strict, exported, shaped), []
