"""Host paths (``runner/config/host_paths.py``) that try to leave their folder, attacked in-process."""

from __future__ import annotations

import os
import tracemalloc

import pytest

from runner.config.host_paths import (
    RUNNER_NAMES,
    HostPathError,
    check_relative,
    check_value_destination,
    check_value_path,
    read_regular_file,
    resolve_inside,
)
from runner.config.template_checks import path_components


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "the path is empty"),
        ("a\0b", "the path contains NUL"),
        ("/etc/passwd", "'/etc/passwd' is absolute; host paths are relative to their folder"),
        ("~root/x", "'~root/x' is absolute; host paths are relative to their folder"),
        ("C:x", "'C:x' is absolute; host paths are relative to their folder"),
        ("..", "'..' contains '..'; host paths may not leave their folder"),
        ("a/../../b", "'a/../../b' contains '..'; host paths may not leave their folder"),
    ],
)
def test_a_path_that_could_leave_its_folder_is_refused_with_its_reason(path, reason) -> None:
    assert check_relative(path) == reason


@pytest.mark.parametrize("path", ["a", "ab:c", "a/b..c", "..a", "./b", "sub/dir/file"])
def test_a_plain_relative_path_is_accepted(path) -> None:
    # "ab:c": only one character before ":" is a drive ("C:..."), absolute on Windows.
    assert check_relative(path) is None


def test_resolve_inside_returns_the_resolved_path_inside_the_folder(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "link").symlink_to(tmp_path / "sub")  # a symlink that stays inside
    assert resolve_inside(tmp_path, "sub/link", what="upload") == (tmp_path / "sub").resolve()
    assert resolve_inside(tmp_path, ".", what="upload") == tmp_path.resolve()


def test_resolve_inside_names_the_hook_and_the_reason(tmp_path) -> None:
    with pytest.raises(HostPathError, match=r"^upload: '/x' is absolute"):
        resolve_inside(tmp_path, "/x", what="upload")


def test_a_symlink_out_of_the_folder_is_refused(tmp_path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "out").symlink_to(tmp_path)
    (tmp_path / "base-sibling").mkdir()
    (base / "sibling").symlink_to(tmp_path / "base-sibling")  # shares base's name as a prefix
    for path in ("out", "out/base-sibling", "sibling"):
        with pytest.raises(
            HostPathError, match=r"^save: .* leads outside .* \(through a symlink\)"
        ):
            resolve_inside(base, path, what="save")


def test_read_regular_file_reads_up_to_the_limit_and_refuses_one_byte_more(tmp_path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    assert read_regular_file(path, limit=5) == b"12345"
    assert read_regular_file(str(path), limit=6) == b"12345"
    with pytest.raises(OSError, match=r"larger than 4 bytes$"):
        read_regular_file(path, limit=4)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_read_regular_file_refuses_what_is_not_a_file_before_reading(tmp_path, kind) -> None:
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)  # without O_NONBLOCK, the open would wait for a writer forever
    else:
        path = "/dev/zero"  # a read until the limit would succeed: the type check must refuse
    with pytest.raises(OSError, match="not a regular file"):
        read_regular_file(path, limit=10)


def test_a_two_character_drive_path_is_absolute() -> None:
    assert check_relative("C:") == "'C:' is absolute; host paths are relative to their folder"


