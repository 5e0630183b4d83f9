"""Templates in YAML hooks: auto-quoting, and every rejection with its position."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest
from agent_files import one_step_agent
from conftest import RUNNER_CLI
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runner.config import validate_file
from runner.config.templates import (
    Fields,
    TemplateValueError,
    UnsafeTemplateError,
    compile_template,
)

HEADER = """\
version: 1
inputs:
  acme.repository:
    as: repo
    schema:
      type: object
      properties:
        repository: {type: string}
        revision: {type: string, default: main}
      required: [repository]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: h
        on_create:
"""
STEP_LINE = 18  # the 1-based line of the first step below HEADER


def check(tmp_path: Path, steps: str) -> list[str]:
    path = tmp_path / "agent.yaml"
    path.write_text(HEADER + steps)
    return [str(p).replace(str(path), "agent.yaml") for p in validate_file(path)]


@pytest.mark.parametrize(
    ("step", "column"),
    [
        ('          - run: echo "{{ repo.repository }}"\n', 24),
        ("          - run: echo '{{ repo.repository }}'\n", 24),
        ("          - run: echo `cat {{ repo.repository }}`\n", 28),
    ],
)
def test_placeholders_inside_quotes_are_rejected_with_their_position(
    tmp_path, step, column
) -> None:
    (message,) = check(tmp_path, step)
    assert message.startswith(f"agent.yaml:{STEP_LINE}:{column}: {{{{ }}}} inside quotes")
    assert "[quoted]" in message
    assert message.endswith("(at agent.environment.hooks[0].on_create[0].run)")


def test_ansi_c_quotes_are_refused_where_they_start(tmp_path) -> None:
    """$'...' is refused outright with a value present: sh (dash) does not read
    it as a quote, so the two shells would disagree on where values stand."""
    (message,) = check(tmp_path, "          - run: echo $'{{ repo.repository }}'\n")
    assert message.startswith(
        f"agent.yaml:{STEP_LINE}:18: {{{{ }}}} in a command that does not parse"
    )
    assert "write $'...' text with '...' or printf" in message


def test_the_hint_says_values_are_quoted_for_you(tmp_path) -> None:
    (message,) = check(tmp_path, '          - run: echo "{{ repo.revision }}"\n')
    assert (
        "values are quoted for you: write {{ x }} as a word of its own, without quotes" in message
    )


def test_a_placeholder_in_a_heredoc_is_rejected_on_its_line(tmp_path) -> None:
    steps = "          - run: |\n              cat > f <<EOF\n              {{ repo.repository }}\n              EOF\n"
    (message,) = check(tmp_path, steps)
    assert message.startswith(
        f"agent.yaml:{STEP_LINE + 2}:15: {{{{ }}}} inside quotes, a comment or a heredoc"
    )


def test_command_substitution_inside_double_quotes_is_fine(tmp_path) -> None:
    assert check(tmp_path, '          - run: echo "$(basename {{ repo.repository }})"\n') == []


def test_an_undeclared_name_is_a_validation_error(tmp_path) -> None:
    (message,) = check(tmp_path, "          - run: echo {{ repository }}\n")
    assert message.startswith(f"agent.yaml:{STEP_LINE}:26: undeclared name 'repository'")
    assert "declared inputs: repo" in message


def test_an_undeclared_field_is_a_validation_error(tmp_path) -> None:
    (message,) = check(tmp_path, "          - run: echo {{ repo.branch }}\n")
    assert (
        "input 'repo' has no field 'branch' (its schema declares: repository, revision)" in message
    )
    assert message.startswith(f"agent.yaml:{STEP_LINE}:26:")


def test_a_template_syntax_error_is_a_validation_error(tmp_path) -> None:
    (message,) = check(tmp_path, "          - run: echo {{ repo.repository\n")
    assert "template syntax" in message
    assert message.startswith(f"agent.yaml:{STEP_LINE}:")


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (
            "          - save: a\n            to: /etc/passwd\n",
            f"agent.yaml:{STEP_LINE + 1}:17: '/etc/passwd' is absolute; host paths are relative "
            "to their folder (at agent.environment.hooks[0].on_create[0].to)",
        ),
        (
            "          - save: a\n            to: ../outside\n",
            f"agent.yaml:{STEP_LINE + 1}:17: '../outside' contains '..'; host paths may not "
            "leave their folder (at agent.environment.hooks[0].on_create[0].to)",
        ),
        (
            "          - upload: ../../etc/shadow\n            to: x\n",
            f"agent.yaml:{STEP_LINE}:21: '../../etc/shadow' contains '..'; host paths may not "
            "leave their folder (at agent.environment.hooks[0].on_create[0].upload)",
        ),
        (
            "          - upload: ~/secrets\n            to: x\n",
            f"agent.yaml:{STEP_LINE}:21: '~/secrets' is absolute; host paths are relative to "
            "their folder (at agent.environment.hooks[0].on_create[0].upload)",
        ),
    ],
)
def test_host_paths_may_not_leave_their_folder(tmp_path, step, expected) -> None:
    assert check(tmp_path, step) == [expected]


def test_write_content_and_env_values_are_not_shell_quoted() -> None:
    fields = {"repo": frozenset({"repository"})}
    text, problems = compile_template(
        "# {{ repo.repository }}\n", shell=False, fields_by_name=fields
    )
    assert problems == []
    assert text.render({"repo": Fields({"repository": "it's $(x)"})}) == "# it's $(x)\n"


def test_run_values_become_one_quoted_word() -> None:
    fields = {"repo": frozenset({"repository"})}
    shell, _ = compile_template("echo {{ repo.repository }}", shell=True, fields_by_name=fields)
    assert shell.render({"repo": Fields({"repository": "it's $(x)"})}) == "echo 'it'\"'\"'s $(x)'"
    # Plain values are quoted too: every value is the same kind of word the check saw.
    assert shell.render({"repo": Fields({"repository": "main"})}) == "echo 'main'"


@pytest.mark.parametrize("value", [["a", "b"], {"k": "v"}])
def test_a_list_or_mapping_is_not_one_shell_word(value) -> None:
    shell, _ = compile_template("echo {{ v }}", shell=True, fields_by_name={"v": None})
    with pytest.raises(TemplateValueError, match="cannot be inserted as one shell word"):
        shell.render({"v": value})


def test_nul_in_a_value_is_refused() -> None:
    shell, _ = compile_template("echo {{ v }}", shell=True, fields_by_name={"v": None})
    with pytest.raises(TemplateValueError, match="NUL"):
        shell.render({"v": "a\0b"})


def test_loops_quote_each_item() -> None:
    shell, _ = compile_template(
        "touch{% for f in files %} {{ f }}{% endfor %}", shell=True, fields_by_name={"files": None}
    )
    assert shell.render({"files": ["a b", "c;d", "e"]}) == "touch 'a b' 'c;d' 'e'"


# Ways to smuggle a value out of its quoting, each found in review.  Every one
# must be a validation error, so the value can never run as code.
BYPASSES = [
    pytest.param("echo {{ \"}}'\" }} '{{ repo.repository }}'", "[quoted]", id="string-literal"),
    pytest.param(
        "echo {% raw %}{#{% endraw %}'{{ repo.repository }}'{% raw %}#}{% endraw %}",
        "[quoted]",
        id="raw-comment",
    ),
    pytest.param(
        'echo {% filter replace("\'", "") %}{{ repo.repository }}{% endfilter %}',
        "{% filter %} is not allowed",
        id="filter-block",
    ),
    pytest.param(
        "{% macro m() %}{{ caller() }}{% endmacro %}echo {{ repo.repository }}",
        "{% macro %} is not allowed",
        id="macro",
    ),
    pytest.param(
        "{% set s %}'{{ repo.repository }}'{% endset %}echo {{ s }}",
        "{% set %}...{% endset %} is not allowed",
        id="block-set",
    ),
    pytest.param("cat <<1\n{{ repo.repository }}\n1", "[quoted]", id="numeric-heredoc"),
    pytest.param(
        "cat <<EOF-1\nEOF\n{{ repo.repository }}\nEOF-1", "[heredoc]", id="heredoc-prefix"
    ),
    pytest.param("cat <<$END\n{{ repo.repository }}\n", "[syntax]", id="heredoc-unreadable"),
    pytest.param("echo $(( {{ repo.repository }} ))", "[arithmetic]", id="arithmetic"),
    pytest.param("(( {{ repo.repository }} > 0 ))", "[arithmetic]", id="arith-command"),
    pytest.param("[[ {{ repo.repository }} -eq 1 ]]", "[arithmetic]", id="double-bracket"),
    pytest.param("echo ${a[{{ repo.repository }}]}", "[arithmetic]", id="subscript"),
    pytest.param("eval {{ repo.repository }}", "[evaluating-builtin]", id="eval"),
    pytest.param("let n={{ repo.repository }}", "[evaluating-builtin]", id="let"),
    pytest.param("declare -i n={{ repo.repository }}", "[declaration]", id="declare"),
    pytest.param("local -i n={{ repo.repository }}", "[declaration]", id="local-i"),
    pytest.param("declare -i n\nn={{ repo.repository }}", "[declaration]", id="int-var"),
    # Found in the second review:
    pytest.param(
        "echo {% if repo.repository %}'{% else %}'{% endif %}{{ repo.repository }}'",
        "that a value decides",
        id="if-branches-each-open-a-quote",
    ),
    pytest.param(
        "echo {% for i in repo.repository %}'{% endfor %}'{{ repo.repository }}'",
        "[quoted]",
        id="loop-count-decides-quoting",
    ),
    pytest.param(
        "{% if repo.repository %}eval{% else %}echo{% endif %} {{ repo.repository }}",
        "that a value decides",
        id="branch-picks-the-command",
    ),
    pytest.param(
        'x="$(case a in a) echo "{{ repo.repository }}" ;; esac)"',
        "[quoted]",
        id="case-pattern-paren",
    ),
    pytest.param('echo ${x:-"}"} " {{ repo.repository }} "', "[quoted]", id="quote-in-expansion"),
    pytest.param("echo $[ {{ repo.repository }} ]", "[arithmetic]", id="old-arithmetic"),
    pytest.param("arr[{{ repo.repository }}]=1", "[arithmetic]", id="subscript"),
    pytest.param("command eval {{ repo.repository }}", "[evaluating-builtin]", id="command-eval"),
    pytest.param("ev''al {{ repo.repository }}", "[evaluating-builtin]", id="quoted-eval"),
    pytest.param("\\eval {{ repo.repository }}", "[evaluating-builtin]", id="escaped-eval"),
    pytest.param("time -p eval {{ repo.repository }}", "[evaluating-builtin]", id="time-eval"),
    pytest.param("trap {{ repo.repository }} EXIT", "[evaluating-builtin]", id="trap"),
    pytest.param("source <(echo {{ repo.repository }})", "[evaluating-builtin]", id="source"),
    pytest.param("printf -v {{ repo.repository }} x", "[printf-option]", id="printf-v"),
    pytest.param("read {{ repo.repository }}", "[evaluating-builtin]", id="read"),
    pytest.param("[ -v {{ repo.repository }} ]", "[test-operator]", id="test-v"),
    pytest.param(
        "cat <<E\\ OF\n'\nE OF\necho '{{ repo.repository }}'",
        "[heredoc]",
        id="heredoc-escaped-space",
    ),
    pytest.param("{{ repo.repository }} --version", "[command-name]", id="command-itself"),
    pytest.param("/usr/bin/{{ repo.repository }} x", "[command-name]", id="command-path"),
]


@pytest.mark.parametrize(("command", "message"), BYPASSES)
def test_quoting_bypasses_are_validation_errors(tmp_path, command, message) -> None:
    import json

    path = tmp_path / "agent.yaml"
    document = {
        "version": 1,
        "inputs": {
            "acme.repository": {
                "as": "repo",
                "schema": {"type": "object", "properties": {"repository": {"type": "string"}}},
            }
        },
        "agent": {
            "model": "m",
            "environment": {
                "sandbox": "local",
                "hooks": [{"name": "h", "on_create": [{"run": command}]}],
            },
        },
    }
    path.write_text(json.dumps(document))
    problems = validate_file(path)
    assert len(problems) >= 1
    assert message in problems[0].message
    assert problems[0].path == ("agent", "environment", "hooks", 0, "on_create", 0, "run")


@pytest.mark.parametrize(
    "command",
    [
        "[ {{ repo.repository }} = x ] && echo same",
        "cat <<< {{ repo.repository }}",
        'NAME={{ repo.repository }} && echo "$NAME"',
        'echo "$(basename {{ repo.repository }})"',
        "if true; then echo {{ repo.repository }}; fi",
        "{% for part in repo.repository|list %}echo {{ part }}\n{% endfor %}",
        "cat <<EOF > notes.md\nliteral text\nEOF\necho {{ repo.repository }}",
    ],
)
def test_plain_word_positions_are_accepted(tmp_path, command) -> None:
    assert check(tmp_path, "          - run: " + __import__("json").dumps(command) + "\n") == []


def test_template_sandbox_escapes_are_validation_errors(tmp_path) -> None:
    for expression in ("repo.__class__", "repo.mro()", "'{0}'.format(repo)", 'repo|attr("x")'):
        problems = check(
            tmp_path,
            "          - write: f\n            content: "
            + __import__("json").dumps("{{ " + expression + " }}")
            + "\n",
        )
        assert any("reaches outside the template sandbox" in p for p in problems), problems


def test_template_sandbox_escapes_raise_a_security_error_at_render() -> None:
    from runner.config.templates import _TEXT, Fields, TemplateSecurityError

    template = _TEXT.from_string("{{ getattr_target._data }}")
    with pytest.raises(TemplateSecurityError):
        template.render(getattr_target=Fields({"a": 1}))


def test_a_field_named_like_a_mapping_method_renders_the_field() -> None:
    text, _ = compile_template(
        "{{ repo.items }} {{ repo.keys }}", shell=False, fields_by_name={"repo": None}
    )
    assert text.render({"repo": Fields({"items": "a", "keys": "b"})}) == "a b"


@pytest.mark.parametrize(
    ("value", "word"),
    [(True, "'true'"), (False, "'false'"), (None, "''"), (-5, "'-5'"), (2.5, "'2.5'")],
)
def test_scalars_become_the_word_a_command_receives(value, word) -> None:
    # The no_leading_dash and scrubbing rules read values as this same text.
    shell, _ = compile_template("echo {{ v }}", shell=True, fields_by_name={"v": None})
    assert shell.render({"v": value}) == f"echo {word}"


def test_nul_in_a_write_or_env_value_is_refused() -> None:
    text, _ = compile_template("{{ v }}", shell=False, fields_by_name={"v": None})
    with pytest.raises(TemplateValueError, match="NUL"):
        text.render({"v": "a\0b"})


@pytest.mark.parametrize(
    "expression",
    [
        "repo._data",  # any underscore attribute, not only the listed ones
        'repo["_data"]',
        'repo["__class__"]',
        "repo.revision|lower }}{{ repo._data",  # a filter first must not end the scan
    ],
)
def test_private_attributes_are_validation_errors(tmp_path, expression) -> None:
    problems = check(
        tmp_path,
        "          - write: f\n            content: "
        + __import__("json").dumps("{{ " + expression + " }}")
        + "\n",
    )
    assert any("reaches outside the template sandbox" in p for p in problems), problems


#: Shell metacharacters first, so generated values are full of them: quotes,
#: `$` and `-` (at the start too), globs, separators, blanks, backslashes.
SHELL_ALPHABET = "$-'\"`\\ \t\n;&|<>()[]{}*?!~#=%^,.:/@+aZ9é☃"


# Fewer under mutmut (it runs this test once per mutant of the checker); the
# @example line holds the words a weak quoter gets wrong.
@settings(max_examples=30 if os.environ.get("MUTANT_UNDER_TEST") else 300, deadline=None)
@given(values=st.lists(st.text(alphabet=SHELL_ALPHABET, max_size=12), min_size=1, max_size=8))
@example(values=["$", "$$", "$-", "$?", "-n", "-e", "--", "-", "~", "*", "'", ""])
def test_any_value_is_one_quoted_word_that_bash_reads_back_whole(values) -> None:
    """Through the template path (compile, sentinel check, substitution): each
    value becomes exactly one single-quoted word, including `$`-only words and
    values starting with `-`, and bash receives it byte for byte."""
    shell, problems = compile_template(
        "printf '%s\\0'{% for v in values %} {{ v }}{% endfor %}",
        shell=True,
        fields_by_name={"values": None},
    )
    assert problems == []
    command = shell.render({"values": values})
    words = [("'" + v.replace("'", "'\"'\"'") + "'") for v in values]
    assert command == "printf '%s\\0' " + " ".join(words)
    received = subprocess.run(
        ["bash", "-c", command], capture_output=True, check=True, env={"LC_ALL": "C.UTF-8"}
    ).stdout
    assert received == b"".join(v.encode() + b"\0" for v in values)


def runner(tmp_path: Path, *args: str, token: str | None = None) -> tuple[int, str]:
    """The installed CLI's ``runner ARGS`` in ``tmp_path`` (``token``: the
    secret's ``RUNNER_TEST_TOKEN``): its exit status and its output."""
    env = {**os.environ, "RUNNER_TEST_TOKEN": token} if token else None
    result = subprocess.run(
        [*RUNNER_CLI, *args], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    return result.returncode, result.stdout + result.stderr


# --- review 20's G5: a value that chooses how a secret file is printed ---------------


@pytest.mark.parametrize(
    ("source", "value", "refused"),
    [
        ("grep -rn {{ x.q }} .", "-ohe.", True),  # -o -h -e .: the secret, a char a line
        ('p={{ x.q }}; grep -rn "$p" .', "-ohe.", True),
        ("wc {{ x.q }}", "--files0-from=list", True),
        ("grep -rn -- {{ x.q }} .", "-ohe.", False),  # after --, an operand
        ("grep -rn --regexp={{ x.q }} .", "-ohe.", False),  # the option's own value
        ("grep -rn {{ x.q }} .", "hello", False),
        ("echo {{ x.q }}", "-e", False),  # a builtin: no options that open files
    ],
)
def test_a_value_may_not_start_a_programs_option(source, value, refused) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == []
    if refused:
        with pytest.raises(UnsafeTemplateError, match="read as an option"):
            template.render({"x": Fields({"q": value})})
    else:
        template.render({"x": Fields({"q": value})})


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("od -An -c {{ x.q }}", ".netrc"),
        ("od -An -c {{ x.q }}", "./sub/.netrc"),
        ('read -r a f <<< {{ x.q }}; rev "$f"', "x .NETRC"),
        ('p={{ x.q }}; tac "$p"', ".netrc/"),
    ],
)
def test_a_value_may_not_name_a_secret_file_for_a_program_to_read(source, value) -> None:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == []
    with pytest.raises(UnsafeTemplateError, match="names a secret's file"):
        template.render({"x": Fields({"q": value})}, secret_files={"/w/.netrc"})
    template.render({"x": Fields({"q": value})})  # no secret file: nothing to refuse
    template.render({"x": Fields({"q": "notes.txt"})}, secret_files={"/w/.netrc"})


