"""A value that reaches a file name through a variable is checked with the
value in (runner/config/shell/held_text.py).

The twentieth review's G1: ``read -r p <<< {{ x }}; od -An -c "$p"`` with
``/proc/self/environ`` printed a step's secret one character at a time,
past the scrubber; so did ``q="$p"``, ``p={{ x }}/environ``, ``for``,
``mapfile`` and ``printf -v``.  Each variable now stands for the texts it
may hold, or, when a program computed them, may not name a file at all.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from agent_files import one_step_agent
from conftest import RUNNER_CLI

from runner.config.templates import Fields, UnsafeTemplateError, compile_template

_PROC = "a value names a file under /proc or /dev/fd"

#: (template, a value that names a process file through a variable)
THROUGH_VARIABLES = [
    ('read -r p <<< {{ x.p }}; od -An -c "$p"', "/proc/self/environ"),
    ('read -r a p <<< {{ x.p }}; od -An -c "$p"', "notes /proc/self/environ"),
    ('while read -r p; do od -An -c "$p"; done <<< {{ x.p }}', "x\n/proc/self/environ"),
    ('read p <<< {{ x.p }}; od -An -c "$p"', "/pr\\oc/self/environ"),
    ('p={{ x.p }}; q="$p"; od -An -c "$q"', "/proc/self/environ"),
    ('p={{ x.p }}/environ; od -An -c "$p"', "/proc/self"),
    ('p={{ x.p }}; od -An -c "/pr$p"', "oc/self/environ"),
    ('for p in notes.txt {{ x.p }}; do od -An -c "$p"; done', "/proc/self/environ"),
    ('d=/; p={{ x.p }}; od -An -c "$d$p"', "proc/self/environ"),
    ('p={{ x.p }}; wc -c < "$p"', "/dev/fd/0"),
    ('p={{ x.p }}; q="$p"; for f in "$q"; do rev "$f"; done', "/proc/1/environ"),
]


@pytest.mark.parametrize(("source", "place"), THROUGH_VARIABLES)
def test_a_value_through_a_variable_may_not_name_a_process_file(source, place) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match=_PROC):
        template.render({"x": Fields({"p": place})})
    assert "notes.txt" in template.render({"x": Fields({"p": "notes.txt"})})


#: Variables whose text a program or bash computes from a value while the
#: script runs: the render cannot know it, so none may name a file.
COMPUTED = [
    'p=$(printf %s {{ x.p }} | rev); od -An -c "$p"',
    'printf -v p "/pr%s" {{ x.p }}; od -An -c "$p"',
    'mapfile -t a <<< {{ x.p }}; od -An -c "${a[0]}"',
    'printf "%s\\n" {{ x.p }} | while read -r p; do od -An -c "$p"; done',
    'printf "%s" {{ x.p }} > f; read -r p < f; od -An -c "$p"',
    'p={{ x.p }}; p="$p/x"; od -An -c "$p"',
    'echo {{ x.p }}; od -An -c "$_"',
    'p={{ x.p }}; p+=/environ; od -An -c "$p"',
    'p={{ x.p }}; cp notes.txt "$p"; p=$(cat notes.txt); tee "$p" < notes.txt',
]


@pytest.mark.parametrize("source", COMPUTED)
def test_a_file_name_computed_from_a_value_is_refused_by_validate(source) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[computed-path]" in p.message for p in problems), problems


#: What the same shapes still do with a value: builtins get any text.
ACCEPTED = [
    'read -r p <<< {{ x.p }}; printf "%s\\n" "$p"',
    'p=$(printf %s {{ x.p }} | rev); echo "$p"',
    'for f in {{ x.p }}; do wc -c -- "$f"; done',
    'p=out/{{ x.p }}; mkdir -p out; touch -- "$p"',
]


@pytest.mark.parametrize("source", ACCEPTED)
def test_builtins_and_checked_variables_still_take_values(source, tmp_path: Path) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    script = template.render({"x": Fields({"p": "notes.txt"})})
    (tmp_path / "notes.txt").write_text("hello\n")
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


#: Destinations through a variable: the render checks each text too (until
#: the twentieth review, any variable holding part of a value was refused).
DESTINATIONS = [
    ('p=/{{ x.p }}; cp notes.txt "$p"', "etc/ld.so.preload"),
    ('for p in out.txt {{ x.p }}; do cp notes.txt "$p"; done', "/etc/ld.so.preload"),
    ('p={{ x.p }}; q="$p"; cp notes.txt "$q"', "/etc/ld.so.preload"),
]


@pytest.mark.parametrize(("source", "place"), DESTINATIONS)
def test_a_destination_through_a_variable_is_checked(source, place) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match="under the system's directories"):
        template.render({"x": Fields({"p": place})})


@pytest.mark.parametrize(
    "source",
    [
        'p=({{ x.q }}); od -c -- "$p"',  # an array's texts are not followed: unknown
        'while read -r p; do od -c -- "$p"; done < <(printf "%s\\n" {{ x.q }})',
    ],
)
def test_what_held_text_cannot_follow_is_a_computed_path(source) -> None:
    """Besides any other rule the line breaks ([assignment] for the array)."""
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[computed-path]" in p.message for p in problems), problems


def test_a_while_read_loop_over_a_here_string_is_followed() -> None:
    """``read`` in a ``while`` condition takes the loop's here-string: a
    piece of the value, checked when the step renders, not refused."""
    template, problems = compile_template(
        'while read -r p; do od -c -- "$p"; done <<< {{ x.q }}',
        shell=True,
        fields_by_name={"x": None},
    )
    assert problems == [], problems
    template.render({"x": Fields({"q": "notes.txt"})})
    with pytest.raises(UnsafeTemplateError, match="/proc"):
        template.render({"x": Fields({"q": "/proc/self/environ"})})


def test_a_static_destination_spelled_with_a_variable_is_refused() -> None:
    """cp's operand "$d/ld.so.preload" was read as an option (it is not
    fixed before the script runs), so no destination was checked."""
    for source in (
        'echo hi > f; d=/etc; cp f "$d/ld.so.preload"; echo {{ x.p }}',
        'echo hi > f; d=/etc; dd if=f "of=$d/ld.so.preload"; echo {{ x.p }}',
        'echo hi > f; d=/etc; cp -t "$d" f; echo {{ x.p }}',
    ):
        _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
        assert any("/etc" in p.message for p in problems), (source, problems)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        # review 40's F2: /dev/fd is /proc/self/fd, so /dev/fd/.. is /proc/self
        ("printf '%s\\n' {{ x.p }} > /dev/fd/../root/etc/ld.so.preload", "/proc/self/root"),
        ("printf '%s\\n' {{ x.p }} | tee /dev/fd/../root/etc/profile.d/x.sh", "/proc/self/root"),
        ("cd /dev; printf '%s\\n' {{ x.p }} > fd/../root/etc/x.conf", "cd into /dev or /proc"),
        ("ln -s /dev/fd d; printf '%s\\n' {{ x.p }} > d/../root/etc/a", "a link to /dev or /proc"),
        # review 40's F1: after cd /dev or a link to /dev/fd, stdin is jq's stdin
        ("cd /dev\njq -rn -f stdin <<< {{ x.p }}", "cd into /dev or /proc"),
        ("ln -s /dev/fd d\njq -rn -f d/0 <<< {{ x.p }}", "a link to /dev or /proc"),
        ("cd /\njq -rn -f dev/stdin <<< {{ x.p }}", "jq's -f file dev/stdin"),
        # the folder through a variable
        ('d=/dev; cd "$d"; grep -ao -- {{ x.p }} fd/../environ', "cd into /dev or /proc"),
        ('for d in /dev/fd; do ln -s "$d" l; done; echo {{ x.p }}', "a link to /dev or /proc"),
    ],
)
def test_dev_links_into_proc_are_read_as_the_kernel_reads_them(source, said) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any(said in p.message for p in problems), problems


def test_descriptors_stay_writable_beside_a_value() -> None:
    for source in (
        "echo {{ x.p }} > /dev/stderr",
        "echo {{ x.p }} | tee /dev/stderr",
        "exec 3> out.txt; echo {{ x.p }} > /dev/fd/3",
        "cd out && echo {{ x.p }} > log.txt",
    ):
        _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
        assert problems == [], (source, problems)


def test_a_secret_is_not_read_through_a_variable_by_the_installed_cli(tmp_path: Path) -> None:
    """G1 end to end: without the check, ``od -c`` prints the secret one
    character at a time, past the scrubber."""
    path = one_step_agent(
        tmp_path,
        'read -r p <<< {{ x.p }}; od -An -c "$p"',
        secrets={"TOKEN": "tok"},
        top={"secrets": {"tok": {"from_env": "RUNNER_TEST_TOKEN"}}},
    )
    assert subprocess.run([*RUNNER_CLI, "validate", str(path)], capture_output=True).returncode == 0
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--input", 'acme.x={"p": "/proc/self/environ"}'],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "RUNNER_TEST_TOKEN": "hunter2secret"},
    )
    assert result.returncode == 2, result.stderr
    assert _PROC in result.stderr
    assert "h   u   n   t" not in result.stdout + result.stderr


# -- the twentieth review's other classes beside G1 ----------------------------


@pytest.mark.parametrize(
    "source",
    [
        "TMPDIR={{ x.p }} mktemp",
        "TMPDIR={{ x.p }}; export TMPDIR; mktemp",
        "TEMP={{ x.p }} mktemp",
    ],
)
def test_a_value_assigned_to_a_place_programs_write_is_a_destination(source) -> None:
    """G4: ``TMPDIR={{ d }} mktemp`` with ``/etc/profile.d`` made a file
    there (only a step's ``env:`` TMPDIR was checked)."""
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match="under the system's directories"):
        template.render({"x": Fields({"p": "/etc/profile.d"})})
    assert "work" in template.render({"x": Fields({"p": "/tmp/work"})})


