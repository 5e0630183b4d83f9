"""Issue 29, YAML ``agent.tools`` and ``agent.builtin_tools``, through the CLI.

Every run here is the real ``runner`` command (``RUNNER_CLI``: the installed
wheel under scripts/test) against the chat stand-in over real HTTP, on a
local workspace and in a Docker container.  What the model got back is read
from the last request the stand-in received; what ran is read from the
sandbox by a last, harmless declared tool (``listing``), so a test sees a
``CANARY`` the hostile arguments would have made.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, assistant
from conftest import RUNNER_CLI
from jsonschema import Draft202012Validator

from runner.core.events import events_schema

EVENTS = Draft202012Validator(events_schema())

#: What a model could send to get a command of its own run.
HOSTILE = [
    "$(touch CANARY)",
    "; touch CANARY",
    "`touch CANARY`",
    "x\ntouch CANARY",
    "' ; touch CANARY ; '",
    "-rf /",
    "--output=CANARY",
]


def echo_config(url: str, sandbox: str, *, no_leading_option: bool = True) -> str:
    """An agent with two declared tools and no built-ins."""
    return f"""\
version: 1
agent:
  model: m
  base_url: {url}
  builtin_tools: []
  tools:
    - name: echo_it
      description: Print a value between brackets.
      parameters:
        type: object
        properties:
          value: {{type: string}}
        required: [value]
      run: printf '[%s]\\n' {{{{ args.value }}}}
      no_leading_option: {str(no_leading_option).lower()}
    - name: listing
      description: List the workspace.
      run: ls -A
  environment:
    sandbox: {sandbox}