@pytest.mark.parametrize(
    ("run", "value"),
    [
        ("od -An -c {{ x.f }}", '{"f": ".netrc"}'),
        ("grep -rn {{ x.f }} .", '{"f": "-ohe."}'),
        # review 49: G3 (empty text before the value), G1 (glued to -rn), G2 (-r over .)
        ('grep -rn ""{{ x.f }} .', '{"f": "-ohe."}'),
        ("grep -rn{{ x.f }} -- TODO .", '{"f": "hoe."}'),
        ("grep -rno -- {{ x.f }} .", '{"f": "."}'),
    ],
)
def test_a_value_cannot_print_a_secret_file_through_the_installed_cli(
    tmp_path: Path, run: str, value: str
) -> None:
    """G5 end to end (the review's S1 and S2): without the checks, the secret
    comes out one character at a time, past the scrubber."""
    path = one_step_agent(
        tmp_path,
        run,
        before=[{"secret_file": ".netrc", "secret": "tok"}],
        top={"secrets": {"tok": {"from_env": "RUNNER_TEST_TOKEN"}}},
    )
    status, output = runner(
        tmp_path, "run", str(path), "--input", f"acme.x={value}", token="hunter2secret"
    )
    assert status == 2, output
    assert "h   u   n   t" not in output and ":h\n" not in output and "\nu\n" not in output