def test_a_static_place_programs_write_is_checked_in_a_script_with_values() -> None:
    _, problems = compile_template(
        "TMPDIR=/etc/profile.d mktemp; echo {{ x.p }}", shell=True, fields_by_name={"x": None}
    )
    assert any("/etc/profile.d" in p.message for p in problems), problems


def test_jq_does_not_run_beside_a_file_a_value_names() -> None:
    """G2: ``printf {{ body }} > {{ path }}`` with ``~/.jq`` (the sandbox's
    HOME, not the runner's) loaded the value into jq as code."""
    source = "printf '%s\\n' {{ x.b }} > {{ x.p }}; jq -r .name f.json"
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("jq: this script writes a value to a file" in p.message for p in problems)
    fixed = "printf '%s\\n' {{ x.b }} > out.txt; jq -r .name f.json"
    assert compile_template(fixed, shell=True, fields_by_name={"x": None})[1] == []


@pytest.mark.parametrize(
    "source",
    [
        "printf '%s\\n' {{ x.b }} | tee \"$HOME\"/{{ x.p }}; /usr/bin/jq -n -r '[1] | length'",
        "printf '%s\\n' {{ x.b }} | tee -a \"$HOME\"/{{ x.p }}; /usr/bin/jq -n 1",
        "printf '%s\\n' {{ x.b }} > n.txt; cp n.txt \"$HOME\"/{{ x.p }}; /usr/bin/jq -n 1",
        "cd && printf '%s\\n' {{ x.b }} | tee {{ x.p }}; /usr/bin/jq -n 1",
    ],
)
def test_jq_does_not_run_beside_a_file_a_value_names_for_a_copier(source) -> None:
    """Review 38's F1: ``tee``'s or ``cp``'s destination that holds a value
    (``"$HOME"/{{ x }}`` with ``.jq``, or a bare ``cd`` first) wrote
    ``~/.jq``, which jq loaded into its program and ran."""
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("jq: this script writes a value to a file" in p.message for p in problems), problems


