"""Random bash ``run`` templates with Jinja placeholders, for the injection fuzzer.

``generate(seed)`` returns a :class:`Case`: a template whose ``{{ x.vK }}``
placeholders stand in random positions of a random (mostly valid) bash
script, the hostile values to render it with, an optional step ``env:``
mapping, and the shell to run it with.  Everything comes from one
``random.Random(seed)``, so a seed reproduces its case exactly.

Why the grammar looks the way it does:

- **Harmless and terminating.**  Command names come from a fixed set (the
  probe ``argv``, ``echo``, ``printf``, ``cat``, ``:`` and the builtins that
  evaluate text or take variable names).  Loops are bounded (``for i in 1 2``,
  ``while false``), ``cd`` never leaves the work directory, and the only way a
  file named ``CANARY...`` can appear is a hostile value running as code.
- **The probe only sees exact copies.**  The oracle checks that every
  argument of ``argv`` holding a value's marker holds the whole value.  So
  ``argv`` is only given words that carry a value intact when the template is
  handled correctly (a placeholder, a glued placeholder, ``"$N"`` of a
  variable assigned a value verbatim, ``"$(printf %s {{ x.v0 }})"`` ...) or
  a placeholder in a place the checker must refuse (``'{{ x.v0 }}'``).
  Words that split or rewrite by the author's own choice (``$N`` unquoted,
  ``${N@P}``) go to ``echo``/``printf``/``cat``, where only the canary counts.
- **Plenty of safe templates.**  A per-case ``risk`` scales the weight of the
  productions a correct checker must refuse, so a good share of cases is
  safe and gets run, and the rest mixes safe text with scanner traps
  (quote characters in comments, ``]]`` in strings, loop counts that change
  the quote state...).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# --- values -------------------------------------------------------------------

#: Payloads that run ``touch CANARYn`` (or split/glob) when read as code.
#: Each marked value is ``V<k>_`` + a payload (items: ``I<j>_``); the marker
#: is a valid identifier prefix, so ``V0_a[$(touch CANARY4)]`` still works as
#: an array reference in arithmetic.
PAYLOADS = [
    "$(touch CANARY1)",
    "`touch CANARY2`",
    ";touch CANARY3",
    "a[$(touch CANARY4)]",
    "x\ntouch CANARY5",
    "x\ntouch CANARY5 #",
    "'; touch CANARY6; '",
    '"$(touch CANARY7)"',
    "--upload-pack=touch CANARY8",
    "|touch CANARY14",
    "&touch CANARY15",
    ")\ntouch CANARY16 #(",
    "a[`touch CANARY17`]",
    "x && touch CANARY18",
    "$'\\x27'$(touch CANARY19)",
    "\\$(touch CANARY20)",
    "}; touch CANARY21; {",
    "]]; touch CANARY22; [[ ",
    ")); touch CANARY23; ((",
    "*",
    "?",
    "[a]",
    "{a,b}",
    "a b",
    " a\tb ",
    "~",
    "",
    "'",
    '"',
    "\\",
    "#",
    "a'b\"c\\d",
    "$IFS",
    "${IFS}x",
    "-x",
    "\nEOF\ntouch CANARY24\nEOF",
    "%s%n%(x)T",
]

#: Values used as they are (no marker): options, globs and words whose
#: meaning a marker would change.  The canary is the only check for these.
BARE_VALUES = ["-v", "-x", "-n", "-C", "-a", "-i", "-e", "-p", "-c", "--", "*", "?", "~", ""]
#: ``payload`` is a program on the scripts' PATH that creates CANARY_CMD:
#: a value run as a command name (``exec {{ x }}``, ``<({{ x }})``) shows.
BARE_VALUES += ["eval", "source", ".", "payload", "payload", "payload"]

#: Values for env entries whose meaning needs the exact text.
BARE_ENV_VALUES = ["() { touch CANARY10; }", "xtrace", "expand_aliases", "xtrace:errexit"]


#: Payloads that fire in most places (arithmetic, names, eval, double quotes,
#: heredocs, comments): drawn more often, so rare productions meet one.
UNIVERSAL_PAYLOADS = [
    "a[$(touch CANARY4)]",
    "a[`touch CANARY17`]",
    "a[$(touch CANARY26)]=1",  # declare/local NAME[...]=... evaluate the subscript
    "a[$(touch CANARY4)]'\n;touch CANARY25 #",
    "\n$(touch CANARY1)\n#x",  # no trailing newline: "$( )" would strip it
]


def marked(marker: str, rng: random.Random) -> str:
    """A hostile value that starts with ``marker``: one payload, sometimes two."""
    if rng.random() < 0.35:
        value = marker + rng.choice(UNIVERSAL_PAYLOADS)
    else:
        value = marker + rng.choice(PAYLOADS)
    if rng.random() < 0.2:
        value += rng.choice(PAYLOADS)
    return value


def designed_pair(marker: str, rng: random.Random) -> tuple[str, str]:
    """Two values for an option attack: (option, next value), for ``[ -v NAME ]``,
    ``printf -v NAME``, ``declare -n NAME``, ``mapfile -C CODE``, ``bash -c CODE``."""
    option = rng.choice(["-v", "-v", "-n", "-i", "-a", "-p", "-C", "-c", "-e"])
    if option in ("-C", "-c", "-e"):
        return option, f"touch CANARY12 {marker}x"
    return option, marker + rng.choice(["a[$(touch CANARY9)]", "a[`touch CANARY9`]"])


# --- the case -----------------------------------------------------------------


@dataclass
class Case:
    """One template, its values, its env mapping and the shell to run it with.

    ``parts`` are the top-level statements (``template`` is their
    concatenation); the oracle's shrinker removes them one at a time.
    """

    template: str
    values: dict[str, str]
    items: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    shell: str = "bash"
    seed: int | None = None
    note: str = ""
    parts: list[str] | None = None
    risk: float | None = None  # the generator's risk level (statistics only)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "template": self.template,
            "values": self.values,
            "items": self.items,
            "env": self.env,
            "shell": self.shell,
        }
        if self.seed is not None:
            data["seed"] = self.seed
        if self.note:
            data["note"] = self.note
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(
            template=data["template"],
            values=dict(data.get("values") or {}),
            items=list(data.get("items") or []),
            env=dict(data.get("env") or {}),
            shell=data.get("shell", "bash"),
            seed=data.get("seed"),
            note=data.get("note", ""),
        )

    def markers(self) -> dict[str, str]:
        """marker -> value, for the values the oracle can follow (marked ones)."""
        found = {}
        for name, value in self.values.items():
            marker = f"V{name[1:]}_"
            if value.startswith(marker):
                found[marker] = value
        for index, value in enumerate(self.items):
            marker = f"I{index}_"
            if value.startswith(marker):
                found[marker] = value
        return found


# --- names the generated scripts use --------------------------------------------

#: Variables that only ever hold a value verbatim (so ``argv "$N"`` is exact).
EXACT_VARS = ["N", "M", "P"]
#: Variables assigned by commands that rewrite what they store (read, let ...).
SCRATCH_VARS = ["r", "s", "t"]
#: Shell variables bash itself reads or evaluates when they are assigned.
SPECIAL_VARS = [
    "PS4",
    "BASH_ENV",
    "ENV",
    "IFS",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "BASH_XTRACEFD",
    "OPTIND",
    "RANDOM",
    "SECONDS",
    "LINENO",
    "COLUMNS",
    "TMOUT",
    "HISTFILE",
    "TIMEFORMAT",
    "GLOBIGNORE",
    "BASH_ARGV0",
]
#: Names for a step's ``env:`` entries.
PLAIN_ENV_NAMES = ["V", "REPO", "BRANCH"]
CONTROL_ENV_NAMES = [
    "BASH_ENV",
    "ENV",
    "PS4",
    "IFS",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "LD_PRELOAD",
    "BASH_FUNC_x%%",
    "BASH_XTRACEFD",
    "PS0",
    "CDPATH",
    "GLOBIGNORE",
]

#: Harmless literal words.
LITERALS = ["a", "b", "--", "-n", "x.txt", "0", "1", "sub", "."]

#: Quoted strings full of characters a hand-written scanner may miscount.
TRICKY_STRINGS = [
    "']]'",
    '"]]"',
    "'))'",
    '"))"',
    "')'",
    '")"',
    "'}'",
    '"}"',
    "'\"'",
    '"\'"',
    '"\\`"',
    "'`'",
    "'#'",
    '"#"',
    "$'\\''",
    '$"a\'"',
    "\\'",
    '\\"',
    "\\`",
    "\\#",
    "'\\'",
    '"\\""',
    "'$('",
    '"\\$("',
    "'<<EOF'",
    "\\]\\]",
]

#: Statements that are valid bash but easy to misread (the scanner traps).
#: Entries ending in a newline must end their line (comments, heredocs).
GADGETS = [
    '[[ a == "]]" ]]',
    "[[ a == ']]' ]]",
    "[[ a == \\]\\] ]]",
    "[[ ( a == a ) ]]",
    "(( 1 )) # ')'\n",
    'echo $(( 1 )) "))"',
    'echo ${U:-"}"}',
    "echo ${U:-'}'}",
    "(# '\n:)",
    '(# "\n:)',
    "(:)# '\n",
    "(:)#'\n",
    '{ :; } # "\n',
    "echo a \\\n# '\n",
    "echo \\\n#'\n",
    "echo a#'b'",
    "echo $#'x'",
    "case a in (a) echo ')' ;; esac",
    "case a in a) ;; esac # '\n",
    'case "\'" in "\'") ;; esac',
    "echo $'\\''",
    'echo "\\""',
    "echo '\\'",
    "echo `echo \\``",
    'echo "$(echo ")")"',
    'echo "$( case a in a) echo x;; esac )"',
    "x=(')'); echo \"${x[0]}\"",
    'echo $"a\'"',
    "cat <<'EOF'\n'\nEOF\n",
    'cat <<EOF\n"\nEOF\n',
    'cat <<-"EOF"\n\t\'\n\tEOF\n',
    "cat <<E\\OF\n'\nEOF\n",
    'cat <<"E"OF\n"\nEOF\n',
    "cat <<EOF; echo '\n'\nEOF\n",
    "echo $((1))#'x'",
    "f() ( : ')' ); f",
    "echo \\'",
    'echo \\"',
    "echo '#' \\\n'x'",
    ": <<'EOF' # '\nEOF\n",
    "echo $(( 1 ))\\\n'x'",
    'a=([0]="\'")',
    'echo "$(echo \'"\')"',
]

#: Jinja text that prints a quote or hides one (the checker must read what
#: Jinja prints, not the source).
JINJA_GADGETS = [
    '{{ "\'" }}',
    "{{ '\"' }}",
    "{% raw %}'{% endraw %}",
    '{% raw %}"{% endraw %}',
    "{% raw %}`{% endraw %}",
    "{# ' #}",
    '{# " #}',
    "{% if false %}'{% endif %}",
    "{% if x.items %}'{% endif %}",
    "{{ '' }}",
    "{% raw %}{{ x.v0 }}{% endraw %}",
]

QUOTE_TOGGLES = ["'", '"', "`", "$(", ")", "#", "\n", "$'", "<<EOF\n", "(( ", "[[ ", "${U:-"]


# --- the generator ------------------------------------------------------------


#: Production tiers.  PLAIN: placeholders where any checker should accept
#: them (plain arguments, redirect targets, ``N={{ x }}`` then ``"$N"``).
#: SUBTLE: safe too, but a careful checker may refuse them (``"${N:-d}"``,
#: function arguments, ``|tojson``).  RISKY: a correct checker must refuse.
PLAIN, SUBTLE, RISKY = "plain", "subtle", "risky"


class Gen:
    """Builds one case's script; every choice comes from ``self.r``.

    Productions are small methods returning template text, each of a tier:
    RISKY weights are multiplied by ``self.risk`` (0 for a case that should
    be accepted in full), SUBTLE ones by ``self.subtle`` (low when risk is 0,
    so most risk-0 cases are plainly safe).
    """

    def __init__(self, rng: random.Random, values: dict[str, str], risk: float, shell: str) -> None:
        self.r = rng
        self.fields = list(values)
        #: fields that never print empty: the only ones a glob may be glued to
        #: (``*{{ x.v0 }}`` with an empty value is ``*``, which lists the decoys)
        self.nonempty = [name for name, value in values.items() if value]
        self.risk = risk
        self.subtle = max(risk, 0.15)
        self.shell = shell
        self.depth = 0
        self.exact: list[str] = []  # variables holding a value verbatim
        self.env_names: list[str] = []  # env entries holding a value
        self.functions: list[str] = []  # functions defined so far
        self.loop_var: str | None = None  # the Jinja loop variable in scope
        self.jinja_names: list[str] = []  # names set with {% set %}
        self.function_depth = 0

    # -- choice helpers --

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def risky(self, p: float) -> bool:
        return self.r.random() < p * self.risk

    def tier_weight(self, tier: str) -> float:
        return {PLAIN: 1.0, SUBTLE: self.subtle, RISKY: self.risk}[tier]

    def pick(self, options: list[tuple[float, str, Callable[[], str]]]) -> str:
        """Run one production: (weight, tier, production)."""
        weights = [w * self.tier_weight(tier) for w, tier, _ in options]
        if not any(weights):
            weights = [w for w, _, _ in options]
        (_, _, production) = self.r.choices(options, weights)[0]
        return production()

    def tiered(self, plain: list[str], subtle: list[str] = (), risky: list[str] = ()) -> str:
        """One of the strings, each list weighted by its tier (and its length)."""
        lists = [(list(plain), PLAIN), (list(subtle), SUBTLE), (list(risky), RISKY)]
        weights = [len(items) * self.tier_weight(tier) for items, tier in lists]
        if not any(weights):
            weights = [len(items) for items, _ in lists]
        (items, _) = self.r.choices(lists, weights)[0]
        return self.r.choice(items)

    def field_expr(self) -> str:
        """The Jinja expression of one value: a field, the loop item, a set name."""
        if self.loop_var and self.chance(0.6):
            return self.loop_var
        if self.jinja_names and self.chance(0.4):
            return self.r.choice(self.jinja_names)
        name = self.r.choice(self.fields)
        return f'x["{name}"]' if self.chance(0.05 * self.subtle) else f"x.{name}"

    # -- placeholders --

    def ph(self) -> str:
        """A ``{{ }}`` that prints one value (transformed at most by a filter
        the oracle knows: default, string, safe, trim, tojson, e, upper)."""
        expr = self.field_expr()
        if self.chance(0.03):
            return '{{ x.items|join(" ") }}'
        if self.chance(0.8):
            return "{{ " + expr + " }}"
        suffix = self.tiered(
            ['|default("d")', "|string", "|trim", "|upper"],
            ["|safe", "|tojson", "|e", ' ~ ""', " if true else 1"],
        )
        return "{{ " + expr + suffix + " }}"

    def glued_ph(self) -> str:
        """A placeholder glued to literal text; still one word holding the value."""
        before = self.r.choice(["pre", "--opt=", "~", "*", "a=", "x.", "-", "'l'", '"l"', "$U", ""])
        after = self.r.choice(["", "post", "=x", ".txt", "*", "'l'", '"l"', "$U"])
        if self.chance(0.2):
            return "{a," + self.ph() + "}"
        if "*" in before + after:
            if not self.nonempty:
                return self.ph()
            ph = "{{ x." + self.r.choice(self.nonempty) + " }}"
            return before + ph + after
        return before + self.ph() + after

    def quoted_ph(self) -> str:
        """A placeholder inside quotes or backticks: must be refused."""
        ph = self.ph()
        return self.r.choice(
            [
                f"'{ph}'",
                f'"{ph}"',
                f"$'{ph}'",
                f'$"{ph}"',
                f"`echo {ph}`",
                f"'a {ph} b'",
                f'"a {ph} b"',
                f'"$U{ph}"',
                f"'{ph}",
                f"{ph}'",
            ]
        )

    def reevaluated_ph(self) -> str:
        """A placeholder where bash evaluates the text again: must be refused."""
        ph = self.ph()
        return self.r.choice(
            [
                f"$(( {ph} ))",
                f"$(( {ph} + 0 ))",
                f"$[ {ph} ]",
                f"${{a[{ph}]}}",
                f"${{U:-{ph}}}",
                f"${{U:={ph}}}",
                f"${{!{ph}}}",
                f"${{ {ph} }}",
                f"${{U:0:{ph}}}",
                f"<({ph})",
                f"$({ph})",
                f"`{ph}`",
                f"e$()val {ph}",
                f"{ph}{ph}",
                f">& {ph}",
                f"1>&{ph}",
            ]
        )

    # -- words --

    def exact_ref(self) -> str:
        """``"$N"``-like words that expand to a value verbatim."""
        names = self.exact + self.env_names
        if not names:
            return self.ph()
        name = self.r.choice(names)
        return self.tiered(
            [f'"${name}"'] * 3,
            [
                f'"${{{name}}}"',
                f'"${{{name}:-d}}"',
                f'x"${name}"',
                f'"${{{name}}}"y',
                f'"$(printf %s "${name}")"',
            ],
        )

    def strict_word(self) -> str:
        """A word for the probe: it either carries each value whole, or puts a
        placeholder where a correct checker refuses it."""
        return self.pick(
            [
                (3, PLAIN, lambda: self.r.choice(LITERALS)),
                (10, PLAIN, self.ph),
                (3, PLAIN, self.glued_ph),
                (3, PLAIN, self.exact_ref),
                (1, PLAIN, lambda: f'"$(printf %s {self.ph()})"'),
                (0.5, PLAIN, lambda: f'"$(argv {self.ph()})"'),
                (0.5, SUBTLE, lambda: '"${a[0]}"'),
                (0.5, SUBTLE, lambda: '"$ref"'),
                (3, RISKY, self.quoted_ph),
                (1.5, RISKY, self.reevaluated_ph),
            ]
        )

    def loose_word(self) -> str:
        """Any word: strict ones plus expansions that split, glob or rewrite."""
        return self.pick(
            [
                (6, PLAIN, self.strict_word),
                (1, PLAIN, lambda: self.r.choice(["*", "~", "{a,b}", "$U", "$#", "$?", "x*"])),
                (1, PLAIN, lambda: self.r.choice(TRICKY_STRINGS)),
                (1, SUBTLE, self.loose_var_use),
                (1, RISKY, self.evaluated_var_use),
                (0.5, PLAIN, lambda: f'"$({self.stmt()})"'),
                (0.3, PLAIN, lambda: f"$({self.stmt()})"),
                (0.3, RISKY, lambda: f"`{self.simple()}`"),
                (0.3, PLAIN, lambda: f"<({self.simple()})"),
            ]
        )

    def loose_var_use(self) -> str:
        """A variable expansion that splits or rewrites the value (so: no probe)."""
        name = self.r.choice(self.exact + self.env_names + SCRATCH_VARS)
        return self.r.choice([f"${name}", f"${{{name}}}", f"${{{name}@Q}}", f'"${{{name}:0:2}}"'])

    def evaluated_var_use(self) -> str:
        """A variable expansion where bash evaluates the variable's value."""
        name = self.r.choice(self.exact + self.env_names + SCRATCH_VARS)
        return self.r.choice(
            [
                f"${{{name}@P}}",
                f"${{{name}@E}}",
                f"${{!{name}}}",
                f"$(( {name} ))",
                f"$(( {name} + 0 ))",
                f"$[ {name} ]",
                f"${{a[${name}]}}",
                f"${{a[{name}]}}",
                f"${{U:${name}}}",
            ]
        )

    # -- statements --

    def stmt(self) -> str:
        """One statement (a command, a compound command, or a Jinja block)."""
        self.depth += 1
        try:
            if self.depth > 3:
                return self.simple()
            return self.pick(
                [
                    (12, PLAIN, self.simple),
                    (3, PLAIN, self.assignment),
                    (2, PLAIN, self.exact_use),
                    (2, PLAIN, self.redirection),
                    (1, PLAIN, self.pipeline),
                    (1, PLAIN, self.and_or),
                    (1, PLAIN, self.subshell),
                    (1, PLAIN, self.group),
                    (1, SUBTLE, self.function),
                    (1, PLAIN, self.if_stmt),
                    (1, PLAIN, self.loop),
                    (0.7, PLAIN, self.case_stmt),
                    (0.6, SUBTLE, self.test_cmd),
                    (0.5, SUBTLE, self.heredoc_safe),
                    (0.6, SUBTLE, self.shell_c_safe),
                    (0.6, PLAIN, self.jinja_if),
                    (0.6, PLAIN, self.jinja_for),
                    (0.3, PLAIN, self.jinja_set),
                    (0.3, PLAIN, self.comment_line),
                    (0.4, SUBTLE, self.alias_safe),
                    (1.5, RISKY, self.gadget_then_stmt),
                    (1, RISKY, self.evaluating),
                    (1, RISKY, self.name_taking),
                    (1, RISKY, self.declaration),
                    (1, RISKY, self.arithmetic),
                    (0.7, RISKY, self.double_bracket),
                    (0.7, RISKY, self.test_attack),
                    (0.8, RISKY, self.heredoc_risky),
                    (0.6, RISKY, self.alias_risky),
                    (0.7, RISKY, self.special_assignment),
                    (1, RISKY, self.tainted_use),
                    (0.5, RISKY, self.shell_c_risky),
                    (0.5, RISKY, self.command_name),
                    (1, RISKY, self.jinja_risky),
                    (0.5, RISKY, self.case_risky),
                    (0.4, RISKY, self.comment_risky),
                    # issue 25: where a value flows, and lines that rebind names
                    (1, RISKY, self.flow_into_reader),
                    (1, RISKY, self.read_then_use),
                    (0.6, RISKY, self.rebinding_line),
                    (0.6, RISKY, self.quoted_name),
                    (0.5, RISKY, self.escaped_blank),
                    (0.5, RISKY, self.quote_in_a_leaf),
                    (0.6, RISKY, self.option_word),
                    (0.5, RISKY, self.split_substitution),
                    (0.6, SUBTLE, self.flow_safe),
                ]
            )
        finally:
            self.depth -= 1

    # -- data flow (issue 25): a value reaches a reader that runs it ----------------

    def reader(self) -> str:
        """A command that reads its stdin, maybe as code."""
        return self.tiered(
            ["cat", "argv", "cat >/dev/null"],
            ["{ cat; }", 'while read -r l; do echo "$l"; done'],
            [
                "bash",
                "sh",
                "source /dev/stdin",
                "bash -s",
                'while read -r l; do sh -c "$l"; done',
                '{ read -r l; eval "$l"; }',
                "sh /dev/stdin",
            ],
        )

    def flow_into_reader(self) -> str:
        """A value fed to a reader: a here-string, a redirect from a process
        substitution, a pipe (through harmless stages first), a file."""
        reader, ph = self.reader(), self.ph()
        return self.r.choice(
            [
                f"{reader} <<< {ph}",
                f"{reader} < <(echo {ph})",
                f"echo {ph} | {reader}",
                f"echo {ph} | cat | {reader}",
                f'echo "$(echo {ph})" | {reader}',
                f"{{ echo {ph}; }} | {reader}",
                f"echo {ph} > flow.txt; {reader} < flow.txt",
                f"echo {ph} > flow.sh; sh flow.sh",
                f"echo {ph} > ./flow.sh; bash ./flow.sh",
            ]
        )

    def read_then_use(self) -> str:
        """read/mapfile move a value into a variable, which is then used."""
        name = self.r.choice(["N", "M", "REPLY", "l"])
        quoted_name = self.r.choice([name, f'"{name}"', f"'{name}'", name[0] + "''" + name[1:]])
        source = self.r.choice([f"<<< {self.ph()}", f"< <(echo {self.ph()})"])
        read = self.r.choice(
            [
                f"read -r {quoted_name} {source}",
                f"IFS= read -r {quoted_name} {source}",
                f"read {source}" if name == "REPLY" else f"read -r {name} {source}",
                f"mapfile -t {name} {source}",
                f"read -ra {name} {source}",
            ]
        )
        use = self.tiered(
            [f'echo "${name}"', f'echo "${{{name}}}"'],
            [f'case "${name}" in a) ;; esac'],
            [
                f"(( {name} ))",
                f"echo $(( {name} + 1 ))",
                f"echo $(( ${name} ))",
                f"a[{name}]=1",
                f"[[ ${name} -eq 1 ]]",
                f's=abc; echo "${{s:{name}}}"',
                f"m={name}; (( m ))",
                f'sh -c "${name}"',
                f"${name}",
                f"argv ${name}",
                f'[ -v "${name}" ]',
            ],
        )
        return f"{read}; {use}"

    def rebinding_line(self) -> str:
        """A line with no value that changes what a later line means."""
        line = self.r.choice(
            [
                "hash -p /bin/sh argv",
                "BASH_CMDS[argv]=/bin/sh",
                "BASH_ALIASES[argv]=eval",
                "enable -n echo; hash -p /bin/sh echo",
                "builtin alias argv=eval\nshopt -s expand_aliases",
                "eval 'argv() { sh -c \"$1\"; }'",
                'command_not_found_handle() { sh -c "$2"; }',
                "trap 'eval \"$BASH_COMMAND\"' DEBUG",
                "set -o posix",
                "PATH=/nowhere",
            ]
        )
        use = self.r.choice([f"argv -c {self.ph()}", f"echo -c {self.ph()}", f"nosuch {self.ph()}"])
        return f"{line}\n{use}"

    def escaped_blank(self) -> str:
        """A backslash before a blank between tokens (review 37): tree-sitter
        skips it as a blank, bash joins a continued line and keeps an escaped
        space or tab in the word, so the next word may be a command."""
        blank = self.r.choice(["\n", " ", "\t"])
        assignment = self.r.choice(["x=1", 'x="a"', "x=''", "x=$HOME", "LC_ALL=C", "x=(a)"])
        runner = self.r.choice(["eval", "sh -c", "bash -c", "echo"])
        return self.r.choice(
            [
                f"{assignment}\\{blank}{runner} {self.ph()}",
                f"echo a\\{blank}{self.ph()}",
                f"cd x\\{blank}{self.ph()}",
                f"echo $\\\n{self.ph()}",
                f'm={self.ph()}\necho "$\\\n(eval $m)"',
                f't={self.ph()}\necho "$\\\n{{t@P}}"',
                f'v={self.ph()}\necho "$\\\n{{!v}}"',
                f"echo {self.ph()} \\\n  {self.ph()}",
            ]
        )

    def quote_in_a_leaf(self) -> str:
        """A quote or an escape tree-sitter keeps as text (a ``${ }`` operand,
        an ``=~`` pattern) or a ``#`` it reads as a comment in arithmetic
        (review 39): bash reads it as quoting, and the value's word moves."""
        operator = self.r.choice(["%", "%%", "#", "/", "//", ":-", "-", ":+", "^", ","])
        quote = self.r.choice(["'", '"', "\\", '$"'])
        return self.r.choice(
            [
                f'echo "${{x{operator}a{quote}}}" }} {self.ph()} # {quote[-1]}',
                f"echo ${{x{operator}{quote}a}} }} {self.ph()} # {quote[-1]}",
                f"[[ a =~ {quote}$ ]] && echo {self.ph()} #{quote[-1]} ]]",
                f"(( 1 #{quote[-1]}\n)); echo {self.ph()} #{quote[-1]}\n# ))",
                f"a[1 #{quote[-1]}\n]=2; echo {self.ph()} #{quote[-1]}\n# ]",
                # review 41: bash reads an array element's [ to its ], across ;
                f"a=( [ ) ; echo {self.ph()} ; a=( ]=1 )",
                f"a+=( x [{quote[-1]} )\necho {self.ph()}\na=( ]=1 )",
                # review 42: shell operators in [ ], a lone $ before a blank
                f"[ a << true ]\necho {self.ph()}\ntrue",
                f"printf '%s\\n' {self.ph()} > ']'\n[ a | sh ]",
                f"x=$\neval echo {self.ph()}",
                f"x=$ #; echo {self.ph()}",
                # review 44: an extglob pattern runs to its matching )
                f"[[ x == +(#{quote[-1]} ]]; echo {self.ph()}; #{quote[-1]}) ]]",
                f"[[ x == @(a ]]  # {quote[-1]}\necho {self.ph()}  # {quote[-1]}) ]]",
                # review 48: == or =~ outside [[ ]] (a "pattern" over ; | and
                # lines to tree-sitter), a heredoc delimiter glued to more text
                f"echo {self.r.choice(['[[ a ', ''])}{self.r.choice(['==', '=~'])} x"
                f"{self.r.choice(['|eval :', ';eval :', chr(10) + 'eval :'])} ]] {self.ph()}",
                f"echo == x;cat<<true;: ]\necho {self.ph()}\ntrue",
                f": <<{quote[-1]}E{quote[-1]}{self.r.choice(['x', '1', '_', '$x'])}\nE\n"
                f'echo "\nEx\necho " {self.ph()} "\n#"',
                # review 50: a line in [ ], a glued [[, <( where tree-sitter
                # sees none, words after a lone heredoc
                f"[ a = b -o\neval = {self.ph()} ]",
                f'[[-n "$CI" || tee <<true ]]\necho {self.ph()}\ntrue',
                f"echo {self.ph()} | [[ -n x<(sh) ]]",
                f'x=1; echo {self.ph()} | echo "${{x%<(sh)}}"',
                f"printf '%s\\n' {self.ph()} > f\n2>/dev/null <<E sh f\nE",
            ]
        )

    def quoted_name(self) -> str:
        """A name spelled with quotes, or built at run time."""
        ph = self.ph()
        return self.r.choice(
            [
                f'declare -i "N"; N={ph}',
                f"declare -n R=X; X={ph}; (( R ))",
                f"n=X; X={ph}; (( n ))",
                f"PRE_a={ph}; for n in ${{!PRE*}}; do (( $n )); done",
                f'X={ph}; echo "${{!X}}"',
                f'X={ph}; echo "${{X@P}}"',
                f"read -r C''NT <<< {ph}; (( CNT ))",
            ]
        )

    def option_word(self) -> str:
        """An option word bash sees only after quote removal or substitution."""
        ph = self.ph()
        return self.r.choice(
            [
                f'printf "-v" {ph} %s x',
                f"printf \\-v {ph} %s x",
                f'test "-v" {ph}',
                f"test $(echo -v) {ph}",
                f'o=-v; [ "$o" {ph} ]',
                f"printf {ph} x",
            ]
        )

    def split_substitution(self) -> str:
        """An unquoted $( ) that carries a value: split into words again."""
        ph = self.ph()
        return self.r.choice([f"[ $(echo {ph}) ]", f"argv $(echo {ph})", f"test $(cat <<< {ph})"])

    def flow_safe(self) -> str:
        """Flows that stay data: the checker should accept them."""
        ph = self.ph()
        return self.r.choice(
            [
                # read splits a value into lines: echo, not the probe, gets them
                f'read -r N <<< {ph}; echo "$N"',
                f'IFS= read -r l <<< {ph}; echo "$l"',
                f'mapfile -t A <<< {ph}; echo "${{A[@]}}"',
                f'echo {ph} | while IFS= read -r l; do echo "$l"; done',
                f"cat <<< {ph} | cat",
                f'echo "$(echo {ph})"',
                f'for i in {ph}; do argv "$i"; done',
            ]
        )

    def simple(self) -> str:
        """A simple command: the probe with strict words, or a loose command."""
        if self.chance(0.55):
            words = [self.strict_word() for _ in range(self.r.randint(1, 3))]
            return "argv " + " ".join(words)
        command = self.r.choice(["echo", "printf '%s\\n'", "cat", ":", "true", "echo -n"])
        words = [self.loose_word() for _ in range(self.r.randint(0, 3))]
        if command == "cat" and not words:
            return "cat /dev/null"
        return " ".join([command, *words])

    def assignment(self) -> str:
        """``N={{ x.v0 }}`` (and friends) that keep the value verbatim."""
        name = self.r.choice(EXACT_VARS)
        if self.chance(self.subtle):
            value = self.r.choice([self.ph, self.glued_ph, self.exact_ref])()
        else:
            value = self.ph()
        form = self.tiered(
            [f"{name}={value}", f"{name}={value} argv a"],
            [
                f"{name}+={value}",
                f"{name}={value}; export {name}",
                f"export {name}={value}",
                f"readonly {name}={value}",
                f"a=({value} {self.ph()})",
                f"a[0]={value}",
                f"a+=({value})",
                f"printf -v {name} %s {value}",
                f"declare -n ref={name}; {name}={value}",
            ],
        )
        if form.startswith(f"{name}={value} argv"):
            return form
        if not form.startswith(("a=", "a[", "a+")):
            self.exact.append(name)
        return form

    def exact_use(self) -> str:
        """Uses of a variable that holds a value, in positions safe for any value."""
        names = self.exact + self.env_names
        if not names:
            return self.assignment()
        name = self.r.choice(names)
        quoted = f'"${name}"'
        return self.tiered(
            [
                f"argv {quoted}",
                f"argv {quoted} {self.strict_word()}",
                f"echo {quoted}",
                f"[ {quoted} = a ] || argv {quoted}",
                f"case {quoted} in a) ;; *) argv {quoted} ;; esac",
                f"printf '%s\\n' {quoted}",
                f"cat <<< {quoted}",
            ],
            [
                f"test -n {quoted} && argv x{quoted}",
                f'argv "${{{name}:+${name}}}"',
                f"bash -c 'argv \"$1\"' _ {quoted}",
                f"export {name}; bash -c 'argv \"${name}\"'",
                f"trap 'argv \"${name}\"' EXIT",
                f"eval 'argv \"${name}\"'",
                f'set -- {quoted}; argv "$@"',
            ],
        )

    def redirection(self) -> str:
        target = self.strict_word()
        command = self.r.choice(["echo hi", "argv a", ":", "cat /dev/null", "printf x"])
        # ">&WORD" is not here: bash expands its word a second time (a value
        # runs as code); it is in reevaluated_ph instead.
        op = self.r.choice([">", ">>", "<", "2>", "&>", "<<<", ">|", "1>>", "<>"])
        if op == "<<<":
            return f"{self.r.choice(['cat', 'argv a'])} <<< {self.strict_word()}"
        if op == "<":
            return f"cat < {target}"
        return f"{command} {op} {target}"

    def pipeline(self) -> str:
        parts = [self.simple() for _ in range(self.r.randint(2, 3))]
        bang = "! " if self.chance(0.1) else ""
        return bang + " | ".join(parts)

    def and_or(self) -> str:
        return f"{self.simple()} {self.r.choice(['&&', '||'])} {self.simple()}"

    def body(self, n: int | None = None) -> str:
        """Statements separated by ; & or newlines, for a compound command."""
        stmts = [self.stmt() for _ in range(n or self.r.randint(1, 2))]
        return join_stmts(stmts, self.r, closing=True)

    def subshell(self) -> str:
        return f"( {self.body()} )"

    def group(self) -> str:
        return "{ " + self.body() + " }"

    def function(self) -> str:
        """``f() { ...; }`` and a call with probe-safe arguments."""
        name = self.r.choice(["f", "g", "h"])
        self.function_depth += 1
        try:
            inner = self.pick(
                [
                    (3, PLAIN, lambda: 'argv "$@"'),
                    (2, PLAIN, lambda: 'argv "$1"'),
                    (1, PLAIN, lambda: 'local L="$1"; argv "$L"'),
                    (1, PLAIN, lambda: f'local L={self.ph()}; argv "$L"'),
                    (3, PLAIN, self.stmt),
                    (1, RISKY, lambda: f"local {self.ph()}"),
                    (1, RISKY, lambda: f"local -n L={self.ph()}; echo $L"),
                    (0.5, RISKY, lambda: f"eval {self.ph()}"),
                ]
            )
        finally:
            self.function_depth -= 1
        if self.chance(0.2):
            definition = f"{name}() ( {inner} )"
        else:
            end = inner if ends_line(inner) else inner + ";"
            keyword = self.r.choice([f"{name}()", f"function {name}", f"function {name}()"])
            definition = f"{keyword} {{ {end} }}"
        self.functions.append(name)
        calls = [
            f"{name} " + " ".join(self.strict_word() for _ in range(self.r.randint(0, 2)))
            for _ in range(self.r.randint(0, 2))
        ]
        return join_stmts([definition, *calls], self.r)

    def condition(self) -> str:
        return self.r.choice(
            [
                "true",
                "false",
                "[ -n a ]",
                f"[ {self.strict_word()} = a ]",
                f"[ -n {self.strict_word()} ]",
                "test -z ''",
                f"argv {self.strict_word()}",
                ":",
                "! false",
            ]
        )

    def if_stmt(self) -> str:
        text = f"if {self.condition()}; then {self.body()} "
        if self.chance(0.3):
            text += f"elif {self.condition()}; then {self.body()} "
        if self.chance(0.4):
            text += f"else {self.body()} "
        return text + "fi"

    def loop(self) -> str:
        head = self.tiered(
            [
                "for i in 1 2",
                "for i in 1 2",
                "while false",
                "until true",
                f"for (( c{self.depth}=0; c{self.depth}<2; c{self.depth}++ ))",
                "while read -r L",
            ],
            [
                "for i in " + " ".join(self.strict_word() for _ in range(self.r.randint(1, 3))),
                "for i",
            ],
        )
        body = self.body()
        if head.startswith("for i") and self.chance(0.5):
            body = f'argv "$i"; {body}'
        tail = f" <<< {self.strict_word()}" if head.startswith("while read") else ""
        if head == "for i" and not self.function_depth:
            head = "for i in a"
        if head.startswith("for ((") or head.startswith("while read"):
            head = head if self.shell == "bash" or self.chance(0.5) else "for i in 1"
        return f"{head}; do {body} done{tail}"

    def case_stmt(self) -> str:
        word = self.strict_word()
        pattern = self.r.choice(["a", "*", "a|b", "'*'", '"$U"', "[ab]", "?"])
        return f"case {word} in {pattern}) {self.stmt()} ;; *) {self.simple()};; esac"

    def test_cmd(self) -> str:
        """``[ ]`` and ``test`` with operands that are always operands."""
        a, b = self.strict_word(), self.strict_word()
        return self.r.choice(
            [
                f"[ {a} = {b} ]",
                f"[ x{a} != x{b} ]",
                f"test {a} = b",
                f"[ -n {a} ]",
                f"[ -z {a} ] || true",
                f"[ -e {a} ]",
                f"test -f {a}",
            ]
        )

    def heredoc_safe(self) -> str:
        """A heredoc with a quoted delimiter (literal body), or a herestring."""
        quote = self.r.choice(["'EOF'", '"EOF"', "\\EOF"])
        dash = self.r.choice(["<<", "<<-"])
        rest = self.r.choice(["", " | cat", f"; argv {self.strict_word()}"])
        return f"cat {dash}{quote}{rest}\nbody\nEOF\n"

    def shell_c_safe(self) -> str:
        """``bash -c 'script' _ {{ x }}``: the value is an argument of the child."""
        shell = self.r.choice(["bash", "sh"])
        script = self.r.choice(["'argv \"$1\"'", "'argv \"$@\"'", "'printf %s \"$1\"'"])
        args = " ".join(self.strict_word() for _ in range(self.r.randint(1, 2)))
        return f"{shell} -c {script} _ {args}"

    def jinja_if(self) -> str:
        cond = self.r.choice([self.field_expr(), "x.items", "x.items|length > 2", "true"])
        text = "{% if " + cond + " %}" + self.stmt() + "\n"
        if self.chance(0.4):
            text += "{% else %}" + self.stmt() + "\n"
        return text + "{% endif %}"

    def jinja_for(self) -> str:
        outer, self.loop_var = self.loop_var, "i"
        try:
            if self.chance(0.4):
                words = "".join(
                    " " + self.r.choice(["{{ i }}", "{{ i }}", "pre{{ i }}"])
                    for _ in range(self.r.randint(1, 2))
                )
                return "argv{% for i in x.items %}" + words + "{% endfor %}"
            return "{% for i in x.items %}" + self.stmt() + "\n{% endfor %}"
        finally:
            self.loop_var = outer

    def jinja_set(self) -> str:
        """``{% set y = x.v0 %}`` and a statement using ``{{ y }}`` (only there:
        a set inside a loop or a false branch does not reach later text)."""
        name = self.r.choice(["y", "z"])
        text = "{% set " + name + " = " + self.field_expr() + " %}"
        self.jinja_names.append(name)
        try:
            return text + self.stmt()
        finally:
            self.jinja_names.remove(name)

    def comment_line(self) -> str:
        words = " ".join(self.r.choice(["a", "'", '"', "`", "$(", ")", "}"]) for _ in range(3))
        return f"{self.simple()} # {words}\n"

    def alias_safe(self) -> str:
        """An alias for the probe: ``p {{ x }}`` is ``argv {{ x }}``."""
        return f"shopt -s expand_aliases\nalias p=argv\np {self.strict_word()}\n"

    # -- risky statements (a correct checker refuses each placeholder here) --

    def gadget_then_stmt(self) -> str:
        """A scanner trap, then a statement that is only safe if read right."""
        gadget = self.r.choice(GADGETS + JINJA_GADGETS * 2)
        after = self.pick(
            [
                (1, PLAIN, self.simple),
                (1, PLAIN, lambda: f"echo {self.quoted_ph()}"),
                (1, PLAIN, lambda: f"argv {self.quoted_ph()}"),
                (0.5, PLAIN, lambda: f"echo {self.reevaluated_ph()}"),
                (0.5, PLAIN, lambda: self.r.choice(["'", '"', "`"]) + f"\nargv {self.ph()}\n"),
            ]
        )
        sep = "" if gadget.endswith("\n") else self.r.choice(["\n", "; ", " && ", " "])
        return gadget + sep + after

    def evaluating(self) -> str:
        """Commands that run an argument as code."""
        ph = self.ph()
        return self.r.choice(
            [
                f"eval {ph}",
                f"eval argv {ph}",
                f">/dev/null eval {ph}",
                f"command eval {ph}",
                f"builtin eval {ph}",
                f"\\eval {ph}",
                f"ev''al {ph}",
                f"e$()val {ph}",
                f"trap {ph} EXIT",
                f"trap -- {ph} EXIT",
                f"source {ph}",
                f". {ph}",
                f"exec {ph}",
                f"exec -a {ph} argv",
                f"cat <({ph})",
                f"echo >({ph})",
                f"bash -c {ph}",
                f"sh -c {ph}",
                f"bash -c 'argv {ph}'",
                f'bash -c "argv {ph}"',
                f"env {ph}",
                f"env argv {ph}",
                f"env N={ph} argv a",
                f"env -- {ph} a",
                f"command {ph}",
                f"builtin {ph}",
                f"enable {ph}",
                f"time {ph}",
                f"! {ph}",
                f"coproc {ph}",
                f"mapfile -t -c 1 -C {ph} arr <<< a",
                f"N={ph} eval 'echo $(( N ))'",
                f"N={ph} eval 'argv \"$N\"'",
            ]
        )

    def name_taking(self) -> str:
        """Builtins whose argument is a variable name (its subscript is evaluated)."""
        ph = self.ph()
        return self.r.choice(
            [
                f"read {ph} <<< a",
                f"read -r {ph} < /dev/null",
                f"read -a {ph} <<< a",
                f"mapfile {ph} < /dev/null",
                f"readarray -t {ph} <<< a",
                f"printf -v {ph} %s a",
                f"printf {ph} {self.ph()}",
                f"unset {ph}",
                f"unset -v {ph}",
                f"getopts ab {ph}",
                f"true & wait -n -p {ph}",
                f"test -v {ph}",
                f"[ -v {ph} ]",
                f"[ -R {ph} ]",
                f"export {ph}",
                f"readonly {ph}",
                f"shift {ph}",
                f"set -- a; shift {ph}",
                f"return {ph}" if self.function_depth else f"exit {ph}",
                f"ulimit -t {ph}",
                f"printf %d {ph}",
                f"kill -l {ph}",
                f"echo {{1..{ph}}}",
            ]
        )

    def declaration(self) -> str:
        """declare/typeset/local/export/readonly/let, with and without flags."""
        ph = self.ph()
        if self.function_depth and self.chance(0.4):
            return self.r.choice([f"local {ph}", f"local -n L={ph}; echo $L", f"local -i L={ph}"])
        return self.r.choice(
            [
                f"declare {ph}",
                f"declare -i n={ph}",
                f"declare -g -i n; n={ph}",
                f"declare -i n\nn={ph}",
                f"declare -n ref={ph}; echo $ref",
                f"declare -n ref; ref={ph}",
                f"declare -a q={ph}",
                f"declare -A q; q[{ph}]=1",
                f"typeset {ph}",
                f"typeset -i n={ph}",
                f"export -n {ph}",
                f"export N={ph} {self.ph()}",
                f"readonly -a q={ph}",
                f"declare {self.ph()} n={ph}",
                f"declare {self.ph()} {ph}",
                f"let {ph}",
                f'let "n={ph}"',
                f"let n={ph}",
                f"a=({ph}); declare -i a",
                f'declare -i N; N={ph}; argv "$N"',
                f"declare -l N={ph}",
            ]
        )

    def arithmetic(self) -> str:
        ph = self.ph()
        return self.r.choice(
            [
                f"echo $(( {ph} ))",
                f"(( {ph} ))",
                f"(( n = {ph} ))",
                f"echo $[ {ph} ]",
                f"for (( i={ph}; i<1; i++ )); do :; done",
                f"for (( i=0; i<{ph}; i++ )); do :; done",
                f"echo ${{a[{ph}]}}",
                f"a[{ph}]=1",
                f"echo ${{U:{ph}}}",
                f"echo ${{U:0:{ph}}}",
                f"a=([{ph}]=1)",
                f"echo $(( 1 + {ph} ))",
                f"[ $(( {ph} )) ]",
            ]
        )

    def double_bracket(self) -> str:
        ph = self.ph()
        return self.r.choice(
            [
                f"[[ {ph} == a ]]",
                f"[[ -n {ph} ]]",
                f"[[ {ph} -eq 1 ]]",
                f"[[ -v {ph} ]]",
                f"[[ a == {ph} ]]",
                f"[[ {ph} =~ a ]]",
                f'[[ a == "]]" ]] && echo "a {ph}"',
                f"[[ a == ']]' ]] && echo 'a {ph}'",
                f"[[ a < {ph} ]]",
            ]
        )

    def test_attack(self) -> str:
        """``[ {{ a }} {{ b }} ]`` and friends: with ``-v`` the next value is a name."""
        a, b = self.ph(), self.ph()
        return self.r.choice(
            [
                f"[ {a} {b} ]",
                f"test {a} {b}",
                f"[ {a} {b} ] || true",
                f"printf {a} {b}",
                f"printf {a} {b} %s a",
                f"declare {a} {b}",
                f"local {a} {b}" if self.function_depth else f"export {a} {b}",
                f"read {a} {b} <<< a",
                f"mapfile {a} {b} arr <<< a",
                f"wait {a} {b}",
                f"bash {a} {b}",
                f"unset {a} {b}",
                f"{a} {b}",
            ]
        )

    def heredoc_risky(self) -> str:
        """Placeholders in a heredoc body or delimiter."""
        ph = self.ph()
        return self.r.choice(
            [
                f"cat <<EOF\n{ph}\nEOF\n",
                f"cat <<EOF\na {ph} b\nEOF\n",
                f"cat <<-EOF\n\t{ph}\n\tEOF\n",
                f"cat <<{ph}\nx\nEOF\n",
                f"cat <<EOF; argv {ph}\nbody\nEOF\n",
                f"cat <<EOF\n$(argv {ph})\nEOF\n",
                f"cat <<E{ph}\nEOF\n",
                f"cat <<EOF\nEOF\n{ph}\nEOF\n",
                f"cat <<'EOF'\n{ph}\nEOF\n",
                f'cat <<"EOF"\n{ph}\nEOF\n',
                f"cat <<EOF <<'E2'\nx\nEOF\n{ph}\nE2\n",
                f"cat <<EO\\\nF\n{ph}\nEOF\n",
            ]
        )

    def alias_risky(self) -> str:
        ph = self.ph()
        return self.r.choice(
            [
                f"alias e=eval\nshopt -s expand_aliases\ne {ph}\n",
                f"shopt -s expand_aliases\nalias e=eval\ne {ph}\n",
                f"shopt -s expand_aliases\nalias e={ph}\ne\n",
                f"shopt -s expand_aliases\nalias {ph}\n",
                f"shopt -s expand_aliases\nalias q='echo '\nalias e=eval\nq e {ph}\n",
                f"shopt -s expand_aliases; alias e=eval; e {ph}",
            ]
        )

    def special_assignment(self) -> str:
        """Assignments to variables bash evaluates (PS4, BASH_ENV, OPTIND ...)."""
        name = self.r.choice(SPECIAL_VARS)
        ph = self.ph()
        return self.r.choice(
            [
                f"{name}={ph}; set -x; true; set +x",
                f"{name}={ph}",
                f"{name}={ph} bash -c true",
                f"{name}={ph}; export {name}; bash -c :",
                f"export {name}={ph}; sh -c :",
                f"PS4={ph}; set -x; argv a",
                f"IFS={ph}; echo $U a",
                f"BASH_ENV={ph} bash -c :",
            ]
        )

    def tainted_use(self) -> str:
        """A variable that holds a value, used where bash evaluates it."""
        names = self.exact + self.env_names
        if not names:
            name = self.r.choice(EXACT_VARS)
            self.exact.append(name)
            prefix = f"{name}={self.ph()}\n"
        else:
            name, prefix = self.r.choice(names), ""
        use = self.r.choice(
            [
                f"echo ${{!{name}}}",
                f"echo $(( {name} ))",
                f"echo $(( {name} + 0 ))",
                f"(( {name} ))",
                f"[[ ${name} -eq 1 ]]",
                f"[[ {name} -eq 1 ]]",
                f"[[ -v ${name} ]]",
                f'test -v "${name}"',
                f'[ -v "${name}" ]',
                f"echo ${{{name}@P}}",
                f"declare -n r2={name}; echo ${{!r2}}",
                f'declare -n r2="${name}"; echo $r2',
                f'printf -v "${name}" %s a',
                f'read "${name}" <<< a',
                f'unset "${name}"',
                f'eval "${name}"',
                f'eval "argv ${name}"',
                f'bash -c "${name}"',
                f'sh -c "${name}"',
                f"let {name}",
                f"echo $[ {name} ]",
                f"echo ${{a[${name}]}}",
                f"echo ${{a[{name}]}}",
                f"declare -i {name}; {name}+=0",
                f"echo ${{U:${name}}}",
                f'trap "${name}" EXIT',
                f'shopt -s expand_aliases; alias e="${name}"\ne\n',
                f"for (( i=${name}; i<1; i++ )); do :; done",
                f'printf -v r "%s" "${name}"; eval "$r"',
                f"export {name}; bash -c 'echo $(( {name} ))'",
                f'PS4="${name}"; set -x; :',
                f'BASH_ENV="${name}" bash -c :',
                f'source "${name}"',
                f'[ "${name}" -eq 1 ]',
            ]
        )
        return prefix + use

    def shell_c_risky(self) -> str:
        ph = self.ph()
        return self.r.choice(
            [
                f"bash -c {ph}",
                f"sh -c {ph}",
                f"bash -c 'eval \"$1\"' _ {ph}",
                f'bash -c "echo {ph}"',
                f"bash -c 'echo {ph}'",
                f"sh -c 'argv {ph}'",
            ]
        )

    def command_name(self) -> str:
        """A placeholder as (part of) the command word."""
        ph = self.ph()
        return self.r.choice(
            [
                f"{ph}",
                f"{ph} a",
                f"{ph}=x",
                f"{ph}=x argv a",
                f"a{ph} b",
                f"{ph}() {{ :; }}",
                f"function {ph} {{ :; }}",
                f"N=1 {ph}",
                f"if {ph}; then :; fi",
                f"{{ {ph}; }}",
                f"( {ph} )",
                f"argv a | {ph}",
                f"argv a && {ph}",
            ]
        )

    def case_risky(self) -> str:
        ph = self.ph()
        return self.r.choice(
            [
                f"case a in {ph}) argv {self.ph()};; esac",
                f"case {ph} in a) ;; esac; argv '{self.ph()}'",
                f"case a in (a) argv {ph};; esac",
                f"case ')' in a) ;; esac; argv '{ph}'",
                f"case a in a) echo ';;' ;; esac; echo '{ph}'",
            ]
        )

    def comment_risky(self) -> str:
        """Comments where a scanner may see quotes, and quotes it may see as comments."""
        ph = self.ph()
        return self.r.choice(
            [
                f"(# '\nargv '{ph}')",
                f"(:)# '\nargv '{ph}'",
                f"{{ :; }}# '\nargv '{ph}'",
                f"echo a \\\n# '\nargv '{ph}'",
                f"argv {ph} #'\n",
                f"echo a#'\nargv {ph}'",
                f"echo $#'\nargv {ph}'",
                f"echo \\#'\nargv {ph}'",
                f": # {ph}\n",
                f"# {ph}\n",
                f"{self.simple()} # {ph} {self.r.choice(['a', '`', '$(', ')'])}\n",
                f"echo x;# '\nargv '{ph}'",
                f"echo x&# '\nargv '{ph}'",
                f"echo x|# '\ncat; argv '{ph}'",
            ]
        )

    def jinja_risky(self) -> str:
        """Jinja blocks that can change what a value looks like after quoting."""
        ph = self.ph()
        kind = self.r.randrange(9)
        if kind == 0:
            return "{% autoescape true %}" + f"argv {ph}" + "{% endautoescape %}"
        if kind == 1:
            flt = self.r.choice(["upper", "lower", "trim", 'replace("\'", "")', "e", "indent(2)"])
            return "{% filter " + flt + " %}" + f"argv {ph}" + "{% endfilter %}"
        if kind == 2:
            return (
                "{% macro m(v) %}argv {{ v }}{% endmacro %}" + "{{ m(" + self.field_expr() + ") }}"
            )
        if kind == 3:
            return "{% macro q(v) %}'{{ v }}'{% endmacro %}echo {{ q(" + self.field_expr() + ") }}"
        if kind == 4:
            return "{% set y %}" + ph + "{% endset %}argv {{ y }}"
        if kind == 5:
            return self.loop_toggle()
        if kind == 6:
            return "{% raw %}'{% endraw %}" + ph + "{% raw %}'{% endraw %}"
        if kind == 7:
            if self.chance(0.3):
                return (
                    "{% macro m() %}argv {{ caller() }}{% endmacro %}"
                    "{% call m() %}" + ph + "{% endcall %}"
                )
            return 'echo {{ "\'" }}' + ph
        return "{% for i in x.items %}echo '{% endfor %}" + ph

    def loop_toggle(self) -> str:
        """A quote (or other state change) printed only on some loop iteration:
        counting 0, 1 and 2 iterations is not enough."""
        toggle = self.r.choice(QUOTE_TOGGLES)
        cond = self.r.choice(
            [
                f"loop.index == {self.r.randint(1, 4)}",
                "loop.last",
                "loop.first",
                "not loop.last",
                f"loop.length > {self.r.randint(1, 3)}",
                "loop.index is odd",
            ]
        )
        gadget = "{% for i in x.items %}{% if " + cond + " %}" + toggle + "{% endif %}{% endfor %}"
        return f"argv {gadget}{self.ph()}{gadget}"