@pytest.mark.parametrize(("content", "refused"), [("t={{ s.token }}\n", True), ("hi\n", False)])
def test_a_value_cannot_print_a_file_a_write_step_filled_from_a_secret_input(
    tmp_path: Path, content: str, refused: bool
) -> None:
    """Review 22's I5 (its t/W1): a ``write:`` whose content reads a secret
    input fills a file as secret as a ``secret_file:``; ``od -c {{ f }}``
    naming it printed the token a character at a time.  A ``write:`` of
    other text stays readable."""
    path = one_step_agent(
        tmp_path,
        "od -An -c -- {{ x.f }}",
        before=[{"write": "npmrc.txt", "content": content}],
        top={
            "inputs": {
                "acme.x": {"as": "x", "schema": {"type": "object"}},
                "acme.s": {"as": "s", "secret": True, "schema": {"type": "object"}},
            }
        },
    )
    status, output = runner(
        tmp_path,
        *("run", str(path)),
        *("--input", 'acme.x={"f": "npmrc.txt"}'),
        *("--input", 'acme.s={"token": "hunter2secret"}'),
    )
    assert "h   u   n   t" not in output
    if refused:
        assert status == 2, output
        assert "a write: step filled from a secret" in output
    else:
        assert status == 0, output  # the step ran: od read the file