def test_a_value_may_not_write_where_the_runners_python_loads_code() -> None:
    """V1: ``x.pth`` in the runner's own site-packages runs in every later
    ``runner`` command."""
    import site
    import sys

    from runner.config.templates import is_safe_destination

    for directory in (sys.prefix, *site.getsitepackages()):
        assert not is_safe_destination(directory + "/zz.pth"), directory
    assert is_safe_destination("/tmp/work/zz.pth")


#: G3: the value plants a program on the step's own PATH (its env: PATH, a
#: relative entry, a link the script made), which the render cannot see.
PLANTING = [
    "mkdir -p bin; printf '%s\\n' {{ x.v }} > {{ x.p }}; chmod 755 {{ x.p }}; wc -c agent.yaml",
    'ln -s "$HOME" lnk; cp -- /bin/true {{ x.p }}; wc -c agent.yaml',
    "cd -- {{ x.p }}; cp /bin/true wc; printf '%s\\n' {{ x.v }} > wc; cd -; wc -c agent.yaml",
    "for f in a b; do wc -c agent.yaml; printf '%s\\n' {{ x.v }} | tee {{ x.p }}; done",
    "printf '%s\\n' {{ x.v }} > {{ x.p }}; env wc -c agent.yaml",
    "printf '%s\\n' {{ x.v }} > {{ x.p }}wc; wc -c agent.yaml",  # the value is the directory
    "printf '%s\\n' {{ x.v }} > {{ x.p }}/wc; wc -c agent.yaml",
    "cp -- {{ x.p }}.sh {{ x.p }}; touch done",  # a copier's file may take its source's name
]


