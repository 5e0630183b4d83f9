"""Can an input value, wherever it flows in a ``run`` script, reach anything that runs it?

Values are inserted as single-quoted words, and quoting protects a value
only while bash treats it as data.  ``templates`` renders each value as a
unique *sentinel* word first; this module reads the exact text that will run
with tree-sitter-bash and answers for the whole script, in three passes:

1. **The whole script lies in the subset the checker models.**  A script that
   holds a value (a sentinel, or a step ``env:`` variable templated from one)
   may not define functions, rebind names (``alias``, ``hash``, ``enable``,
   ``trap``, ``eval``, ``source``, ``let``, ``exec CMD``, ``shopt``/``set``
   beyond the usual options, ``PATH``/``PS4``/``BASH_*`` assignments),
   declare with options (``declare -n``), expand indirectly (``${!x}``,
   ``${x@P}``), use backticks or ``>( )``, or call a command by a name that
   is not a literal word.  These lines carry no value, but change what the
   lines that do mean.
2. **Taint by default.**  Every variable that may hold a value is *tainted*:
   one assigned anything that carries a value, every ``read``/``mapfile``/
   ``getopts``/``printf -v`` target, ``for`` variables over a value,
   ``REPLY``, ``$_``, the positional parameters.  Names are compared after
   bash's quote removal (the parse tree's words), and a name that cannot be
   read before the script runs is refused.  Arithmetic (``(( ))``,
   ``$(( ))``, subscripts, ``${x:off}``, ``[[ -eq ]]``) may only name
   variables this script sets to numbers.
3. **Follow each value to its readers.**  A value reaches a command through
   its arguments, a here-string, a ``<`` redirect, ``<( )``, a pipe from a
   command that received one (every later stage), the stdin of a compound
   statement, a ``NAME=value cmd`` prefix, or a static file it was written
   to.  Every such reader must be allowed to receive data: never a shell, an
   interpreter or a program GTFOBins lists as running commands (``executors``),
   never a builtin outside ``SAFE_BUILTINS``; in strict mode (``consumers``)
   only the named programs and ``STRICT_RECEIVERS``.  A value's word must be
   data where it stands (``"$NAME"`` for a tainted variable; an unquoted
   ``$( )`` that carries one is split again and refused).

This module runs the passes in order and answers (``check_script``); each pass
lives in a module of its own, as a class composed here into ``_Check``:
``subset`` (pass 1) and ``agreement`` (a parse bash would not share),
``taint`` (where the values are, pass 2, arithmetic), ``flows`` (pass 3, from
a value to its readers) over ``option_words`` (what ``printf`` and ``test``
read as options), ``receivers`` (who may receive one, and the files values
reach) and ``beside`` (what may run anywhere in a script that holds a value;
in strict mode a closed world), ``writes`` (no write or ``cd`` into the
system's directories), all over ``state`` (the shared state and helpers),
``proc_paths`` and ``system_paths`` (words that may name /proc, or /etc and
its kin) and ``tree`` (the parse).  The facts they judge by are ``rules`` (the
rule table, builtins, dialects), ``programs`` (who runs what it gets, who may
get a value) and ``variables`` (names that change how the shell runs).
Classes rather than free functions: the passes call each other at every step
(a flow reaches a receiver, a receiver's file is read by a later flow) and
share one state, so as methods of one object they keep the calls and the state
of the single class they came from, and each class's bases say what it may
call.

Whatever the checker does not recognise is refused; each refusal names its
rule and the fix (``rules.RULES``).  The cost is linear in the size of
the script: one walk builds parent and field maps, sentinels are found with
one scan, and each container is climbed once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from .beside import BesideValuesCheck
from .rules import RULES, dialect_of, reads_env_as_data
from .state import Finding
from .subset import SubsetCheck
from .taint import TaintCheck
from .variables import controls_start_up, is_shell_control_name
from .writes import SystemWritesCheck

__all__ = ["RULES", "Finding", "check_script", "is_shell_control_name"]


class _Check(SubsetCheck, TaintCheck, BesideValuesCheck, SystemWritesCheck):
    """One script: the three passes of the module docstring."""

    def run(self) -> list[Finding]:
        has_values = bool(self.sentinels) or bool(self.env_tainted)
        error = next((n for n in self.tree.nodes if self.misparsed(n)), None)
        detail = ""
        if error is None and has_values:
            error = self.control_blank()
            if error is None and (error := self.escaped_blank()) is not None:
                detail = "a backslash before a blank: continue a line with ' \\' after a blank"
            error = error or self.unparsed_expansion()
        if error is not None and has_values:
            self.refuse("syntax", error, detail, index=None)
            return self.findings
        unclear = self.unclear_heredoc()
        if unclear is not None:
            self.refuse(
                "heredoc", unclear, "its end is not a line bash would surely end it on", index=None
            )
            return self.findings
        self.locate_values()
        if not self.value_nodes and not self.env_tainted and not self.findings:
            return self.findings  # no value was printed (a loop or branch not taken)
        self.value_starts = sorted(self.value_nodes)
        self.constructs()
        readers: dict[int, Any] = {}
        followed: dict[int, Any] = {}
        while True:  # until no command newly reads a value from a file or its stdin
            self.taint()
            self.arithmetic()
            self.flows()
            for reader in readers.values():
                self.judge_reader(reader)
            for reader in followed.values():
                self.follow_output(reader)
            found = {r.id: r for r in self.file_readers() if r.id not in readers}
            piped = {k: c for k, c in self.stdin_readers.items() if k not in followed}
            if not found and not piped:
                self.programs_beside_files()
                self.globs_into_variables()
                self.interpreters_beside_values()
                self.jq_programs_fixed()
                self.computed_words()
                self.environment_dumps()
                self.strict_programs_only()
                self.system_files_written()
                self.makers_with_unread_names()
                if not self.findings and (stray := self.stray_quote()) is not None:
                    # last, so that a refusal that says more comes first
                    self.refuse("syntax", stray, "a quote the parser kept as text", index=None)
                return self.findings
            readers.update(found)
            followed.update(piped)
            # their output carries the value: a $( ) around one taints its variable
            self.extra_starts.update(r.start_byte for r in (*found.values(), *piped.values()))


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    """Each finding once; a whole-script finding where a value's own finding
    stands already (``eval {{ x }}``: rebinding and evaluating-builtin) is dropped."""
    found = set(findings)
    at_values = {(f.line, f.column) for f in found if f.index is not None}
    kept = [f for f in found if f.index is not None or (f.line, f.column) not in at_values]
    return sorted(kept, key=lambda f: (f.line, f.column, f.rule, str(f.index), f.detail))


def check_script(
    script: str,
    sentinels: Sequence[str],
    tainted: Collection[str] = (),
    *,
    shell: str | None = None,
    consumers: Collection[str] | None = None,
    exported: Collection[str] = (),
    destinations: set[str] | None = None,
    reads: set[str] | None = None,
    read_sources: set[str] | None = None,
    options: set[str] | None = None,
    option_sources: set[str] | None = None,
    shaped: bool = False,
) -> list[Finding]:
    """Every way a value of ``script`` could run as code; empty when none can.

    ``sentinels[i]`` is the exact word (``'RV…'``) that stands for value *i*;
    ``tainted`` names environment variables that hold a value (a step's
    templated ``env``).  ``shell`` is the step's shell (None: bash);
    ``consumers`` (None: the default mode) names the only programs that may
    receive a value besides ``STRICT_RECEIVERS``; ``exported`` names the
    variables exported before the script runs (the step's ``env:``), so a
    value the script assigns to one is exported too.  ``destinations``, when
    given, receives the words (sentinels and all) in which a value names
    where a write lands or where ``cd`` goes: the caller checks them with
    the values in (``system_paths``).  ``reads``, likewise, the words in
    which a value names a file a program or the shell opens, and
    ``read_sources`` the texts ``read`` cuts such a word from (``held_text``),
    ``options`` the words a value starts before a program's ``--``, and
    ``option_sources`` the texts ``read`` cut such a word from.
    ``shaped``: a Jinja loop over a value repeated the script's text, so any
    variable it assigns may hold what the value decided (``chosen_text``).
    """
    if not sentinels and not tainted:
        return []
    dialect = dialect_of(shell)
    if dialect is None:
        if not sentinels and reads_env_as_data(shell):
            return []  # env values: the program reads its environment as data
        return [Finding(None, "shell-dialect", 1, 1, f"shell {shell!r}")]
    check = _Check(
        script.encode("utf-8"), [s.encode("utf-8") for s in sentinels], tainted, dialect, consumers
    )
    check.env_names = frozenset(exported)
    check.shaped = shaped
    # A static env: value bash acts on before the script's first line
    # (SHELLOPTS=xtrace, PS4 with ${BASH_COMMAND@P}: the fourteenth review)
    # is a rebinding the script's text does not show.
    preset = [
        Finding(None, "rebinding", 1, 1, f"env: {name}")
        for name in sorted(set(exported) - set(tainted))  # templated ones: [env-name]
        if controls_start_up(name)
    ]
    findings = _unique(preset + check.run())
    if destinations is not None:
        destinations.update(check.value_destinations)
    if reads is not None:
        reads.update(check.value_reads)
    if read_sources is not None:
        read_sources.update(check.value_read_sources)
    if options is not None:
        options.update(check.value_option_words)
    if option_sources is not None:
        option_sources.update(check.value_option_sources)
    return findings