@pytest.mark.parametrize(("name", "refused"), [("tok.txt", True), ("notes.txt", False)])
def test_a_value_cannot_print_the_host_file_of_a_from_file_secret(
    tmp_path: Path, name: str, refused: bool
) -> None:
    """Review 23's J1 (its t/F1): on the local sandbox a value named the
    host file a ``from_file:`` secret is read from, and ``od -c`` printed
    it past the scrubber.  Another file of the folder stays readable."""
    (tmp_path / "tok.txt").write_text("hunter2secret\n")
    (tmp_path / "notes.txt").write_text("hi\n")
    path = one_step_agent(
        tmp_path,
        "od -An -c -- {{ x.f }}",
        top={"secrets": {"tok": {"from_file": "tok.txt"}}},
    )
    value = json.dumps({"f": str(tmp_path / name)})
    status, output = runner(tmp_path, "run", str(path), "--input", f"acme.x={value}")
    assert "h   u   n   t" not in output
    assert status == (2 if refused else 0), output
    assert ("a value names a secret's file" in output) is refused


@pytest.mark.parametrize(
    ("source", "value", "refused"),
    [
        ("cd -- {{ x.d }} && rev -- *.txt", "creds", True),
        ("cd -- {{ x.d }} && rev -- *.txt", "./creds/", True),
        ("pushd -- {{ x.d }} && od -c -- token.txt", "creds", True),
        ("cd -- {{ x.d }} && rev -- *.txt", "out", False),
    ],
)
def test_a_value_may_not_cd_into_a_secret_files_directory(source, value, refused) -> None:
    """Review 23's J2: the value chose the directory, the template's own
    glob or name read the secret file there."""
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    render = functools.partial(
        template.render, {"x": Fields({"d": value})}, secret_files={"creds/token.txt"}
    )
    if refused:
        with pytest.raises(UnsafeTemplateError, match="directory that holds a secret"):
            render()
    else:
        render()
    template.render({"x": Fields({"d": value})})  # no secret file: nothing to refuse


@pytest.mark.parametrize(
    ("source", "value", "refused"),
    [
        ("ln -sf npmrc.txt view.txt && od -An -c -- {{ x.f }}", "view.txt", True),
        # the value chose where the secret's copy goes: named for cp to open
        ("cp -- npmrc.txt {{ x.g }} && echo {{ x.f }}", "c.txt", True),
        ("ln -sf npmrc.txt view.txt && od -An -c -- {{ x.f }}", "other.txt", False),
    ],
)
def test_a_copy_or_link_of_a_secret_file_is_a_secret_file(source, value, refused) -> None:
    """Review 23's J4: ``ln -s npmrc.txt view.txt``, then a value names the link."""
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    copies: set[str] = set()
    render = functools.partial(
        template.render,
        {"x": Fields({"f": value, "g": value})},
        secret_files={"/w/npmrc.txt"},
        copies=copies,
    )
    if refused:
        with pytest.raises(UnsafeTemplateError, match="names a secret's file"):
            render()
    else:
        render()
    assert copies == ({value} if "cp" in source else {"view.txt"})


