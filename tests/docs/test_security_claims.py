"""SECURITY.md names, for every claim, a test that fails when the defence is
removed; this file checks that each cited test exists, and holds the tests of
the claims that had none (issue 15): ``format_map``; ``|attr``, ``mro`` and
``format`` refused again at render time; ``typeset``, ``readonly`` and
``export`` with flags; ``{% call %}``; ``upload:`` through a host symlink; the
API key only in the ``Authorization`` header; the 1 MB check before reading.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI

import runner as agents
from runner.config import ConfigError
from runner.config.steps import StepFailedError
from runner.config.templates import (
    _SHELL,
    _TEXT,
    Fields,
    Template,
    TemplateSecurityError,
    UnsafeTemplateError,
    compile_template,
)
from runner.config.yaml_loader import MAX_BYTES, load_file

ROOT = Path(__file__).resolve().parents[2]

# --- SECURITY.md cites tests that exist ----------------------------------------

#: Inside a [...] of SECURITY.md: ``tests/test_x.py::test_name`` (``[param-id]``
#: allowed), or a file ``test_x.py`` followed by the names of its tests in
#: backquotes (``[`test_x.py`: `test_a`, `test_b`]``).
CITED = re.compile(
    r"(?:tests/)?(?P<file>(?:[a-z]+/)?test_\w+\.py)(?:::\s*(?P<name>\w+)(?:\[[^\]\s`]*\])?)?"
    r"|`(?P<bare>test_\w+)(?:\[[^\]\s`]*\])?`"
)
#: A [...] that may hold one level of [...] (a parametrized id).
BRACKET = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]")


def citations(text: str) -> list[tuple[str, str]]:
    """(file, test name) of every test cited in ``text``."""
    found = []
    for bracket in BRACKET.finditer(" ".join(text.split())):
        current = None
        for match in CITED.finditer(bracket.group(1)):
            if match["file"]:
                current = match["file"]
                if match["name"]:
                    found.append((current, match["name"]))
            elif current is not None:
                found.append((current, match["bare"]))
    return found


def security_text() -> str:
    return (ROOT / "SECURITY.md").read_text("utf-8")


def defined_tests(path: Path) -> set[str]:
    """The test functions of a test file, at module level or in a class."""
    tree = ast.parse(path.read_text("utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def cited_file(file: str) -> Path | None:
    """``layer/test_x.py`` under tests/, or a bare ``test_x.py`` found in any
    layer folder (test file names are unique across the tree)."""
    if "/" in file:
        path = ROOT / "tests" / file
        return path if path.is_file() else None
    found = sorted((ROOT / "tests").rglob(file))
    return found[0] if len(found) == 1 else None


def claims() -> list[str]:
    """The bullets of "Threats and defences": each is a claim (or a few)."""
    section = security_text().split("## Threats and defences", 1)[1].split("\n## ", 1)[0]
    return [block for block in re.split(r"\n(?=- |\S)", section) if block.startswith("- ")]


def test_security_md_cites_only_tests_that_exist() -> None:
    cited = citations(security_text())
    assert len(cited) >= 60, "SECURITY.md should cite tests by name, claim by claim"
    missing = []
    for file, name in cited:
        path = cited_file(file)
        if path is None:
            missing.append(f"{file} (no such file)")
        elif name not in defined_tests(path):
            missing.append(f"{file}::{name}")
    assert missing == [], f"SECURITY.md cites tests that do not exist: {missing}"


def test_every_claim_of_security_md_names_a_test() -> None:
    bullets = claims()
    assert len(bullets) >= 25
    uncited = [" ".join(b.split())[:100] for b in bullets if not citations(b)]
    assert uncited == [], f"claims that name no test (tests/FILE.py::TEST): {uncited}"


def test_the_citation_parser_reads_both_forms_and_sees_a_missing_test() -> None:
    text = (
        "claim [`tests/config/test_templates.py::test_nope[a-b]`, `test_faults.py`:\n"
        "  `test_x`, `test_y`; `test_lifecycle.py::\n  test_z`] and `test_not_cited`"
    )
    assert citations(text) == [
        ("config/test_templates.py", "test_nope"),
        ("test_faults.py", "test_x"),
        ("test_faults.py", "test_y"),
        ("test_lifecycle.py", "test_z"),
    ]
    assert "test_nope" not in defined_tests(ROOT / "tests" / "config" / "test_templates.py")
    assert cited_file("test_faults.py") == ROOT / "tests" / "sandboxes" / "test_faults.py"
    assert cited_file("config/test_faults.py") is None


# --- Templates: format_map, and the sandbox at render time ----------------------

SANDBOX_ESCAPES = [
    "'{0.__class__}'.format_map(d)",
    "s.format_map(d)",
    "'{0}'.format(s)",
    "s|attr('format')",
    "(s|attr('format_map'))(d)",
    "s['format']",
    "dict.mro()",
    "dict|attr('mro')",
    "s|attr('__class__')",
]


@pytest.mark.parametrize("expression", SANDBOX_ESCAPES)
@pytest.mark.parametrize("shell", [False, True], ids=["write", "run"])
def test_sandbox_escapes_are_refused_by_validate(expression, shell) -> None:
    source = ("echo " if shell else "") + "{{ " + expression + " }}"
    template, problems = compile_template(
        source, shell=shell, fields_by_name={"s": None, "d": None}
    )
    assert template is None
    assert any("reaches outside the template sandbox" in p.message for p in problems), problems


@pytest.mark.parametrize("expression", SANDBOX_ESCAPES)
@pytest.mark.parametrize("shell", [False, True], ids=["write", "run"])
def test_sandbox_escapes_are_refused_again_at_render_time(expression, shell) -> None:
    """With the validation bypassed (the tree compiled as is), rendering refuses:
    `format`/`format_map` are not handed out (not even Jinja's sandboxed
    formatter), and `mro` or `_` names through `.`, `[]` or `|attr` neither."""
    source = ("echo " if shell else "") + "{{ " + expression + " }}"
    environment = _SHELL if shell else _TEXT
    template = Template(source, shell, frozenset({"s", "d"}), environment.parse(source))
    with pytest.raises(TemplateSecurityError, match="templates may not access"):
        template.render({"s": "x", "d": {"k": "v"}})


def test_safe_attributes_still_render() -> None:
    source = "{{ s.upper() }} {{ (s|attr('lower'))() }} {{ repo.format }}"
    template = Template(source, False, frozenset({"s", "repo"}), _TEXT.parse(source))
    assert template.render({"s": "Ab", "repo": Fields({"format": "f"})}) == "AB ab f"


# --- Declarations with flags, and {% call %} -------------------------------------

DECLARATIONS = [
    "typeset {{ v }}",
    "typeset -i n={{ v }}",
    "typeset n={{ v }}",
    "readonly {{ v }}",
    "readonly -a q={{ v }}",
    "readonly q={{ v }}",
    "export {{ v }}",
    "export -n x={{ v }}",
    "export -f {{ v }}",
    "declare -r y={{ v }}",
]


@pytest.mark.parametrize("command", DECLARATIONS)
def test_declarations_with_or_without_flags_are_refused(command, tmp_path) -> None:
    """`typeset -i n='a[$(touch CANARY)]'` runs the command (arithmetic on a
    subscript): a value may not stand in any declaration, flags or not, neither
    at validation nor at run time with the static check bypassed."""
    _, problems = compile_template(command, shell=True, fields_by_name={"v": None})
    (problem,) = problems
    assert problem.message.startswith("{{ }} a declaration (declare, typeset, local, export")
    template = Template(command, True, frozenset({"v"}), _SHELL.parse(command))
    with pytest.raises(UnsafeTemplateError, match="a declaration"):
        template.render({"v": f"a[$(touch {tmp_path}/CANARY)]"})
    assert not (tmp_path / "CANARY").exists()


def test_what_a_declaration_would_run_if_it_were_allowed(tmp_path) -> None:
    """Why the rule exists: the same text with the value quoted runs the command."""
    canary = tmp_path / "CANARY"
    value = f"'a[$(touch {canary})]'"
    subprocess.run(["bash", "-c", f"typeset -i n={value}"], capture_output=True)
    assert canary.exists()


@pytest.mark.parametrize(
    "command",
    [
        "echo {% call v() %}x{% endcall %}",
        "echo {% call(a) v() %}{{ a }}{% endcall %}",
        "{% macro m() %}{{ caller() }}{% endmacro %}echo {% call m() %}{{ v }}{% endcall %}",
    ],
)
def test_call_blocks_are_refused_in_run_commands(command) -> None:
    template, problems = compile_template(command, shell=True, fields_by_name={"v": None})
    assert template is None
    assert any(
        p.message.startswith(("{% call %} is not allowed", "{% macro %} is not allowed"))
        for p in problems
    ), problems


# --- upload: through a host symlink ----------------------------------------------


@pytest.mark.anyio
async def test_upload_through_a_host_symlink_out_of_the_folder_is_refused(tmp_path) -> None:
    """The config folder holds a link to a folder outside it: `upload:` of a file
    under the link is refused before anything is read, and nothing reaches the
    sandbox."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE KEY")
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "keys").symlink_to(outside)
    path = config_dir / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: look
                    on_destroy:
                      - run: ls -A > listing.txt; cat id_rsa >> listing.txt 2>&1; true
                      - {save: listing.txt, to: listing.txt}
                  - name: up
                    on_create:
                      - {upload: keys/id_rsa, to: id_rsa}
            """
        )
    )
    agent = agents.load(path, output_dir=tmp_path / "out")
    with pytest.raises(StepFailedError, match=r"upload: 'keys/id_rsa' leads outside .* symlink"):
        await agent.start_session()
    listing = (tmp_path / "out" / "listing.txt").read_text()
    assert "listing.txt" in listing  # the sandbox existed and was looked into
    assert "id_rsa" not in listing.split("\n")[:2] and "PRIVATE KEY" not in listing


# --- API keys: only in the Authorization header ---------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "MISTRAL_API_KEY"])
async def test_the_api_key_travels_only_in_the_authorization_header(
    variable, monkeypatch, tmp_path
) -> None:
    from chat_server import ChatServer, assistant, error

    from runner.models.chat_completions import model_for

    key = "sk-test-" + os.urandom(12).hex()
    monkeypatch.setenv(variable, key)
    with ChatServer([assistant("hello"), error(400, "bad request")]) as server:
        if variable == "OPENAI_API_KEY":
            model = model_for("m", base_url=server.url)
        else:
            monkeypatch.setenv("MISTRAL_SERVER_URL", server.url)
            model = model_for("m", base_url=None)
        reply = await model.complete([{"role": "user", "content": "hi"}], [])
        with pytest.raises(Exception) as failure:
            await model.complete([{"role": "user", "content": "again"}], [])
    assert reply is not None
    assert len(server.requests) == 2
    for request in server.requests:
        headers = dict(request["headers"])
        assert headers.pop("authorization") == f"Bearer {key}"
        assert key not in json.dumps(headers)
        assert key not in request["path"]
        assert key not in json.dumps(request["body"])
    assert key not in repr(model) and key not in str(model)
    assert key not in str(failure.value)


def test_runner_info_says_set_never_the_key(tmp_path) -> None:
    key = "sk-test-" + os.urandom(12).hex()
    result = subprocess.run(
        [*RUNNER_CLI, "info"],
        capture_output=True,
        text=True,
        env={**os.environ, "MISTRAL_API_KEY": key, "OPENAI_API_KEY": key},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "MISTRAL_API_KEY: set" in result.stdout
    assert key not in result.stdout + result.stderr


# --- YAML: the 1 MB check comes before reading -----------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1])


def test_a_huge_yaml_file_is_refused_before_it_is_read(tmp_path) -> None:
    """A 2 GiB sparse file (no disk used) is refused from its size: reading it
    first would take the process's memory up by gigabytes.  The peak resident
    size is reset (/proc/self/clear_refs) so the measure is of this call only."""
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as stream:
        stream.write(b"a: ")
        stream.truncate(2 << 30)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = _status_kib("VmRSS")
    with pytest.raises(ConfigError, match=f"huge.yaml:1:1: file is larger than {MAX_BYTES} bytes"):
        load_file(path)
    assert _status_kib("VmHWM") - before < 8 * 1024  # KiB; at most the 1 MB bound, read once


@pytest.mark.anyio
@pytest.mark.docker
async def test_the_platform_token_travels_only_in_the_authorization_header(
    docker_client, monkeypatch
) -> None:
    """KOYEB_API_TOKEN (MistralSandbox's control plane, here the stand-in of
    tests/support/koyeb_server.py on loopback) is in every control-plane request's
    Authorization header and nowhere else in any request."""
    from conftest import TEST_IMAGE
    from koyeb_server import FakeCloud, containers_left_by, point_sdk_at

    token = "koyeb-test-" + os.urandom(12).hex()
    with FakeCloud(docker_client, TEST_IMAGE, token=token) as cloud:
        point_sdk_at(monkeypatch, cloud)
        environment = agents.MistralSandbox(readiness_timeout_seconds=10)
        async with await agents.Agent(model="m", environment=environment).start_session() as s:
            assert (await s.sandbox.execute("echo ok")).stdout == "ok\n"
            assert token not in repr(s.sandbox) + repr(environment)
        requests = list(cloud.requests)
    assert containers_left_by(cloud, docker_client) == []
    control = [r for r in requests if r["headers"].get("authorization") == f"Bearer {token}"]
    assert len(control) >= 3  # create the app, the service, poll, delete...
    for request in requests:
        headers = {k: v for k, v in request["headers"].items() if k != "authorization"}
        assert token not in json.dumps(headers)
        assert token not in request["path"]
        assert token not in json.dumps(request["body"], default=str)