"""


def config(tmp_path: Path, body: str, *, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def run_cli(
    tmp_path: Path, path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--prompt", "go", "--json", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path), **(env or {})},
        timeout=240,
    )


def events_of(result: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in result.stdout.splitlines()]
    for event in events:
        errors = [e.message for e in EVENTS.iter_errors(event)]
        assert not errors, f"{event} does not match the events schema: {errors}"
    return events


def tool_answers(server: ChatServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]


def calls(*pairs: tuple[str, dict[str, Any]]) -> Any:
    return assistant(None, *[(f"call{index:05d}", name, args) for index, (name, args) in pairs])


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_client")  # skips (or fails under CI) without Docker
    return request.param


def test_hostile_arguments_reach_the_declared_command_as_one_word(tmp_path, sandbox) -> None:
    """Each value is one argument of printf and nothing else runs: printf
    prints it between brackets whole, and no CANARY appears.  A value that
    starts like an option is refused before anything runs (no_leading_option
    is the default for tool arguments)."""
    replies = [
        calls(*enumerate(("echo_it", {"value": value}) for value in HOSTILE)),
        calls((90, ("listing", {}))),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        path = config(tmp_path, echo_config(server.url, sandbox))
        result = run_cli(tmp_path, path)
    assert result.returncode == 0, result.stderr
    assert server.refusals == []
    answers = tool_answers(server)
    for value, answer in zip(HOSTILE[:5], answers, strict=False):
        assert answer == f"exit code 0\n[stdout]\n[{value}]\n"
    for answer in answers[5:7]:
        assert answer.startswith("error: the {{ }} on line 1 prints a word read from input args")
        assert "starts with '-'" in answer and answer.endswith("nothing was run")
    assert answers[7] == "exit code 0", answers[7]  # the workspace is empty: no CANARY
    assert not (tmp_path / "CANARY").exists()
    events = events_of(result)
    finished = [e for e in events if e["event"] == "tool_finished"]
    assert [(e["tool"], e["is_error"]) for e in finished] == [
        *[("echo_it", False)] * 5,
        *[("echo_it", True)] * 2,
        ("listing", False),
    ]


def test_with_no_leading_option_false_an_option_like_value_is_still_one_word(tmp_path) -> None:
    replies = [
        calls((0, ("echo_it", {"value": "-rf /"})), (1, ("echo_it", {"value": "--output=CANARY"}))),
        calls((2, ("listing", {}))),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        path = config(tmp_path, echo_config(server.url, "local", no_leading_option=False))
        result = run_cli(tmp_path, path)
    assert result.returncode == 0, result.stderr
    assert tool_answers(server) == [
        "exit code 0\n[stdout]\n[-rf /]\n",
        "exit code 0\n[stdout]\n[--output=CANARY]\n",
        "exit code 0",
    ]


def test_an_undeclared_tool_or_a_disabled_builtin_runs_nothing(tmp_path, sandbox) -> None:
    replies = [
        calls(
            (0, ("bash", {"command": "touch CANARY"})),
            (1, ("write_file", {"path": "CANARY", "content": "x"})),
            (2, ("touch_canary", {})),
            (3, ("file_system.bash", {"command": "touch CANARY"})),
        ),
        calls((4, ("listing", {})), (5, ("read_file", {"path": "CANARY"}))),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        path = config(
            tmp_path,
            f"""\
            version: 1
            agent:
              model: m
              base_url: {server.url}
              builtin_tools: [read_file]
              tools:
                - name: listing
                  description: List the workspace.
                  run: ls -A
              environment:
                sandbox: {sandbox}
            """,
        )
        result = run_cli(tmp_path, path)
    assert result.returncode == 0, result.stderr
    assert server.refusals == []
    answers = tool_answers(server)
    for answer, name in zip(answers, ["bash", "write_file", "touch_canary"], strict=False):
        assert answer == f"error: unknown tool {name!r} (tools: read_file, listing)"
    assert answers[3].startswith("error: unknown tool 'file_system.bash'")
    assert answers[4] == "exit code 0"  # nothing in the workspace
    assert answers[5].startswith("error: FileNotFoundError")
    for request in server.requests:
        assert [t["function"]["name"] for t in request["body"]["tools"]] == [
            "read_file",
            "listing",
        ]
    called = [e["tool"] for e in events_of(result) if e["event"] == "tool_called"]
    assert called == ["listing", "file_system.read_file"]


@pytest.mark.parametrize("via", ["openai-compatible", "mistral"])
def test_both_request_formats_carry_the_declared_schema(tmp_path, via) -> None:
    replies = [calls((0, ("count_lines", {"path": "notes.txt"}))), assistant("3 lines")]
    with ChatServer(replies) as server:
        base_url = f"base_url: {server.url}" if via == "openai-compatible" else ""
        path = config(
            tmp_path,
            f"""\
            version: 1
            agent:
              model: mistral-small-latest
              {base_url}
              builtin_tools: [read_file]
              tools:
                - name: count_lines
                  description: Count the lines of a file in the workspace.
                  parameters:
                    type: object
                    properties:
                      path: {{type: string, description: A workspace path.}}
                    required: [path]
                    additionalProperties: false
                  run: wc -l < {{{{ args.path }}}}
                  timeout_seconds: 30
              environment:
                sandbox: local
                hooks:
                  - name: seed
                    on_create:
                      - run: printf 'a\\nb\\nc\\n' > notes.txt
            """,
        )
        env = {} if base_url else {"MISTRAL_SERVER_URL": server.url, "MISTRAL_API_KEY": "k"}
        result = run_cli(tmp_path, path, env=env)
    assert result.returncode == 0, result.stderr
    assert server.refusals == []
    expected = {
        "type": "function",
        "function": {
            "name": "count_lines",
            "description": "Count the lines of a file in the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "A workspace path."}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
    for request in server.requests:
        assert request["body"]["tools"][1] == expected
        if via == "mistral":
            assert request["headers"]["authorization"] == "Bearer k"
    assert tool_answers(server) == ["exit code 0\n[stdout]\n3\n"]


def test_arguments_the_schema_refuses_are_answered_and_the_turn_goes_on(tmp_path) -> None:
    replies = [
        calls(
            (0, ("count_lines", {})),
            (1, ("count_lines", {"path": ["a", "b"]})),
            (2, ("count_lines", {"path": "x", "extra": "$(touch CANARY)"})),
        ),
        calls((3, ("listing", {}))),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        path = config(
            tmp_path,
            f"""\
            version: 1
            agent:
              model: m
              base_url: {server.url}
              builtin_tools: []
              tools:
                - name: count_lines
                  description: Count lines.
                  parameters:
                    type: object
                    properties:
                      path: {{type: string}}
                    required: [path]
                    additionalProperties: false
                  run: wc -l < {{{{ args.path }}}}
                - name: listing
                  description: List the workspace.
                  run: ls -A
              environment:
                sandbox: local
            """,
        )
        result = run_cli(tmp_path, path)
    assert result.returncode == 0, result.stderr
    answers = tool_answers(server)
    assert answers[0] == (
        "error: invalid arguments for count_lines: 'path' is a required property; "
        "the call was not run"
    )
    assert answers[1].startswith("error: invalid arguments for count_lines: argument 'path': ")
    assert "is not of type 'string'" in answers[1]
    assert "'extra' was unexpected" in answers[2]
    assert answers[3] == "exit code 0"
    assert [e["tool"] for e in events_of(result) if e["event"] == "tool_called"] == ["listing"]


def test_inputs_secrets_env_and_exit_codes_work_as_in_hook_steps(tmp_path) -> None:
    """A tool reads a session input by its alias, a secret as an environment
    variable (the model gets *** back, and so does every event), an env
    value, a cwd; a non-zero exit is the model's error with its code."""
    token = "tok-4711-secret"
    replies = [
        calls(
            (0, ("show", {"word": "hello"})),
            (1, ("fail", {})),
        ),
        assistant(f"the token is {token}"),
    ]
    with ChatServer(replies) as server:
        path = config(
            tmp_path,
            f"""\
            version: 1
            secrets:
              token: {{from_env: TEST_TOKEN}}
            inputs:
              acme.ticket:
                as: ticket
                schema:
                  type: object
                  properties:
                    number: {{type: integer}}
                  required: [number]
            agent:
              model: m
              base_url: {server.url}
              builtin_tools: []
              tools:
                - name: show
                  description: Show things.
                  parameters:
                    type: object
                    properties:
                      word: {{type: string}}
                      times: {{type: integer, default: 2}}
                    required: [word]
                  run: >-
                    printf '%s|%s|%s|%s|%s|%s\\n' {{{{ args.word }}}} {{{{ args.times }}}}
                    {{{{ ticket.number }}}} "$TOKEN" "$GREETING" "$(basename "$PWD")"
                  env: {{GREETING: "hi {{{{ args.word }}}}"}}
                  secrets: {{TOKEN: token}}
                  cwd: sub
                - name: fail
                  description: Fail.
                  run: echo bad >&2; exit 3
              environment:
                sandbox: local
                hooks:
                  - name: seed
                    on_create:
                      - run: mkdir sub
            """,
        )
        result = run_cli(
            tmp_path, path, "--input", "acme.ticket.number=12", env={"TEST_TOKEN": token}
        )
    assert result.returncode == 0, result.stderr
    answers = tool_answers(server)
    assert answers[0] == "exit code 0\n[stdout]\nhello|2|12|***|hi hello|sub\n"
    assert answers[1] == "exit code 3\n[stderr]\nbad\n"
    events = events_of(result)
    assert token not in result.stdout and token not in result.stderr
    finished = [(e["tool"], e["is_error"]) for e in events if e["event"] == "tool_finished"]
    assert finished == [("show", False), ("fail", True)]


