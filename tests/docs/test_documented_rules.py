"""What docs/shell-rules.md and SECURITY.md say of the checker's facts is the
rule table itself (issue 27, item 6): the lists they print are compared with
``runner/config/shell/rules.py`` and ``programs.py``, so a rule added or dropped there fails here
until the documents say so.  (The rules table was README's until issue 31
moved it to its own page.)"""

from __future__ import annotations

import re
from pathlib import Path

from runner.config.shell.executors import EXECUTORS
from runner.config.shell.programs import FOLLOWED_WRAPPERS, STRICT_PROGRAMS, STRICT_RECEIVERS
from runner.config.shell.rules import RULES, SAFE_BUILTINS, STDIN_BUILTINS

ROOT = Path(__file__).resolve().parents[2]
SHELL_RULES = (ROOT / "docs" / "shell-rules.md").read_text()
SECURITY = (ROOT / "SECURITY.md").read_text()


def _words_after(text: str, lead: str) -> list[str]:
    """The backquoted space-separated words right after ``lead`` (`a b c`)."""
    match = re.search(re.escape(lead) + r"\s*`([^`]+)`", text)
    assert match, f"no list after {lead!r}"
    return match.group(1).split()


def test_the_default_modes_builtins_are_the_safe_builtins() -> None:
    page = _words_after(SHELL_RULES, "on stdin or in their environment; builtins")
    security = _words_after(SECURITY, "never an evaluating builtin (anything outside")
    assert set(page) == set(security) == SAFE_BUILTINS


def test_the_strict_modes_receivers_are_the_strict_receivers() -> None:
    row = next(line for line in SHELL_RULES.splitlines() if line.startswith("| strict:"))
    named = set(re.findall(r"`([^`]+)`", row.split("|")[2]))
    listed = {part for name in named for part in name.split("/")}
    assert listed <= STRICT_RECEIVERS
    assert {"echo", "printf", "cat", "test", "[", "read", "mapfile"} <= listed
    assert STRICT_RECEIVERS - listed <= {"true", ":", "readarray"} | (STDIN_BUILTINS - listed)


def test_the_followed_wrappers_are_the_table() -> None:
    words = _words_after(SECURITY, "is resolved through")
    assert set(words) - {"N"} == FOLLOWED_WRAPPERS


def test_the_number_of_gtfobins_executors_is_the_datas() -> None:
    for text in (SHELL_RULES, SECURITY):
        assert re.search(rf"\b{len(EXECUTORS)}\s+programs", text)


def test_every_rule_security_md_names_exists_and_every_rule_is_named() -> None:
    rules = set(RULES)
    unknown = set(re.findall(r"\[`([a-z-]+)`\]", SECURITY)) - rules
    assert unknown == set(), f"SECURITY.md names rules the checker does not have: {unknown}"
    undocumented = rules - set(re.findall(r"`([a-z-]+)`", SECURITY))
    assert undocumented == set(), f"rules SECURITY.md never names: {undocumented}"


def test_the_strict_modes_data_programs_are_the_list() -> None:
    listed = _words_after(SHELL_RULES, "`./bin/head` is whatever put it there):")
    assert set(listed) == STRICT_PROGRAMS