@pytest.mark.parametrize("source", PLANTING)
def test_no_bare_program_name_after_a_value_chose_where_a_file_lands(source) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[planted-name]" in p.message for p in problems), problems


def test_the_planted_name_hint_names_the_refused_program() -> None:
    """Review 22's U1: the fix names the program refused, not the table's wc."""
    _, problems = compile_template(
        "mkdir -p -- {{ x.p }} && cp -- build.log {{ x.p }}/ && ls -l -- {{ x.p }}",
        shell=True,
        fields_by_name={"x": None},
    )
    messages = [p.message for p in problems if "[planted-name]" in p.message]
    assert messages and all("/usr/bin/wc" not in m for m in messages), messages
    assert any("(mkdir)" in m and "/usr/bin/mkdir" in m for m in messages), messages


#: What may follow such a write: builtins, programs by their system path,
#: and writes that leave no content (touch, mkdir).
NOT_PLANTING = [
    "printf '%s\\n' {{ x.v }} > {{ x.p }}; /usr/bin/wc -c agent.yaml",
    "mkdir -p -- {{ x.p }}; cd -- {{ x.p }} && pwd && ls",
    "touch -- {{ x.p }}; wc -l -- *",
    "printf '%s\\n' {{ x.v }} > out.txt; wc -c out.txt",
    "wc -c agent.yaml; printf '%s\\n' {{ x.v }} > {{ x.p }}",
    # the written file's name ends in fixed text no later program has
    "echo ran >> {{ x.p }}.count; touch in-step-2",
    "printf '%s\\n' {{ x.v }} > {{ x.p }}/wc; ls",
    # after a cd a value chose, a file of a fixed name plants that name only
    "cd -- {{ x.p }} && printf '%s\\n' {{ x.v }} > notes.txt; wc -c notes.txt",
]


@pytest.mark.parametrize("source", NOT_PLANTING)
def test_what_may_follow_a_write_a_value_placed(source) -> None:
    assert compile_template(source, shell=True, fields_by_name={"x": None})[1] == []


