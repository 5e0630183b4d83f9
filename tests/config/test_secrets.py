"""secrets: read from the host, handed to steps as env vars or files, never shown.

Where a secret comes from (the environment or a file; missing, empty, too big,
not a file, outside its folder) is tested in-process, through
``secrets_input_class``, so mutation testing sees it (``scripts/mutate
secrets``); what a run does with it, through ``runner`` itself.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
from agent_files import one_step_agent
from conftest import RUNNER_CLI
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scale import scaled

from runner.config import validate_file
from runner.config.secrets import MAX_SECRET_BYTES, SECRETS_INPUT_ID, secrets_input_class
from runner.core.errors import SessionInputError

# --- where a secret comes from, in-process ---------------------------------------


def provide(specs, config_dir):
    return secrets_input_class(specs, config_dir).__provide__()


def refusal(specs, config_dir) -> SessionInputError:
    with pytest.raises(SessionInputError) as caught:
        provide(specs, config_dir)
    assert caught.value.input_id == SECRETS_INPUT_ID
    return caught.value


def test_the_class_is_a_secret_input_with_one_string_field_per_secret(tmp_path) -> None:
    cls = secrets_input_class(
        {"token": {"from_env": "T"}, "key": {"from_file": "k", "required": False}}, tmp_path
    )
    assert cls.input_id == SECRETS_INPUT_ID == "runner.secrets"
    assert cls.__name__ == "Secrets"
    assert cls.__secret__ is True
    schema = cls.json_schema()
    assert schema["properties"] == {"token": {"type": "string"}, "key": {"type": "string"}}
    assert schema["required"] == ["token"]  # "required" defaults to true
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


def test_a_secret_from_the_environment_is_read_at_provide_time(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MH_TOKEN", "s3cr3t value\n")
    assert provide({"token": {"from_env": "MH_TOKEN"}}, tmp_path) == {"token": "s3cr3t value\n"}


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_required_env_secret_that_is_unset_or_empty_is_refused(tmp_path, monkeypatch, value):
    monkeypatch.delenv("MH_TOKEN", raising=False)
    if value is not None:
        monkeypatch.setenv("MH_TOKEN", value)
    error = refusal({"token": {"from_env": "MH_TOKEN"}}, tmp_path)
    assert str(error) == (
        "secret 'token' is required but the environment variable MH_TOKEN is not set"
    )


def test_an_optional_secret_that_is_missing_is_left_out(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MH_TOKEN", raising=False)
    monkeypatch.setenv("MH_OTHER", "x")
    specs = {
        "token": {"from_env": "MH_TOKEN", "required": False},
        "file": {"from_file": "absent", "required": False},
        "other": {"from_env": "MH_OTHER"},
    }
    assert provide(specs, tmp_path) == {"other": "x"}


def test_a_secret_file_loses_one_trailing_newline_only(tmp_path) -> None:
    (tmp_path / "one").write_text("tok\n")
    (tmp_path / "two").write_text("tok\n\n")
    (tmp_path / "none").write_text("tok")
    specs = {name: {"from_file": name} for name in ("one", "two", "none")}
    assert provide(specs, tmp_path) == {"one": "tok", "two": "tok\n", "none": "tok"}


def test_a_secret_file_is_read_relative_to_the_config_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k").write_text("folder")
    monkeypatch.chdir(tmp_path / "keys")  # a path relative to the cwd would find nothing
    assert provide({"k": {"from_file": "keys/k"}}, tmp_path) == {"k": "folder"}


def test_a_missing_required_secret_file_is_refused_by_name(tmp_path) -> None:
    error = refusal({"key": {"from_file": "absent.txt"}}, tmp_path)
    assert str(error) == "secret 'key' is required but the file absent.txt is not set"


def test_a_secret_file_of_exactly_the_limit_is_read_one_byte_more_is_refused(tmp_path) -> None:
    (tmp_path / "full").write_bytes(b"a" * MAX_SECRET_BYTES)
    (tmp_path / "over").write_bytes(b"a" * (MAX_SECRET_BYTES + 1))
    assert MAX_SECRET_BYTES == 1_000_000  # the documented 1 MB
    assert provide({"s": {"from_file": "full"}}, tmp_path) == {"s": "a" * MAX_SECRET_BYTES}
    error = refusal({"s": {"from_file": "over"}}, tmp_path)
    assert str(error).startswith("secret 's': cannot read over: ")
    assert "larger than 1000000 bytes" in str(error)


def test_a_secret_file_that_is_a_fifo_is_refused_without_waiting(tmp_path) -> None:
    os.mkfifo(tmp_path / "pipe")
    error = refusal({"s": {"from_file": "pipe"}}, tmp_path)
    assert "not a regular file" in str(error)


@pytest.mark.parametrize("path", ["../outside", "/etc/hostname", "~/x", "a/../../b"])
def test_a_secret_file_outside_the_folder_is_refused(tmp_path, path) -> None:
    error = refusal({"s": {"from_file": path}}, tmp_path)
    assert str(error).startswith(f"secret 's': cannot read {path}: secret 's': ")


def test_a_secret_file_that_is_a_symlink_out_of_the_folder_is_refused(tmp_path) -> None:
    (tmp_path / "outside").write_text("host secret")
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "link").symlink_to(tmp_path / "outside")
    error = refusal({"s": {"from_file": "link"}}, config_dir)
    assert "leads outside" in str(error)
    assert "host secret" not in str(error)


def test_a_secret_file_that_is_not_utf8_is_kept_as_its_bytes(tmp_path) -> None:
    """A binary key is read as it is (issue 25, item 8): its bytes that are not
    UTF-8 are surrogate-escaped, as Python reads such an environment variable,
    so a step gets the original bytes back and scrubbing can match them.  It
    used to be refused with a UnicodeDecodeError."""
    (tmp_path / "bin").write_bytes(b"k\xff\xfe-key\x80\n")
    (value,) = provide({"s": {"from_file": "bin"}}, tmp_path).values()
    assert value == "k\udcff\udcfe-key\udc80"  # one trailing newline dropped, as for text
    assert value.encode("utf-8", "surrogateescape") == b"k\xff\xfe-key\x80"


def test_a_refused_secret_file_hides_the_error_behind_it(tmp_path) -> None:
    (tmp_path / "folder").mkdir()
    error = refusal({"s": {"from_file": "folder"}}, tmp_path)
    assert str(error).startswith("secret 's': cannot read folder: ")
    assert error.__cause__ is None and error.__suppress_context__  # `from None`


# --- what a run does with it --------------------------------------------------------

SECRET = "s3cr3t-Value/with+chars=="
FILE_SECRET = "-----BEGIN KEY-----\nabc123def456\n-----END KEY-----"


def runner(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd), **(env or {})},
        timeout=120,
    )


def write_config(tmp_path: Path, hooks: str) -> Path:
    (tmp_path / "keys").mkdir(exist_ok=True)
    (tmp_path / "keys" / "deploy.pem").write_text(FILE_SECRET + "\n")
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            secrets:
              token: {from_env: TEST_TOKEN}
              deploy_key: {from_file: keys/deploy.pem}
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
            """
        )
        + textwrap.indent(textwrap.dedent(hooks), " " * 6)
    )
    return path