def test_a_link_or_copy_of_a_secret_files_directory_or_of_proc_is_tracked() -> None:
    """Review 24's K2: ``ln -sfn creds view`` (or ``cp -r``, ``mv``), then
    ``cd {{ d }}`` with ``view``; ``ln -sfn /proc/self me``, then ``od -c
    {{ f }}`` with ``me/environ``; ``cd -`` goes where the check cannot see."""
    copies: set[str] = set()
    for script in ("ln -sfn creds view", "cp -r -- creds backup", "ln -sfn /proc/self me"):
        template, _ = compile_template(script, shell=True, fields_by_name={})
        template.render({}, secret_files={"creds/token.txt"}, copies=copies)
    assert copies == {"view/token.txt", "backup/token.txt", "me/environ"}
    secret_files = {"creds/token.txt", *copies}
    cd, _ = compile_template(
        "cd -- {{ x.d }} && rev -- *.txt", shell=True, fields_by_name={"x": None}
    )
    for value in ("view", "backup", "-", "+1", "me"):
        with pytest.raises(UnsafeTemplateError, match="directory that holds a secret"):
            cd.render({"x": Fields({"d": value})}, secret_files=secret_files)
    cd.render({"x": Fields({"d": "out"})}, secret_files=secret_files)
    od, _ = compile_template("od -An -c -- {{ x.f }}", shell=True, fields_by_name={"x": None})
    with pytest.raises(UnsafeTemplateError, match="names a secret's file"):
        od.render({"x": Fields({"f": "me/environ"})}, secret_files=secret_files)


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("grep -o -- {{ x.k }} npmrc.txt", True),
        ("fold -w {{ x.k }} npmrc.txt", True),
        ("cat npmrc.txt | fold -w {{ x.k }}", True),
        ("fold -w {{ x.k }} < npmrc.txt", True),
        # review 40's F5: the redirect on a group around it, or an exec's descriptor
        ("{ fold -w {{ x.k }}; } < npmrc.txt", True),
        ("exec 3< npmrc.txt\nfold -w {{ x.k }} <&3", True),
        ("if true; then fold -w {{ x.k }}; fi < npmrc.txt", True),
        # review 43: the value in a variable, a glob, the file in a variable,
        # an exec behind command or builtin
        ('w={{ x.k }}\nfold -w "$w" npmrc.txt', True),
        ("fold -w {{ x.k }} -- *.txt", True),
        ('f=npmrc.txt\nfold -w {{ x.k }} -- "$f"', True),
        ('for f in npmrc.txt; do fold -w {{ x.k }} -- "$f"; done', True),
        ("command exec 3< npmrc.txt\nfold -w {{ x.k }} <&3", True),
        # review 51: the name after an expansion (F3), in braces (F4), and
        # the file's text carried in a variable (F5)
        ('fold -w {{ x.k }} "$PWD/npmrc.txt"', True),
        ('fold -w {{ x.k }} -- "${PWD}"/npmrc.txt', True),
        ("fold -w {{ x.k }} npm{rc,}.txt", True),
        ("cat {npmrc.txt,} 2>/dev/null | fold -w {{ x.k }}", True),
        ('read -r l < npmrc.txt; fold -w {{ x.k }} <<< "$l"', True),
        ('l=$(cat npmrc.txt); fold -w {{ x.k }} <<< "$l"', True),
        ('mapfile -t a < npmrc.txt; printf "%s\\n" "${a[@]}" | fold -w {{ x.k }}', True),
        # review 52: a name a program opens that the script builds at run time
        ('f=npm; g=rc.txt; fold -w {{ x.k }} "$f$g"', True),
        ('f=npm; fold -w {{ x.k }} -- "${f}rc.txt"', True),
        ('f=xnpmrc.txt; fold -w {{ x.k }} "${f#x}"', True),
        ('f=NPMRC.TXT; fold -w {{ x.k }} "${f,,}"', True),
        ('fold -w {{ x.k }} "$F"', True),  # a plain env: value
        ('fold -w {{ x.k }} < "$F"', True),
        ('x=$(date); echo {{ x.k }} "$x"', False),
        ('fold -w {{ x.k }} "$PWD/notes.txt"', False),
        ('echo {{ x.k }} "$HOME"', False),
        ("cat npmrc.txt > /dev/null && echo {{ x.k }}", False),
        ('w={{ x.k }}\nfold -w 3 notes.txt; echo "$w"', False),
        ("fold -w {{ x.k }} notes.txt", False),
    ],
)
def test_a_value_may_not_choose_how_a_secret_file_is_printed(source, refused) -> None:
    """Review 24's K7: a fixed read of a secret's file beside a value."""
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    render = functools.partial(
        template.render, {"x": Fields({"k": "1"})}, secret_files={"/w/npmrc.txt"}
    )
    if refused:
        with pytest.raises(UnsafeTemplateError, match="holds a value names a secret's file"):
            render()
    else:
        render()


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        # review 49's G2: grep -r over the working folder, with a value's pattern
        ("grep -rno -- {{ x.k }} .", True),
        ("grep -Rn -- {{ x.k }}", True),  # no folder: the working one
        ("grep -n --recursive -- {{ x.k }} ./", True),
        ("command grep -r -- {{ x.k }} ..", True),
        ('q={{ x.k }}\ngrep -rno -- "$q" .', True),
        ("diff -r -W {{ x.k }} -y . other", True),
        ("cp -r . /tmp/c | grep -o -- {{ x.k }}", True),
        # review 51's F2: any folder, since a link may lead anywhere
        ("ln -s . all && grep -rno -- {{ x.k }} all", True),
        ("grep -rn -- {{ x.k }} src/", True),
        # review 51's F1: abbreviations, -d ACTION, an action the value chooses
        ("grep --recur -o -- {{ x.k }} .", True),
        ("grep --deref -o -- {{ x.k }} .", True),
        ("grep -d recurse -o -- {{ x.k }} .", True),
        ("grep --dir=rec -o -- {{ x.k }} .", True),
        ("grep -o -e {{ x.k }} -d {{ x.w }} < src/a.txt", True),
        ("grep -o -e {{ x.k }} --directories={{ x.w }} < src/a.txt", True),
        ("wc -c --files0-from=list | grep -o -- {{ x.k }}", True),
        ("grep -n -- {{ x.k }} src/a.py", False),
        ("grep -n --regexp={{ x.k }} src/a.py", False),
        ("cp -- {{ x.k }} out/", False),
    ],
)
def test_a_value_beside_a_recursive_reader_of_a_secret_files_folder_is_refused(
    source, refused
) -> None:
    """Review 49's G2: ``grep -rno -- {{ q }} .`` with ``.`` printed a
    ``secret_file:`` one character a line: the folder holds the file, and
    the value chose how its text is printed.  Any folder (review 51's F2:
    a link to ``.``), and grep's every spelling of recursion (F1)."""
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert problems == [], problems
    values = {"x": Fields({"k": ".", "w": "recurse"})}
    render = functools.partial(template.render, values, secret_files={"/w/keys/npmrc.txt"})
    if refused:
        with pytest.raises(UnsafeTemplateError, match="reads folders recursively"):
            render()
    else:
        render()
    template.render(values)  # no secret file: nothing to refuse