# --- assembling a case --------------------------------------------------------


def join_stmts(stmts: list[str], rng: random.Random, closing: bool = False) -> str:
    """Join statements with a random separator; a statement that ends its
    line (a comment, a heredoc) is followed by the next line directly.  With
    ``closing``, the result can be followed by ``}``, ``)`` or a keyword."""
    text = ""
    for index, stmt in enumerate(stmts):
        text += stmt
        last = index == len(stmts) - 1
        if ends_line(stmt):
            continue
        if last and not closing:
            break
        text += rng.choice(["; ", "\n", "; ", " & "] if not last else [";", "\n", " &"])
    return text


def ends_line(text: str) -> bool:
    """True if the printed text ends with a newline (trailing Jinja tags aside)."""
    return re.sub(r"(\{%.*?%\})+$", "", text).endswith("\n")


def generate_env(gen: Gen) -> dict[str, str]:
    """A step ``env:`` mapping whose values are templates of field values."""
    env = {}
    for _ in range(gen.r.randint(1, 2)):
        control = gen.r.random() < 0.5 * max(gen.risk, 0.1)
        name = gen.r.choice(CONTROL_ENV_NAMES if control else PLAIN_ENV_NAMES)
        field_name = gen.r.choice(gen.fields)
        placeholder = "{{ x." + field_name + " }}"
        env[name] = gen.r.choice([placeholder, "pre-" + placeholder, placeholder + ":x"])
        if name.isidentifier():
            gen.env_names.append(name)
    return env


