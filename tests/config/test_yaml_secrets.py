"""Secrets of a YAML file (from_env and from_file) with a quote, spaces and `$`,
printed by a failing step in every form bash and Python print them: no form may
reach the exception a Python caller gets (its message, its cause, its context),
the events, or the destroy failures.  In-process, so mutation testing sees it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import textwrap

import pytest

import runner as agents
from runner.config.steps import StepFailedError
from runner.core.events import listen

pytestmark = pytest.mark.anyio

ENV_SECRET = "it's a $ecret `x`"
FILE_SECRET = "f'ile $HOME two  words"

#: Every way the step prints $S: raw, printf %q, ${S@Q}, set -x, declare -p,
#: shlex.quote (Python), repr and JSON.
PRINT = (
    'printf "%s|%q|%s\\n" "$S" "$S" "${S@Q}"; (set -x; : "$S"); declare -p S; '
    'python3 -c "import json, os, shlex; s = os.environ[\\"S\\"]; '
    'print(shlex.quote(s), repr(s), json.dumps(s))"'
)


def forms(secret: str) -> dict[str, str]:
    """The secret as bash and Python print it, computed here without the runner."""
    printed = subprocess.run(
        ["bash", "-c", 'printf "%q\\n" "$S"; printf "%s\\n" "${S@Q}"'],
        env={"S": secret, "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {
        "raw": secret,
        "printf %q": printed[0],
        "${S@Q}": printed[1],
        "shlex.quote": shlex.quote(secret),
        "inside shlex.quote": secret.replace("'", "'\"'\"'"),
        "inside set -x": secret.replace("'", "'\\''"),
        "repr": repr(secret)[1:-1],
        "json": json.dumps(secret)[1:-1],
    }


def leaky_config(tmp_path, *, point: str):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k.pem").write_text(FILE_SECRET + "\n")
    step_env = "{S: token}"
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            secrets:
              token: {{from_env: TEST_TOKEN}}
              key: {{from_file: keys/k.pem}}
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: leaky
                    {point}:
                      - run: {json.dumps(PRINT + " >&2; exit 3")}
                        secrets: {step_env}
                      - run: {json.dumps(PRINT + " >&2; exit 4")}
                        secrets: {{S: key}}
                        check: true
            """
        )
    )
    return path


def chain(exc: BaseException | None) -> list[BaseException]:
    """The exception and every cause and context behind it."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [current.__cause__, current.__context__]
    return seen


def assert_no_form(text: str) -> None:
    for secret in (ENV_SECRET, FILE_SECRET):
        for how, form in forms(secret).items():
            assert form not in text, f"the {how} form of {secret!r} leaked: {text!r}"


async def test_a_failing_on_create_step_hands_the_caller_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_TOKEN", ENV_SECRET)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    agent = agents.load(leaky_config(tmp_path, point="on_create"), output_dir=tmp_path / "out")
    events: list[dict] = []
    with listen(events.append), pytest.raises(StepFailedError) as info:
        await agent.start_session()
    # The failure says what failed and that something was masked...
    assert "command exited 3" in str(info.value)
    assert "***" in str(info.value)
    # ...and nothing a caller can reach from it holds a secret in any form.
    for exc in chain(info.value):
        assert_no_form(str(exc))
        assert_no_form(repr(exc.args))
    failed = [e for e in events if e["event"] in ("step_failed", "hook_failed")]
    assert [e["event"] for e in failed] == ["step_failed", "hook_failed"]
    assert_no_form(json.dumps(events, ensure_ascii=False))
    assert_no_form(json.dumps(events))


async def test_a_failing_on_destroy_step_records_no_secret(tmp_path, monkeypatch):
    """The second step prints the from_file secret: the on_destroy failure the
    session keeps (and logs) is scrubbed of it, in every form."""
    monkeypatch.setenv("TEST_TOKEN", ENV_SECRET)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    path = leaky_config(tmp_path, point="on_destroy")
    # Only the from_file step: drop the first (from_env) one.
    text = path.read_text()
    first = text.index("          - run:")
    second = text.index("          - run:", first + 1)
    path.write_text(text[:first] + text[second:])
    agent = agents.load(path, output_dir=tmp_path / "out")
    events: list[dict] = []
    with listen(events.append):
        session = await agent.start_session()
        await session.close()
    (failure,) = session.destroy_failures
    assert "command exited 4" in failure.message
    assert "***" in failure.message
    assert_no_form(str(failure))
    assert_no_form(json.dumps(events, ensure_ascii=False))


# --- issue 25, item 8: trimmed, filtered and non-UTF-8 secrets, in-process ---


async def test_a_filtered_trimmed_or_binary_secret_reaches_the_caller_in_no_form(
    tmp_path, monkeypatch
):
    """A `secret: true` input through `| upper`, a from_env secret with a trailing
    newline printed trimmed, and a from_file secret that is not UTF-8 printed
    raw: the exception chain and the events hold none of them."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "bin.key").write_bytes(b"Bin-key\xff\xfe-tail-part\n")
    monkeypatch.setenv("TEST_TOKEN", "env-Token-value\r\n")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    path = tmp_path / "agent.yaml"
    command = (
        "printf '%s|%s|' {{ s.t | upper }} \"$(printf %s \"$T\" | tr -d '\\r\\n')\"; "
        'printf %s "$B"; exit 3'
    )
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            secrets:
              token: {{from_env: TEST_TOKEN}}
              bin: {{from_file: keys/bin.key}}
            inputs:
              acme.s:
                as: s
                secret: true
                schema: {{type: object, properties: {{t: {{type: string}}}}}}
            agent:
              model: m
              environment:
                sandbox: local
                hooks:
                  - name: leaky
                    on_create:
                      - run: {json.dumps(command)}
                        secrets: {{T: token, B: bin}}
            """
        )
    )
    agent = agents.load(path, output_dir=tmp_path / "out")
    events: list[dict] = []
    with listen(events.append), pytest.raises(StepFailedError) as info:
        await agent.start_session(session_inputs={"acme.s": {"t": "input-Secret-word"}})
    assert str(info.value).endswith("command exited 3: ***|***|***")
    shown = [str(exc) for exc in chain(info.value)] + [json.dumps(events)]
    for text in shown:
        for fragment in ("INPUT-SECRET-WORD", "env-Token-value", "Bin-key", "tail-part"):
            assert fragment not in text, (fragment, text)