# --- runner validate ---------------------------------------------------------


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RUNNER_CLI, "validate", str(path)], capture_output=True, text=True, timeout=120
    )


#: Places where a value could run as code, each with the rule a hook step breaks.
UNSAFE = {
    "bash -c {{ args.code }}": "executor",
    "eval {{ args.code }}": "evaluating-builtin",
    "{{ args.code }}": "command-name",
    'echo "{{ args.code }}"': "quoted",
    "x={{ args.code }}; $x": "tainted-variable",
}


@pytest.mark.parametrize("command", list(UNSAFE))
def test_validate_refuses_an_argument_where_it_could_run_with_the_hook_rule(
    tmp_path, command
) -> None:
    """The tool's problem has the file position, the JSON path and the same
    message (and rule name) as the same command in a hook step."""
    tool_file = config(
        tmp_path,
        f"""\
        version: 1
        agent:
          model: m
          tools:
            - name: risky
              description: Risky.
              parameters:
                type: object
                properties:
                  code: {{type: string}}
              run: {json.dumps(command)}
          environment:
            sandbox: local
        """,
        name="tool.yaml",
    )
    hook_file = config(
        tmp_path,
        f"""\
        version: 1
        inputs:
          acme.x:
            as: a
            schema: {{type: object, properties: {{code: {{type: string}}}}}}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: h
                on_create:
                  - run: {json.dumps(command.replace("args.", "a."))}
        """,
        name="hook.yaml",
    )
    refused = validate(tool_file)
    assert refused.returncode == 2, refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.startswith(str(tool_file))]
    assert lines, refused.stderr
    assert all(":11:" in line and "(at agent.tools[0].run)" in line for line in lines), lines
    rules = set(re.findall(r"\[([a-z-]+)\]", "\n".join(lines)))
    assert UNSAFE[command] in rules
    # The same command in a hook step breaks the same rules.
    hook = validate(hook_file)
    assert hook.returncode == 2
    assert set(re.findall(r"\[([a-z-]+)\]", hook.stderr)) == rules