def test_a_planted_program_does_not_run_through_the_installed_cli(tmp_path: Path) -> None:
    """The review's P1: the step's own ``env: PATH`` holds a relative
    directory; without the check the value lands there as ``wc`` and the
    step's ``wc`` runs it."""
    path = one_step_agent(
        tmp_path,
        "mkdir -p bin; printf '%s\\n' {{ x.v }} > {{ x.p }}; chmod 755 {{ x.p }}; wc -c agent.yaml",
        env={"PATH": "bin:/usr/bin:/bin"},
    )
    value = json.dumps({"v": f"touch {tmp_path}/CANARY_P1", "p": "bin/wc"})
    checked = subprocess.run([*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True)
    assert checked.returncode == 2 and "[planted-name]" in checked.stdout + checked.stderr
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--input", f"acme.x={value}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert not list(tmp_path.rglob("CANARY*"))


# -- the twenty-first review ------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "values"),
    [
        # H1: cd into /dev/fd (or /dev), then a relative read
        ("cd {{ x.p }} && od -An -c {{ x.v }}", {"p": "/dev/fd", "v": "../environ"}),
        ("cd {{ x.p }} && od -An -c fd/0", {"p": "/dev", "v": ""}),
    ],
)
def test_review_21s_render_time_cases_are_refused(source, values) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match="refused before it ran"):
        template.render({"x": Fields(values)})


def test_a_variable_computed_at_run_time_beside_a_value_is_refused_at_validate() -> None:
    """H6 (a variable computed at run time completes /proc beside a value) was
    refused when the step rendered; since review 35 no program takes text
    computed at run time beside a value, so validate refuses it."""
    source = 'd="$(printf /pr)"; od -An -c "$d"{{ x.v }}'
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[computed-word]" in p.message for p in problems), problems


@pytest.mark.parametrize(
    ("source", "shell", "rule"),
    [
        # H2: a background job runs beside the write, whatever the order
        (
            "for i in 1 2; do sleep 1; date -u; done & mkdir -p bin; "
            "printf '%s\\n' {{ x.v }} > {{ x.p }}; /bin/chmod 755 {{ x.p }}; wait",
            None,
            "planted-name",
        ),
        # H3: under dash, time and pushd are programs on PATH
        (
            "printf '%s\\n' {{ x.v }} > {{ x.p }}; /bin/chmod 755 {{ x.p }}; time /usr/bin/wc f",
            "sh",
            "planted-name",
        ),
        # H4: TMPDIR set by read, printf -v, for
        ("read -r TMPDIR <<< {{ x.v }}; mktemp", None, "computed-path"),
        ("printf -v TMPDIR '%s' {{ x.v }}; mktemp", None, "computed-path"),
        ("for TMPDIR in {{ x.v }}; do mktemp; done", None, "computed-path"),
        # H5: read -u reads another descriptor, not its here-string
        ('read -r -u 3 p <<< {{ x.v }}; od -An -c "$p"', None, "computed-path"),
    ],
)
def test_review_21s_static_cases_are_refused(source, shell, rule) -> None:
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None}, shell_name=shell)
    assert any(f"[{rule}]" in p.message for p in problems), problems


def test_bash_keywords_stay_allowed_after_a_planting() -> None:
    source = "printf '%s\\n' {{ x.v }} > {{ x.p }}; time /usr/bin/wc f"
    assert compile_template(source, shell=True, fields_by_name={"x": None})[1] == []


# -- the twenty-second review ----------------------------------------------------


def test_a_process_substitution_runs_beside_a_planting() -> None:
    """I1: ``<(sleep 2; date)`` runs in the background, like ``&``."""
    source = (
        "echo started <(/usr/bin/sleep 2; date -u +%T); mkdir -p bin; "
        "printf '%s\\n' {{ x.v }} > {{ x.p }}; /bin/chmod 755 {{ x.p }}"
    )
    _, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert any("[planted-name]" in p.message for p in problems), problems