@pytest.mark.parametrize(
    "source",
    [
        'grep -rno -e "$Q" .',  # review 51's F6: review 49's G2 through env:
        'grep -o -e "$Q" -- npmrc.txt',  # K7 itself
        'fold -w "$Q" -- npmrc.txt',
    ],
)
def test_a_templated_env_value_may_not_choose_how_a_secret_file_is_printed(source) -> None:
    """Review 51's F6: a step's templated ``env:`` value is a value for K7
    and the recursive-reader rule too."""
    template, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, tainted_env=["Q"], exported_env=["Q"]
    )
    assert problems == [], problems
    with pytest.raises(
        UnsafeTemplateError, match="names a secret's file|reads folders recursively"
    ):
        template.render({}, env={"Q": "."}, secret_files={"/w/npmrc.txt"})
    template.render({}, env={"Q": "."})  # no secret file: nothing to refuse


def test_a_secret_file_path_may_not_come_from_an_input(tmp_path: Path) -> None:
    """Review 24's K6: ``secret_file: "{{ x.p }}"`` chose where the secret
    lands, and the step's fixed ``od -c notes.txt`` printed it."""
    path = one_step_agent(
        tmp_path,
        "od -An -c notes.txt",
        before=[{"secret_file": "{{ x.p }}", "secret": "tok"}],
        top={"secrets": {"tok": {"from_env": "RUNNER_TEST_TOKEN"}}},
    )
    status, output = runner(tmp_path, "validate", str(path))
    assert status == 2, output
    assert "secret_file: path may not hold an input's value" in output


def test_an_upload_may_not_copy_a_from_file_secrets_file(tmp_path: Path) -> None:
    """Review 24's K5: ``upload: tok.txt`` (the from_file: secret's file) to
    data.bin, then ``od -c`` of it."""
    (tmp_path / "tok.txt").write_text("hunter2secret\n")
    path = one_step_agent(
        tmp_path,
        "od -An -c data.bin",
        before=[{"upload": "{{ x.src }}", "to": "data.bin"}],
        top={"secrets": {"tok": {"from_file": "tok.txt"}}},
    )
    status, output = runner(tmp_path, "run", str(path), "--input", 'acme.x={"src": "tok.txt"}')
    assert "h   u   n   t" not in output
    assert status != 0 and "is the file a from_file: secret is read" in output, output


@pytest.mark.parametrize(("value", "refused"), [("creds/token.txt", True), ("notes.txt", False)])
def test_a_value_may_not_save_a_secret_file_in_clear(tmp_path: Path, value, refused) -> None:
    """Review 24's F1: ``save: "{{ x.f }}"`` with a secret_file's path put the
    secret in clear in the output directory."""
    path = one_step_agent(
        tmp_path,
        "echo hi > notes.txt",
        before=[
            {"run": "mkdir -p creds"},
            {"secret_file": "creds/token.txt", "secret": "tok"},
        ],
        top={"secrets": {"tok": {"from_env": "RUNNER_TEST_TOKEN"}}},
    )
    document = json.loads(path.read_text())
    steps = document["agent"]["environment"]["hooks"][0]["on_create"]
    steps.append({"save": "{{ x.f }}", "to": "saved.txt"})
    path.write_text(json.dumps(document))
    status, output = runner(
        tmp_path,
        *("run", str(path)),
        *("--input", "acme.x=" + json.dumps({"f": value})),
        *("--output-dir", str(tmp_path / "out")),
        token="hunter2secret",
    )
    saved = tmp_path / "out" / "saved.txt"
    assert not (saved.exists() and "hunter2" in saved.read_text())
    if refused:
        assert status != 0 and "names a secret's file" in output, output
    else:
        assert status == 0 and saved.read_text() == "hi\n", output


def test_a_link_an_earlier_step_made_to_a_secret_file_stays_secret(tmp_path: Path) -> None:
    """Review 23's J4 end to end (its t/W8): a step without values links the
    secret ``write:``'s file; a later step's value names the link."""
    path = one_step_agent(
        tmp_path,
        "od -An -c -- {{ x.f }}",
        before=[
            {"write": "npmrc.txt", "content": "t={{ s.token }}\n"},
            {"run": "ln -s npmrc.txt link.txt"},
        ],
        top={
            "inputs": {
                "acme.x": {"as": "x", "schema": {"type": "object"}},
                "acme.s": {"as": "s", "secret": True, "schema": {"type": "object"}},
            }
        },
    )
    status, output = runner(
        tmp_path,
        *("run", str(path)),
        *("--input", 'acme.x={"f": "link.txt"}'),
        *("--input", 'acme.s={"token": "hunter2secret"}'),
    )
    assert "h   u   n   t" not in output
    assert status == 2 and "names a secret's file" in output, output