def test_args_cannot_be_an_input_alias(tmp_path) -> None:
    path = config(
        tmp_path,
        """\
        version: 1
        inputs:
          acme.x:
            as: args
            schema: {type: object}
        agent:
          model: m
        """,
    )
    result = validate(path)
    assert result.returncode == 2 and "'args' is reserved" in result.stderr


def test_validate_refuses_an_undeclared_argument_and_a_bad_schema(tmp_path) -> None:
    path = config(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          builtin_tools: [read_file, bash, read_file]
          tools:
            - name: a
              description: A.
              parameters: {type: object, properties: {path: {type: string}}}
              run: cat -- {{ args.pth }}
            - name: b
              description: B.
              parameters: {type: array}
              run: "true"
            - name: read_file
              description: C.
              run: "true"
            - name: a
              description: D.
              run: "true"
            - name: has space
              description: E.
              run: "true"
          environment:
            sandbox: local
        """,
    )
    result = validate(path)
    assert result.returncode == 2
    text = result.stderr
    assert "agent.yaml:4:" in text and "builtin_tools" in text  # the repeated name
    path.write_text(path.read_text().replace("[read_file, bash, read_file]", "[read_file]"))
    text = validate(path).stderr
    assert "has space" in text  # the name pattern (schema)
    path.write_text(path.read_text().replace("name: has space", "name: e"))
    text = validate(path).stderr
    assert f"{path}:9:22: input 'args' has no field 'pth' (its schema declares: path)" in text
    assert f"{path}:12:19: a tool's parameters must have type: object" in text
    assert f"{path}:14:13: 'read_file' is a built-in tool's name" in text
    assert f"{path}:17:13: tool 'a' is declared twice (first as tools[0])" in text


def test_tools_need_a_sandbox(tmp_path) -> None:
    path = config(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          tools:
            - name: a
              description: A.
              run: "true"
        """,
    )
    result = validate(path)
    assert result.returncode == 2
    assert f"{path}:4:3: tools run commands in the sandbox, and sandbox: none has none" in (
        result.stderr
    )


# --- the check at call time ----------------------------------------------------