def env_uses(gen: Gen, env: dict[str, str]) -> list[str]:
    """Statements that make the control variables of ``env`` matter."""
    uses = []
    for name in env:
        if name == "BASH_FUNC_x%%":
            uses.append("x")
        elif name == "PS4":
            uses.append("set -x; true")
        elif name in ("SHELLOPTS", "BASHOPTS", "BASH_ENV", "ENV", "LD_PRELOAD"):
            uses.append(gen.r.choice(["bash -c :", "sh -c :", "true"]))
        elif name == "CDPATH":
            uses.append("cd sub")
    return uses


def generate(seed: int) -> Case:
    """The case for ``seed``: a template, values, maybe an env mapping, a shell."""
    rng = random.Random(seed)
    shell = "sh" if rng.random() < 0.15 else "bash"
    risk = rng.choice([0.0, 0.0, 0.1, 0.3, 1.0, 1.0])
    fields = [f"v{k}" for k in range(rng.randint(1, 4))]
    values, items = generate_values(rng, fields)
    gen = Gen(rng, values, risk=risk, shell=shell)
    env = generate_env(gen) if rng.random() < 0.2 else {}
    if any(name in CONTROL_ENV_NAMES for name in env) and rng.random() < 0.3:
        # some control variables need their exact text: SHELLOPTS=xtrace, BASH_FUNC_x%%
        values[fields[0]] = rng.choice(BARE_ENV_VALUES)
    parts = [gen.stmt() for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))]
    parts = env_uses(gen, env) + parts
    template = join_stmts(parts, rng)
    pieces = split_top_level(template, parts)
    return Case(template, values, items, env, shell, seed=seed, parts=pieces, risk=risk)


def generate_values(rng: random.Random, fields: list[str]) -> tuple[dict[str, str], list[str]]:
    """Hostile values for the fields (sometimes a designed option pair) and items."""
    values: dict[str, str] = {}
    for index, name in enumerate(fields):
        if name in values:
            continue
        roll = rng.random()
        if roll < 0.12 and index + 1 < len(fields):
            option, following = designed_pair(f"V{index + 1}_", rng)
            values[name], values[fields[index + 1]] = option, following
        elif roll < 0.22:
            values[name] = rng.choice(BARE_VALUES)
        else:
            values[name] = marked(f"V{index}_", rng)
    items = [marked(f"I{j}_", rng) for j in range(rng.choice([0, 1, 2, 3, 3, 4]))]
    return values, items


def split_top_level(template: str, parts: list[str]) -> list[str]:
    """The template cut into its top-level statements, each with the separator
    after it, so a shrinker can drop any of them and keep the rest valid."""
    starts, position = [], 0
    for part in parts:
        found = template.find(part, position)
        if found < 0:
            return [template]
        starts.append(found)
        position = found + len(part)
    starts[0] = 0
    return [template[a:b] for a, b in zip(starts, [*starts[1:], len(template)], strict=True)]