def test_a_value_chosen_cwd_may_not_be_a_secret_files_directory(tmp_path: Path) -> None:
    """Review 23's J2 end to end (its t/C2): a step's ``cwd: "{{ x.d }}"``."""
    path = one_step_agent(
        tmp_path,
        "od -An -c -- *.txt",
        cwd="{{ x.d }}",
        before=[
            {"run": "mkdir -p creds"},
            {"secret_file": "creds/token.txt", "secret": "tok"},
        ],
        top={"secrets": {"tok": {"from_env": "RUNNER_TEST_TOKEN"}}},
    )
    status, output = runner(
        tmp_path, "run", str(path), "--input", 'acme.x={"d": "creds"}', token="hunter2secret"
    )
    assert "h   u   n   t" not in output
    assert status == 2 and "directory that holds a secret" in output, output


@pytest.mark.parametrize(
    ("source", "env", "message"),
    [
        ('printf "%s\\n" {{ x.q }} | tee -- "$OUT"', {"OUT": "/etc/profile.d/z.sh"}, "system"),
        ('cd -- "$D" && od -An -c -- {{ x.q }}', {"D": "/dev"}, "cd goes"),
        ('od -An -c "/pr$D"{{ x.q }}', {"D": "oc/self/"}, "/proc"),
        ('grep -n "$D" notes.txt ; echo {{ x.q }}', {"D": "-ohe."}, "read as an option"),
        ('od -An -c "$D"; echo {{ x.q }}', {"D": "sub/.netrc"}, "secret_file"),
    ],
)
def test_a_templated_env_value_is_checked_where_the_script_uses_it(source, env, message) -> None:
    """Review 22's I2: a templated ``env:`` value was checked alone (/proc,
    TMPDIR...), not in the word the script used it in."""
    template, problems = compile_template(
        source,
        shell=True,
        fields_by_name={"x": None},
        tainted_env=list(env),
        exported_env=list(env),
    )
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match=message):
        template.render({"x": Fields({"q": "environ"})}, env=env, secret_files={"/w/.netrc"})
    template.render({"x": Fields({"q": "notes"})}, env=dict.fromkeys(env, "out/notes.txt"))


def test_a_glob_beside_a_value_may_not_reach_a_secret_file() -> None:
    """Review 22's I4: ``od -c {{ dir }}/*.txt`` with a secret_file creds/token.txt."""
    template, _ = compile_template(
        "od -An -c -- {{ x.q }}/*.txt", shell=True, fields_by_name={"x": None}
    )
    with pytest.raises(UnsafeTemplateError, match="secret_file"):
        template.render({"x": Fields({"q": "creds"})}, secret_files={"creds/token.txt"})
    template.render({"x": Fields({"q": "creds"})}, secret_files={"creds/token.pem"})


def test_bashs_length_expansion_gets_a_hint_and_works_inside_raw() -> None:
    """Review 23's U1: ``${#x}`` opens a Jinja comment; the error says what to write."""
    _, problems = compile_template("echo ${#X} {{ x.v }}", shell=True, fields_by_name={"x": None})
    assert len(problems) == 1 and "{% raw %}" in problems[0].message, problems
    assert problems[0].message.startswith("template syntax: Missing end of comment tag; ")
    template, problems = compile_template(
        '{% raw %}n=${#X}{% endraw %}; echo "$n" {{ x.v }}', shell=True, fields_by_name={"x": None}
    )
    assert problems == [], problems
    assert template.render({"x": Fields({"v": "a"})}) == "n=${#X}; echo \"$n\" 'a'"


def test_every_directory_on_a_secret_files_path_counts() -> None:
    """``creds/sub/token.txt``: ``cd {{ d }}`` with ``sub`` or ``creds`` is refused."""
    template, _ = compile_template(
        "cd -- {{ x.d }} && od -c -- *.txt", shell=True, fields_by_name={"x": None}
    )
    for value in ("sub", "creds"):
        with pytest.raises(UnsafeTemplateError, match="directory that holds a secret"):
            template.render({"x": Fields({"d": value})}, secret_files={"creds/sub/token.txt"})


def test_read_without_r_drops_backslashes_before_the_secret_file_check() -> None:
    """``read`` without ``-r`` turns ``.ne\\trc`` into ``.netrc``."""
    template, problems = compile_template(
        'read a f <<< {{ x.q }}; rev "$f"', shell=True, fields_by_name={"x": None}
    )
    assert problems == [], problems
    with pytest.raises(UnsafeTemplateError, match="names a secret's file"):
        template.render({"x": Fields({"q": "x .ne\\trc"})}, secret_files={"/w/.netrc"})


def test_a_quoted_tilde_is_a_plain_directory_name() -> None:
    """``cd -- '~'`` goes to a directory named ``~``, not a home."""
    template, _ = compile_template("cd -- {{ x.d }} && pwd", shell=True, fields_by_name={"x": None})
    assert template.render({"x": Fields({"d": "~"})}) == "cd -- '~' && pwd"


def test_a_value_may_not_write_among_the_runners_home_dot_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    template, _ = compile_template(
        "printf '%s' {{ x.v }} > {{ x.d }}", shell=True, fields_by_name={"x": None}
    )
    with pytest.raises(UnsafeTemplateError, match="where a file is written"):
        template.render({"x": Fields({"v": "a", "d": f"{tmp_path}/.bashrc"})})
    template.render({"x": Fields({"v": "a", "d": f"{tmp_path}/notes.txt"})})


def test_a_safe_templated_tmpdir_passes_and_an_unsafe_one_is_refused() -> None:
    from runner.config.templates import refuse_unsafe_env_values

    refuse_unsafe_env_values({"TMPDIR": "out/tmp"}, ["TMPDIR"])
    with pytest.raises(UnsafeTemplateError):
        refuse_unsafe_env_values({"TMPDIR": "/etc/profile.d"}, ["TMPDIR"])


def test_the_option_refusals_say_what_happened() -> None:
    """A piece ``read`` cut from a value, and a value itself, before ``--``."""
    for source, value in (
        ('read -r q <<< {{ x.q }}; grep -rn "$q" .', "-ohe."),
        ("grep -rn {{ x.q }} .", "-ohe."),
    ):
        template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
        assert problems == [], problems
        with pytest.raises(
            UnsafeTemplateError,
            match="^run command refused before it ran: a value that starts with - reaches",
        ):
            template.render({"x": Fields({"q": value})})