@pytest.mark.parametrize(
    ("value", "refused"), [("-ohe.", True), ("x -v", True), ("feature-x", False)]
)
def test_a_piece_cut_by_read_may_not_start_an_option(value, refused) -> None:
    """I3: ``read -r q <<< {{ x }}; grep -rn "$q" .`` with ``-ohe.``."""
    template, problems = compile_template(
        'read -r q <<< {{ x.v }}; grep -rn "$q" .', shell=True, fields_by_name={"x": None}
    )
    assert problems == []
    if refused:
        with pytest.raises(UnsafeTemplateError, match="read as an option"):
            template.render({"x": Fields({"v": value})})
    else:
        template.render({"x": Fields({"v": value})})


def test_a_value_changed_in_the_template_may_name_a_file() -> None:
    """Review 22's U2: the fix [computed-path] offers for ``safe="${n//\\//-}"``."""
    template, problems = compile_template(
        "mkdir -p -- out/{{ x.branch | replace('/', '-') }}",
        shell=True,
        fields_by_name={"x": None},
    )
    assert problems == [], problems
    assert template.render({"x": Fields({"branch": "feat/a b"})}) == "mkdir -p -- out/'feat-a b'"
    _, refused = compile_template(
        'n={{ x.branch }}; mkdir -p -- "out/${n//\\//-}"', shell=True, fields_by_name={"x": None}
    )
    assert any("replace('/', '-')" in p.message for p in refused), refused


#: Review 23's J3: a fixed cd or link into a directory on the runner's PATH
#: (or its HOME's dot-files), then a write whose name a value chose; and a
#: value written into such a place by a fixed name.
FIXED_PROGRAM_PLACES = [
    "cd {bin} && printf '%s\\n' {{{{ x.v }}}} > {{{{ x.p }}}} && chmod 755 {{{{ x.p }}}}",
    "ln -sfn {bin} tools\nprintf '%s\\n' {{{{ x.v }}}} > tools/{{{{ x.p }}}}",
    "printf '%s\\n' {{{{ x.v }}}} >> ~/.bashrc",
    "printf '%s\\n' {{{{ x.v }}}} > {bin}/wc",
    'cd "$HOME" && printf %s {{{{ x.v }}}} > {{{{ x.p }}}}',
    # review 24's K1: a fixed name after a fixed cd there, pushd, tee -a
    "cd {bin} && printf '%s\\n' {{{{ x.v }}}} > wc && chmod 755 wc",
    "pushd {bin} && printf '%s\\n' {{{{ x.v }}}} | tee -a wc",
]


@pytest.mark.parametrize("source", FIXED_PROGRAM_PLACES)
def test_a_value_cannot_plant_through_a_fixed_program_directory(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _, problems = compile_template(
        source.format(bin=bin_dir), shell=True, fields_by_name={"x": None}
    )
    assert any("[file-flow]" in p.message for p in problems), problems
    # the same script with a directory on no PATH: no such refusal
    _, elsewhere = compile_template(
        source.format(bin=tmp_path / "out")
        .replace("~/.bashrc", "notes.txt")
        .replace('"$HOME"', "out"),
        shell=True,
        fields_by_name={"x": None},
    )
    assert not any("where programs" in p.message for p in elsewhere), elsewhere


def test_strict_mode_refuses_what_the_default_refuses_after_a_consumer_names_a_file() -> None:
    """The fuzzer's case (tests/data/injection_regressions.jsonl): a consumer
    may make a file a value names, so a later glob may hand that name to a
    program as an option, in strict mode as in the default."""
    for source in (
        'argv {{ x.v }}; for i in a={{ x.v }}*; do echo "$i"; done',
        "argv {{ x.v }}; sort *",
    ):
        _, problems = compile_template(
            source, shell=True, fields_by_name={"x": None}, consumers=["argv", "sort"]
        )
        assert any("[file-flow]" in p.message for p in problems), (source, problems)
    _, problems = compile_template(
        "argv {{ x.v }}; sort -- notes.txt",
        shell=True,
        fields_by_name={"x": None},
        consumers=["argv", "sort"],
    )
    assert problems == [], problems