def test_secrets_reach_steps_as_env_vars_and_files(tmp_path) -> None:
    config = write_config(
        tmp_path,
        """\
        - name: deliver
          on_create:
            - run: printf %s "$TOKEN" > token.txt
              secrets: {TOKEN: token}
            - secret_file: .keys/deploy.pem
              secret: deploy_key
            - run: stat -c %a .keys/deploy.pem > mode.txt
          on_destroy:
            - {save: token.txt, to: token.txt}
            - {save: .keys/deploy.pem, to: deploy.pem}
            - {save: mode.txt, to: mode.txt}
        """,
    )
    result = runner(
        "run", str(config), "--output-dir", "out", cwd=tmp_path, env={"TEST_TOKEN": SECRET}
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "token.txt").read_text() == SECRET
    assert (tmp_path / "out" / "deploy.pem").read_text() == FILE_SECRET
    assert (tmp_path / "out" / "mode.txt").read_text() == "600\n"


def test_a_missing_secret_fails_before_any_sandbox(tmp_path) -> None:
    config = write_config(
        tmp_path, "- {name: h, on_create: [{run: 'true', secrets: {T: token}}]}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TEST_TOKEN"}
    result = subprocess.run(
        [*RUNNER_CLI, "run", str(config)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "TMPDIR": str(tmp_path)},
        timeout=60,
    )
    assert result.returncode == 2
    assert (
        "secret 'token' is required but the environment variable TEST_TOKEN is not set"
        in result.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml", "keys"]


def test_templating_a_secret_is_a_validation_error(tmp_path) -> None:
    config = write_config(tmp_path, "- {name: h, on_create: [{run: 'echo {{ secrets.token }}'}]}\n")
    (problem,) = validate_file(config)
    assert "secrets are never templated into text" in problem.message
    assert problem.line == 10


def test_an_unknown_secret_name_is_a_validation_error(tmp_path) -> None:
    config = write_config(tmp_path, "- {name: h, on_create: [{run: 'true', secrets: {T: tokn}}]}\n")
    (problem,) = validate_file(config)
    assert problem.message == "unknown secret 'tokn' (declared under secrets: deploy_key, token)"
    assert problem.path[-2:] == ("secrets", "T")


def test_no_form_of_a_secret_reaches_any_output(tmp_path) -> None:
    forms = {
        "raw": SECRET,
        "shell-quoted": shlex.quote(SECRET),
        "url-encoded": quote(SECRET, safe=""),
        "base64": base64.b64encode(SECRET.encode()).decode(),
    }
    # The command computes every form from $TOKEN; the secret is never in the file.
    on_create = (
        "python3 -c 'import base64, os, shlex, sys; from urllib.parse import quote; "
        't = os.environ["TOKEN"]; '
        'forms = [t, shlex.quote(t), quote(t, safe=""), base64.b64encode(t.encode()).decode()]; '
        "print(*forms, sep=chr(10)); print(*forms, sep=chr(10), file=sys.stderr); sys.exit(3)'"
    )
    on_destroy = "echo $TOKEN; echo $TOKEN >&2; exit 4"
    config = write_config(
        tmp_path,
        f"""\
        - name: leaky
          on_create:
            - run: {json.dumps(on_create)}
              secrets: {{TOKEN: token}}
          on_destroy:
            - run: {json.dumps(on_destroy)}
              secrets: {{TOKEN: token}}
        """,
    )
    outputs = []
    for command in (["run", str(config), "--json"], ["run", str(config)], ["render", str(config)]):
        result = runner(*command, cwd=tmp_path, env={"TEST_TOKEN": SECRET})
        outputs.append(result.stdout + result.stderr)
    assert "leaky.on_create failed" in outputs[1]
    everything = "\n".join(outputs)
    for name, value in forms.items():
        assert value not in everything, f"the {name} form of the secret leaked"
    assert "***" in outputs[1]


def test_a_secret_in_the_agents_answer_is_scrubbed(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    with ChatServer(
        [assistant(f"I found the token: {SECRET}"), assistant(f"again {SECRET}")]
    ) as server:
        config = tmp_path / "agent.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                secrets:
                  token: {{from_env: TEST_TOKEN}}
                agent:
                  model: m
                  base_url: {server.url}
                  environment:
                    sandbox: local
                    hooks:
                      - name: deliver
                        on_create: [{{secret_file: token.txt, secret: token}}]
                """
            )
        )
        outputs = [
            runner(
                "run",
                str(config),
                "--prompt",
                "find it",
                *extra,
                cwd=tmp_path,
                env={"TEST_TOKEN": SECRET},
            )
            for extra in ([], ["--json"])
        ]
    for result in outputs:
        assert result.returncode == 0, result.stderr
        assert SECRET not in result.stdout + result.stderr
    assert outputs[0].stdout == "I found the token: ***\n"
    assert '"text": "again ***"' in outputs[1].stdout


# Every way bash and Python print a value, run inside the sandbox on a secret.
PRINT_EVERY_FORM = r"""exec 1>&2
set -x
: "$T"
printf '%q\n' "$T"
declare -p T
python3 -c 'import json, os; t = os.environ["T"]; print(json.dumps(t), json.dumps(t, ensure_ascii=False), repr(t), repr(t + chr(39) + chr(34)))'
exit 3
"""


def _unquoted(word: str) -> str:
    """``word`` without one layer of ``'...'``, ``"..."`` or ``$'...'``."""
    if word.startswith("$'") and word.endswith("'") and len(word) >= 3:
        return word[2:-1]
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        return word[1:-1]
    return word


def printed_forms(secret: str, env: dict[str, str]) -> dict[str, str]:
    """What real bash and Python print for ``secret``, each without its outer quotes
    (so the check is stricter than looking for the quoted word)."""

    def bash(script: str) -> str:
        done = subprocess.run(
            ["bash", "-c", script],
            env={**os.environ, **env, "T": secret},
            capture_output=True,
            text=True,
        )
        return done.stdout + done.stderr

    return {
        "raw": secret,
        "set -x": _unquoted(bash('set -x; : "$T"').removeprefix("+ : ").removesuffix("\n")),
        "printf %q": _unquoted(bash('printf %q "$T"')),
        "declare -p": _unquoted(bash("declare -p T").removeprefix("declare -x T=")[:-1]),
        "json": json.dumps(secret)[1:-1],
        "json, ensure_ascii=False": json.dumps(secret, ensure_ascii=False)[1:-1],
        "repr": repr(secret)[1:-1],
        "repr inside a string with both quotes": repr(secret + "'\"")[1:-4],
        "shell-quoted": shlex.quote(secret),
        "url-encoded": quote(secret, safe=""),
        "base64": base64.b64encode(secret.encode()).decode(),
    }


def _strings_in(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings_in(v)]
    return [value] if isinstance(value, str) else []


@pytest.fixture(scope="module")
def printing_config(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("printing")
    return write_config(
        folder,
        f"""\
        - name: leaky
          on_create:
            - run: {json.dumps(PRINT_EVERY_FORM)}
              secrets: {{T: token}}
        """,
    )


# No digits: the JSON events' times and durations are numbers, never scrubbed.
# Each example runs the CLI twice (~2 s): 8 generated in CI, 25 in scripts/long
# (tests/support/scale.py), beside the six fixed ones below, run in both.
@pytest.mark.slow
@settings(max_examples=scaled(8, 25), deadline=None)
@given(
    secret=st.text(
        alphabet=st.sampled_from(list("aZ '\"$\\\n\t`#~:=!;é☃\x01\x1b")), min_size=3, max_size=12
    ),
    c_locale=st.booleans(),
)
@example(secret="it's a secret", c_locale=False)
@example(secret="a b$c\\d", c_locale=False)
@example(secret="x'y\nz\ttab", c_locale=False)
@example(secret="ünï cødé", c_locale=False)
@example(secret="ünï cødé", c_locale=True)
@example(secret="#~a:~b='\x1b", c_locale=False)
def test_a_secret_leaks_in_no_form_bash_or_python_prints(printing_config, secret, c_locale) -> None:
    # In the C locale bash prints non-ASCII characters as octal bytes: $'\303\251'.
    env = {"LC_ALL": "C"} if c_locale else {}
    forms = printed_forms(secret, env)
    folder = printing_config.parent
    for extra in (["--json"], []):
        result = runner(
            "run", str(printing_config), *extra, cwd=folder, env={**env, "TEST_TOKEN": secret}
        )
        assert result.returncode == 1, result.stderr
        texts = [result.stdout, result.stderr]
        if extra:
            texts += [
                s for line in result.stdout.splitlines() for s in _strings_in(json.loads(line))
            ]
        everything = "\n".join(texts)
        assert "command exited 3" in everything  # the step ran and its output was shown
        for name, form in forms.items():
            assert form not in everything, f"the {name} form {form!r} of {secret!r} leaked"


NUMBERS_CONFIG = """\
version: 1
inputs:
  db.creds:
    as: creds
    secret: true
    schema:
      type: object
      properties:
        pin: {type: integer}
        ratio: {type: number}
        admin: {type: boolean}
      required: [pin, ratio, admin]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: connect
        on_create:
          - run: "echo connecting with {{ creds.pin }} {{ creds.ratio }} {{ creds.admin }} >&2; exit 1"
"""


def test_numbers_and_booleans_of_a_secret_input_are_masked_too(tmp_path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(NUMBERS_CONFIG)
    values = ["db.creds.pin=48151623", "db.creds.ratio=2.71828", "db.creds.admin=false"]
    args = [arg for value in values for arg in ("--input", value)]
    rendered = runner("render", str(config), *args, cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert "echo connecting with '***' '***' '***' >&2; exit 1" in rendered.stdout.splitlines()
    ran = runner("run", str(config), *args, "--json", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert "connecting with *** *** ***" in ran.stdout  # the step's stderr, scrubbed
    for result in (rendered, ran):
        for secret in ("48151623", "2.71828"):
            assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_secret_file_that_is_a_fifo_or_huge_is_refused_at_once(tmp_path, kind) -> None:
    """from_file reads a bounded regular file: a FIFO would wait forever for a
    writer, a huge file would be read into memory whole."""
    config = write_config(tmp_path, "- name: h\n  on_create: [{run: 'true'}]\n")
    key = tmp_path / "keys" / "deploy.pem"
    key.unlink()
    if kind == "fifo":
        os.mkfifo(key)
    else:
        with key.open("wb") as stream:
            stream.truncate(50_000_000)  # sparse: free on disk, 50 MB to read
    result = runner("run", str(config), cwd=tmp_path, env={"TEST_TOKEN": SECRET})
    assert result.returncode == 2, result.stderr
    reason = "not a regular file" if kind == "fifo" else "larger than 1000000 bytes"
    assert "secret 'deploy_key': cannot read keys/deploy.pem:" in result.stderr
    assert reason in result.stderr


def test_jinjas_loop_variable_over_a_secret_list_is_masked(tmp_path) -> None:
    """Review 25's B1 through the installed CLI: ``loop.previtem`` of a loop
    over a secret input's list printed an item unmasked, in the progress
    and in the JSON events."""
    path = one_step_agent(
        tmp_path,
        'echo "$V"',
        env={"V": "{% for t in s.toks %}{{ loop.previtem | default('none') | upper }}{% endfor %}"},
        top={"inputs": {"acme.s": {"as": "s", "secret": True, "schema": {"type": "object"}}}},
    )
    secret = 'acme.s={"toks": ["hunter2secret", "other-token"]}'
    for view in ("-v", "--json"):
        ran = runner("run", str(path), "--input", secret, view, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        output = ran.stdout + ran.stderr
        assert view == "--json" or "***" in output, output  # -v shows the step's output
        assert "HUNTER2SECRET" not in output.upper(), output


def validate_secret_step(tmp_path, step: dict) -> tuple[int, str]:
    """``runner validate`` of an agent whose one hook runs ``step`` with the
    secret input ``acme.s`` as ``s``: its exit status and its output."""
    path = one_step_agent(
        tmp_path,
        "true",
        before=[step],
        top={"inputs": {"acme.s": {"as": "s", "secret": True, "schema": {"type": "object"}}}},
    )
    checked = runner("validate", str(path), cwd=tmp_path)
    return checked.returncode, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("field", "template", "construct"),
    [
        ("env", "{% with t = s.tok %}{{ t | upper }}{% endwith %}", "{% with %}"),
        ("env", "{% set t %}{{ s.tok }}{% endset %}{{ t | title }}", "{% set %}...{% endset %}"),
        ("env", "{% filter reverse %}{{ s.tok }}{% endfilter %}", "{% filter %}"),
        ("env", "{% set n = namespace(v=s.tok) %}{{ n.v }}", "a call"),
        ("content", "{% with t = s.tok %}{{ t }}{% endwith %}", "{% with %}"),
    ],
)
def test_a_secret_template_may_use_only_what_the_masking_follows(
    tmp_path, field, template, construct
) -> None:
    """Review 26's B1b: outside ``run``, ``{% with %}``, a block ``{% set %}``,
    ``{% filter %}`` and ``namespace()`` carried a secret past the masking."""
    step = (
        {"run": 'echo "$V"', "env": {"V": template}}
        if field == "env"
        else {"write": "notes.txt", "content": template}
    )
    status, output = validate_secret_step(tmp_path, step)
    assert status == 2, output
    assert f"{construct} in a template that reads a secret input" in output


@pytest.mark.parametrize(
    ("field", "template"),
    [
        ("run", "echo plan: {% if s.tok == 'gold' %}unlimited{% else %}free{% endif %}"),
        ("env", "{% for c in s.tok %}{% if c == 'h' %}h.{% endif %}{% endfor %}"),
        ("content", "{% for k in 'abc' if k in s.tok %}{{ '' }}k{% endfor %}"),
    ],
)
def test_the_templates_own_text_may_not_be_chosen_by_a_secret(tmp_path, field, template) -> None:
    """Review 29's B1g: text under an ``{% if %}`` on a secret printed which
    branch it took (a decoder with no ``{{ }}`` printed the secret)."""
    step = {
        "run": {"run": template},
        "env": {"run": 'echo "$V"', "env": {"V": template}},
        "content": {"write": "notes.txt", "content": template},
    }[field]
    status, output = validate_secret_step(tmp_path, step)
    assert status == 2, output
    # in run, text any value decides is refused first (test_chosen_text)
    assert ("that a value decides" if field == "run" else "would say which way it went") in output
    if field == "run":  # written as a {{ }}, the choice is masked: accepted
        inline = "echo plan: {{ 'unlimited' if s.tok == 'gold' else 'free' }}"
        status, output = validate_secret_step(tmp_path, {"run": inline})
        assert status == 0, output


@pytest.mark.parametrize(
    "template",
    [
        "gold=[{% if s.tok == 'gold' %} {% endif %}]",  # a space (review 30's B1h)
        "{% for _ in ([1] if s.tok == 'gold' else []) %}yes{% endfor %}",  # B1i
        "{% for c in s.tok %}#{% endfor %}",  # its length
    ],
)
def test_no_text_of_the_template_shows_what_a_secret_decided(tmp_path, template) -> None:
    status, output = validate_secret_step(tmp_path, {"run": 'echo "$V"', "env": {"V": template}})
    assert status == 2, output
    assert "how often it ran" in output


def test_a_callers_secret_input_cannot_unmask_another_secret(tmp_path) -> None:
    """Review 49's S1: each line of a ``secret: true`` input is masked too,
    and the caller writes those lines.  Lines that end in a guess of the
    token's first character (or start with its last) overlap the token
    where ``set -x`` prints it; masked one after the other, the caller's
    line took that character along and the rest of the token printed in
    clear.  Masked as the union of every occurrence, nothing is left."""
    (tmp_path / "agent.yaml").write_text(
        textwrap.dedent(
            """\
            version: 1
            inputs:
              acme.api:
                as: api
                secret: true
                schema: {type: object, properties: {key: {type: string}}}
            secrets:
              token: {from_env: TEST_TOKEN}
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: deploy
                    on_create:
                      - write: .config/api-key
                        content: "{{ api.key }}"
                      - run: |
                          set -x
                          : -H "Authorization: Bearer $TOKEN" http://127.0.0.1:9/deploy
                          exit 3
                        secrets: {TOKEN: token}
            """
        )
    )
    alphabet = sorted(set(SECRET))
    before = [f"-H 'Authorization: Bearer {c}" for c in alphabet]
    after = [f"{c}' http://127.0.0.1:9/deploy" for c in alphabet]
    (tmp_path / "values.json").write_text(
        json.dumps({"acme.api": {"key": "\n".join(before + after)}})
    )
    outputs = []
    for extra in ([], ["--json"]):
        result = runner(
            "run",
            "agent.yaml",
            "--inputs",
            "values.json",
            "-v",
            *extra,
            cwd=tmp_path,
            env={"TEST_TOKEN": SECRET},
        )
        assert "deploy.on_create failed" in result.stderr + result.stdout, result.stderr
        outputs.append(result.stdout + result.stderr)
    everything = "\n".join(outputs)
    assert "+ : ***" in everything  # set -x printed the line (the caller's lines are masked too)
    windows = {SECRET[i : i + 6] for i in range(len(SECRET) - 5)}
    assert not [w for w in windows if w in everything], everything[-3000:]