def test_a_system_destination_refusal_names_the_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    template, _ = compile_template(
        "printf '%s' {{ x.v }} > {{ x.d }}", shell=True, fields_by_name={"x": None}
    )
    with pytest.raises(
        UnsafeTemplateError,
        match=r"\(/etc, /usr, /lib...\), a directory on PATH or a dot-file of HOME, or climbing with \.\.; write under the workspace",
    ):
        template.render({"x": Fields({"v": "a", "d": "/etc/ld.so.preload"})})


# --- review 25's A1: a value that chooses where a saved file lands on the host -------


def save_agent(tmp_path: Path, to: str) -> Path:
    """One step writes the value's body; ``on_destroy`` saves it ``to:``."""
    path = one_step_agent(tmp_path, "printf '%s\\n' {{ x.body }} > report.txt")
    document = json.loads(path.read_text())
    hook = document["agent"]["environment"]["hooks"][0]
    hook["on_destroy"] = [{"save": "report.txt", "to": to}]
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("to", ["{{ x.name }}", "./{{ x.name }}"])
def test_a_value_may_not_name_a_saved_file_at_the_output_folders_top(
    tmp_path: Path, to: str
) -> None:
    """The review's t/A1: ``to: "{{ x.name }}"`` with a venv's
    ``site-packages/x.pth`` ran the body as Python on the next ``runner``
    (review 26's A1b: ``./`` before it)."""
    status, output = runner(tmp_path, "validate", str(save_agent(tmp_path, to)))
    assert status == 2, output
    assert "agent.yaml:" in output and "inside a folder the template names" in output
    assert "on_destroy[0].to" in output


@pytest.mark.parametrize(
    ("name", "landed"),
    [("a/.git/config", None), (".pth-dir/x.pth", None), ("pr-12/report.md", "pr-12/report.md")],
)
def test_a_value_may_not_choose_a_dot_folder_or_name_on_the_host(
    tmp_path: Path, name: str, landed: str | None
) -> None:
    path = save_agent(tmp_path, "saved/{{ x.name }}")
    out = tmp_path / "out"
    value = json.dumps({"name": name, "body": "[core]\n\tfsmonitor = touch PWNED"})
    status, output = runner(
        tmp_path, "run", str(path), "--input", f"acme.x={value}", "--output-dir", str(out)
    )
    saved = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    if landed is None:
        assert status != 0 and "which a value may not choose on the host" in output, output
        assert saved == []
    else:
        assert status == 0, output
        assert saved == [f"saved/{landed}"]


def test_an_upload_may_not_read_a_dot_file_a_value_names(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / ".env").write_text("TOKEN=hunter2secret\n")
    path = one_step_agent(
        tmp_path, "cat -- data.txt", before=[{"upload": "files/{{ x.f }}", "to": "data.txt"}]
    )
    status, output = runner(tmp_path, "run", str(path), "--input", 'acme.x={"f": ".env"}', "-v")
    assert status != 0 and "which a value may not choose on the host" in output, output
    assert "hunter2secret" not in output


def test_a_host_path_may_not_be_made_from_a_secret(tmp_path: Path) -> None:
    """Review 30's O1: ``to: "saved/{{ s.tok }}.txt"`` wrote the secret as a
    file's name on the host, where nothing masks it."""
    path = save_agent(tmp_path, "saved/{{ s.tok }}.txt")
    document = json.loads(path.read_text())
    document["inputs"]["acme.s"] = {"as": "s", "secret": True, "schema": {"type": "object"}}
    path.write_text(json.dumps(document))
    status, output = runner(tmp_path, "validate", str(path))
    assert status == 2, output
    assert "a host path may not be made from a secret input" in output


@pytest.mark.parametrize("home", ["$HOME", "${HOME}", "~"])
def test_a_value_may_not_choose_a_file_in_home(home) -> None:
    """Review 38's F1: the render read ``"$HOME"/'.jq'`` as a relative path;
    a value may not choose a dot-file of the sandbox's HOME however it is
    spelled."""
    from runner.config.templates import is_safe_destination

    assert not is_safe_destination(f"{home}/.jq")
    assert not is_safe_destination(f"{home}/.bashrc")
    assert is_safe_destination("out/.jq")


@pytest.mark.parametrize(
    ("source", "refused_at"),
    [
        # review 49's G3: text before the value that bash makes empty
        ('grep -rn ""{{ x.q }} .', "render"),
        ("grep -rn ''{{ x.q }} .", "render"),
        ('e=; grep -rn "$e"{{ x.q }} .', "render"),
        ("e=''; grep -rn \"$e\"{{ x.q }} .", "render"),
        ('grep -rn "${e:-}"{{ x.q }} .', "validate"),
        ('grep -rn "$(true)"{{ x.q }} .', "validate"),
        # review 49's G1: the value glued to options adds its own letters
        ("grep -rn{{ x.q }} -- TODO .", "validate"),
        ("grep --re{{ x.q }} .", "validate"),
        ('e=-rn; grep "$e"{{ x.q }} .', "validate"),
        ("e='-rn'; grep \"$e\"{{ x.q }} .", "validate"),
        # accepted: fixed text that is no option first, an option's own value after =
        ("grep -rn x{{ x.q }} .", None),
        ("grep -rn --regexp={{ x.q }} .", None),
        ('d=/; od -An -c "$d"{{ x.q }}', None),
        ("grep -rn -- ''{{ x.q }} .", None),
    ],
)
def test_a_value_glued_to_an_option_or_after_empty_text_is_refused(source, refused_at) -> None:
    """Review 49's G1 and G3: with ``-ohe.`` (or ``hoe.`` after ``-rn``)
    grep printed a secret file one character a line, as in G5."""
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    if refused_at == "validate":
        assert template is None and any("[glued-option]" in p.message for p in problems), problems
        return
    assert problems == [], problems
    if refused_at == "render":
        with pytest.raises(UnsafeTemplateError, match="read as an option"):
            template.render({"x": Fields({"q": "-ohe."})})
    else:
        template.render({"x": Fields({"q": "-ohe."})})
    template.render({"x": Fields({"q": "TODO"})})