@pytest.mark.anyio
async def test_the_exact_script_is_checked_at_call_time_too(tmp_path) -> None:
    """A template that got past ``runner validate`` (here: built by hand,
    unchecked) is still checked on the exact text of each call, before it
    runs: the model gets the refusal with the rule's name, and nothing runs."""
    import warnings

    import runner as agents
    from runner.config.steps import RunStep
    from runner.config.templates import _SHELL, Template
    from runner.config.tools import CommandTool
    from runner.models.tools import ToolContext
    from runner.sandboxes.local import DangerousLocalWarning

    source = "eval {{ args.code }}"
    template = Template(source, True, frozenset({"args"}), _SHELL.parse(source))
    tool = CommandTool(
        name="risky",
        description="Risky.",
        parameters={"type": "object", "properties": {"code": {"type": "string"}}},
        step=RunStep(label="risky", command=template, check=False),
        bindings=[],
        max_output_chars=1000,
    )
    (tmp_path / "boxes").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DangerousLocalWarning)
        environment = agents.DangerousLocalSandbox(temp_dir=tmp_path / "boxes")
    sandbox = await environment.create(session_id="sess_x", expires_at=None)
    try:
        output = await tool.run(ToolContext(sandbox, "sess_x"), {"code": "touch CANARY"})
        listing = await sandbox.execute("ls -A")
    finally:
        await sandbox.delete()
    assert output.is_error
    assert output.text.startswith(
        "error: run command refused before it ran: line 1, column 1 (value 1)"
    )
    assert "[evaluating-builtin]" in output.text and output.text.endswith("nothing was run")
    assert listing.stdout == ""


# --- every backend: the cloud sandbox ----------------------------------------------


@pytest.fixture
def cloud(docker_client, monkeypatch):  # type: ignore[no-untyped-def]
    from conftest import TEST_IMAGE
    from koyeb_server import FakeCloud, containers_left_by, point_sdk_at

    with FakeCloud(docker_client, TEST_IMAGE) as fake:
        point_sdk_at(monkeypatch, fake)
        yield fake
    assert containers_left_by(fake, docker_client) == []


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_declared_tool_runs_in_the_cloud_sandbox_too(tmp_path, cloud) -> None:
    """The same compiled tool on MistralSandbox (the koyeb stand-in, each
    sandbox a real container): hostile values stay one word there too."""
    import runner as agents

    replies = [
        calls(*enumerate(("echo_it", {"value": value}) for value in HOSTILE[:4])),
        calls((90, ("listing", {}))),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        path = config(tmp_path, echo_config(server.url, "local"))
        declared = agents.load(str(path)).tools
        agent = agents.Agent(
            model="m",
            base_url=server.url,
            environment=agents.MistralSandbox(readiness_timeout_seconds=10),
            tools=declared,
            builtin_tools=[],
        )
        result = await agent.run("go")
    assert isinstance(result, agents.Completed), result
    answers = tool_answers(server)
    assert answers[:4] == [f"exit code 0\n[stdout]\n[{value}]\n" for value in HOSTILE[:4]]
    assert answers[4] == "exit code 0"
    assert len(cloud.calls("POST", "/v1/services")) == 1


def test_output_is_capped_and_a_timeout_is_reported(tmp_path) -> None:
    replies = [calls((0, ("numbers", {})), (1, ("slow", {}))), assistant("done")]
    with ChatServer(replies) as server:
        path = config(
            tmp_path,
            f"""\
            version: 1
            agent:
              model: m
              base_url: {server.url}
              builtin_tools: []
              tools:
                - name: numbers
                  description: Many numbers.
                  run: seq 1 5000
                  max_output_chars: 200
                - name: slow
                  description: Too slow.
                  run: sleep 30
                  timeout_seconds: 1
              environment:
                sandbox: local
            """,
        )
        result = run_cli(tmp_path, path)
    assert result.returncode == 0, result.stderr
    numbers, slow = tool_answers(server)
    assert numbers.startswith("exit code 0\n[stdout]\n1\n2\n") and numbers.endswith("4999\n5000\n")
    assert "characters omitted ...]" in numbers and len(numbers) < 300
    assert slow == "exit code 124 (timed out)"
