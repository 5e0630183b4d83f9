"""The copies a script makes, as bash makes its words (review 24's K3).

Each spelling below copied a secret's file under a name the render did not
count as secret, and ``od -c {{ f }}`` with that name printed the token
past the scrubber: a variable the script assigns (C3), a ``for`` loop's
words (C8), a brace (C10), a backup option (C11).
"""

from __future__ import annotations

import pytest

from runner.config.shell.copies import copied_words
from runner.config.templates import Fields, UnsafeTemplateError, compile_template


def _destinations(script: str) -> set[str]:
    return {destination.replace('"', "") for destination, _ in copied_words(script)}


def test_a_variable_assigned_a_fixed_text_is_followed() -> None:
    assert copied_words('f=npmrc.txt; cp -- "$f" keep.cfg') == [("keep.cfg", ['"npmrc.txt"'])]
    assert copied_words("f=npmrc.txt; cp -- ${f} keep.cfg") == [("keep.cfg", ["npmrc.txt"])]
    # several texts: one pair each; chained assignments and += too
    assert copied_words('f=a.txt; f="b.txt"; cp $f k') == [("k", ["a.txt"]), ("k", ["b.txt"])]
    assert copied_words("g=npmrc; f=$g; f+=.txt; export f; ln -s $f k") == [
        ("k", ["npmrc"]),
        ("k", ["npmrc.txt"]),
    ]
    # single quotes keep $f; a text not fixed before the run stays as written
    assert copied_words("f=a; cp '$f' k") == [("k", ["'$f'"])]
    assert copied_words('f=$(ls); f=a; cp "$f" k') == [("k", ['"a"']), ("k", ['"${f}"'])]


def test_a_for_loops_words_are_followed() -> None:
    script = 'for f in npmrc.txt b{1,2}; do cp -- "$f" "$f.bak"; done'
    assert _destinations(script) == {"npmrc.txt.bak", "b1.bak", "b2.bak"}
    assert copied_words('for f in *.txt; do cp "$f" "$f.bak"; done') == [
        ('"*.txt.bak"', ['"*.txt"'])
    ]


def test_a_brace_makes_several_words_the_last_one_the_destination() -> None:
    assert copied_words("cp -- npmrc.txt{,.bak}") == [("npmrc.txt.bak", ["npmrc.txt"])]
    assert copied_words("cp a{1..3} d") == [("d", ["a1", "a2", "a3"])]
    assert copied_words("f=npmrc; cp -- $f.txt{,.b{a,c}k}") == [
        ("npmrc.txt.bck", ["npmrc.txt", "npmrc.txt.bak"])
    ]
    # quoted, ${...} and a brace without a comma are no brace expansion
    assert copied_words('cp "n{a,b}" ${x:-{a,b\\}} {c} d') == [
        ("d", ['"n{a,b}"', "${x:-{a,b\\}}", "{c}"])
    ]


@pytest.mark.parametrize(
    ("script", "backups"),
    [
        ("cp -b -- npmrc.new npmrc.txt", {"npmrc.txt~", "npmrc.txt.~1~"}),
        ("mv --backup=numbered npmrc.new npmrc.txt", {"npmrc.txt~", "npmrc.txt.~2~"}),
        ("ln -sfb npmrc.new npmrc.txt", {"npmrc.txt~"}),
        ("install -S .old npmrc.new npmrc.txt", {"npmrc.txt.old"}),
        ("cp --suf=.o npmrc.new npmrc.txt", {"npmrc.txt.o"}),
        ("rsync -b npmrc.new npmrc.txt", {"npmrc.txt~"}),
    ],
)
def test_a_backup_option_makes_the_old_destination_a_copy(script, backups) -> None:
    pairs = copied_words(script)
    assert ("npmrc.txt", ["npmrc.new"]) in pairs
    for backup in backups:
        assert (backup, ["npmrc.txt"]) in pairs
    assert all(destination != ".old" for destination, _ in pairs)


def test_no_backup_without_the_option() -> None:
    assert copied_words("rsync -S npmrc.new npmrc.txt") == [("npmrc.txt", ["npmrc.new"])]


@pytest.mark.parametrize(
    ("steps", "value"),
    [
        (['f=npmrc.txt; cp -- "$f" keep.cfg && od -An -c -- {{ x.f }}'], "keep.cfg"),
        (
            ['for f in npmrc.txt; do cp -- "$f" "$f.bak"; done; od -An -c -- {{ x.f }}'],
            "npmrc.txt.bak",
        ),
        (["cp -- npmrc.txt{,.bak}", "od -An -c -- {{ x.f }}"], "npmrc.txt.bak"),
        (["cp -b -- npmrc.new npmrc.txt", "od -An -c -- {{ x.f }}"], "npmrc.txt~"),
        (["mv -S .1 -- npmrc.new npmrc.txt", "od -An -c -- {{ x.f }}"], "npmrc.txt.1"),
        (["cp --backup=t npmrc.new npmrc.txt", "od -An -c -- {{ x.f }}"], "npmrc.txt.~1~"),
    ],
)
def test_the_render_refuses_a_value_naming_such_a_copy(steps, value) -> None:
    """Review 24's C3, C8, C10 and C11 as they ran: step by step, each
    step's copies secret in the next, the last step refused."""

    def run(chosen: str) -> None:
        copies: set[str] = set()
        for step in steps:
            template, problems = compile_template(step, shell=True, fields_by_name={"x": None})
            assert problems == [], problems
            template.render(
                {"x": Fields({"f": chosen, "g": "keep.cfg"})},
                secret_files={"/w/npmrc.txt", *copies},
                copies=copies,
            )

    with pytest.raises(UnsafeTemplateError, match="secret"):
        run(value)
    run("other")  # the control: a name that is no copy runs


def test_a_copy_made_in_one_step_is_secret_in_the_next() -> None:
    """C10's two steps: the copy, then a value that names it."""
    copies: set[str] = set()
    copy, _ = compile_template("cp -- npmrc.txt{,.bak}", shell=True, fields_by_name={})
    copy.render({}, secret_files={"/w/npmrc.txt"}, copies=copies)
    assert copies == {"npmrc.txt.bak"}
    od, _ = compile_template("od -An -c -- {{ x.f }}", shell=True, fields_by_name={"x": None})
    with pytest.raises(UnsafeTemplateError, match="names a secret's file"):
        od.render({"x": Fields({"f": "npmrc.txt.bak"})}, secret_files={"/w/npmrc.txt", *copies})


def test_a_value_in_a_variable_that_names_the_copy_is_seen() -> None:
    """The sentinel goes through the variable: the value chose where the
    secret's copy goes, named for ``cp`` to open (as ``cp npmrc.txt {{ g }}``)."""
    template, problems = compile_template(
        'f={{ x.f }}; cp -- npmrc.txt "$f.cfg"', shell=True, fields_by_name={"x": None}
    )
    assert problems == [], problems
    copies: set[str] = set()
    with pytest.raises(UnsafeTemplateError, match="names a secret's file"):
        template.render({"x": Fields({"f": "keep"})}, secret_files={"/w/npmrc.txt"}, copies=copies)
    assert copies == {"keep.cfg"}