def test_read_regular_file_reads_no_more_than_the_limit_of_a_huge_file(tmp_path) -> None:
    # SECURITY.md: the size check comes before reading a whole file into memory.
    path = tmp_path / "sparse"
    with open(path, "wb") as stream:
        stream.truncate(64 * 1024 * 1024)  # 64 MB of holes, no disk used
    tracemalloc.start()
    try:
        with pytest.raises(OSError, match="larger than 1000 bytes"):
            read_regular_file(path, limit=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


# --- review 25's A1: a value that chooses where a saved file lands on the host ------


def components(source: str) -> list[tuple[str, bool]]:
    return path_components(source, RUNNER_NAMES)


def test_a_path_template_is_cut_only_at_its_own_slashes() -> None:
    assert components("a/{{ x | replace('/', '-') }}/b.md") == [
        ("a", "a"),
        ("{{ x | replace('/', '-') }}", None),
        ("b.md", "b.md"),
    ]
    # text between tags is the template's own: its / cuts; a block is never fixed
    assert components("{% if x %}a/b{% endif %}") == [("{% if x %}a", None), ("b{% endif %}", None)]
    assert components("{# a/b #}c/d") == [
        ("{# a/b #}c", "c"),
        ("d", "d"),
    ]  # a comment names nothing
    # a }} or / inside a tag's string cuts nothing (review 26's A1c)
    assert components("{{ x.n ~ '}}/' | replace('}}/', '') }}") == [
        ("{{ x.n ~ '}}/' | replace('}}/', '') }}", None)
    ]
    # the runner's own names fix a component; a constant or a filtered one does not
    assert components("{{ session.id }}/{{ x.n }}") == [
        ("{{ session.id }}", "\0"),
        ("{{ x.n }}", None),
    ]
    assert components("{{ '.' }}/{{ session.id[:0] }}/{% raw %}a{% endraw %}") == [
        ("{{ '.' }}", None),
        ("{{ session.id[:0] }}", None),
        ("{% raw %}a{% endraw %}", None),
    ]


@pytest.mark.parametrize(
    "source",
    [
        "{{ x.name }}",  # the name at the output folder's top
        "{{ x.a }}{{ x.b }}.json",
        "report-{{ x.n }}.md",
        "{{ x.dir }}/{{ x.name }}",  # the folders and the name
        "{% if x.a %}{{ x.a }}{% endif %}",
        "./{{ x.name }}",  # . is the top (review 26's A1b)
        ".//{{ x.name }}",
        "{{ x.name ~ '}}/' | replace('}}/', '') }}",  # review 26's A1c
        "{{ x.dir }}/.",  # the value's last folder is the name
        "{{ x.dir }}/",
        "{% if x.a %}saved{% endif %}/{{ x.b }}",
        # a comment, a constant or a raw block where a name would be (review 27's A1d)
        "./{# comment #}/{{ x.name }}",
        "{{ '.' }}/{{ x.name }}",
        "{{ x.name }}.bak/{# comment #}",
        "{% raw %}saved{% endraw %}/{{ x.name }}",
        # session rebound: no longer the runner's (review 28's A1e)
        "./{% set session = x %}/{{ session.id }}",
        "{% set session = x %}{{ session.id }}/{{ x.name }}",
    ],
)
def test_a_value_may_not_choose_a_file_name_at_the_output_folders_top(source) -> None:
    reason = check_value_destination(components(source))
    assert reason is not None and "inside a folder the template names" in reason


@pytest.mark.parametrize(
    "source",
    [
        "saved/{{ x.name }}",
        "./saved/{{ x.name }}",
        "out/{{ x.a }}/{{ x.b }}.json",
        "{{ x.dir }}/report.md",  # the folders only: the template fixes the name
        "{{ x.a }}/{{ x.b }}/checks.txt",
        "{{ session.id }}/{{ x.name }}",  # review 26: the runner's id names a folder
        "{{ x.dir }}/{{ session.id }}.md",
        "fixed.md",
    ],
)
def test_a_value_may_choose_folders_or_a_name_inside_a_named_folder(source) -> None:
    assert check_value_destination(components(source)) is None


def test_the_refusals_say_what_to_write_instead() -> None:
    assert check_value_destination(components("{{ x.name }}")) == (
        "a value may choose the saved file's name only inside a folder the template "
        'names (to: "saved/{{ x.name }}"), or the folders with the name fixed '
        '(to: "{{ x.dir }}/report.md"): a name chosen at the output folder\'s top '
        "could replace a file there that runs (a Makefile, the agent's YAML)"
    )
    with pytest.raises(HostPathError) as caught:
        check_value_path(components("saved/{{ x.n }}"), "saved/.envrc", what="save: to")
    assert str(caught.value) == (
        "save: to: 'saved/.envrc' holds a folder or file name that starts with '.' "
        "('.envrc'), which a value may not choose on the host; "
        "write it in the template if it is meant"
    )


@pytest.mark.parametrize(
    "rendered",
    ["saved/.bashrc", "saved/a/.git/config", "saved/.venv/lib/x.pth", "saved/.envrc"],
)
def test_a_value_may_not_choose_a_dot_name_on_the_host(rendered) -> None:
    with pytest.raises(HostPathError, match="starts with '.'") as caught:
        check_value_path(components("saved/{{ x.name }}"), rendered, what="save: to")
    assert str(caught.value).startswith("save: to: ")


def test_a_dot_name_the_template_writes_itself_is_allowed() -> None:
    check_value_path(components(".reports/{{ x.name }}"), ".reports/pr-12.md", what="save: to")
    check_value_path(components("saved/{{ x.name }}"), "saved/a.b/c.d", what="save: to")
    with pytest.raises(HostPathError):
        check_value_path(components(".reports/{{ x.name }}"), ".reports/.envrc", what="save: to")
