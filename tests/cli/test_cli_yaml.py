"""The runner CLI on YAML files, run as a real subprocess, as users and CI run it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import RUNNER_CLI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scale import scaled

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def runner(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def write(tmp_path: Path, text: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


CAPTURE = """\
version: 1
consumers: [capture]  # a program of the test's own: named, it may get a value
inputs:
  t.value:
    as: v
    schema:
      type: object
      properties:
        text: {type: string}
      required: [text]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: capture
        on_create:
          # A program of its own, not `python3 -c`: an interpreter never gets a value.
          - write: capture
            content: |
              #!/usr/bin/env python3
              import json, sys
              args = sys.argv[2:]  # after the --
              open("args.json", "w").write(json.dumps(args))
              open("arg.bin", "wb").write(args[0].encode("utf-8", "surrogateescape"))
          - run: chmod +x capture
          # -- before the value: a value that starts with - (-n, --help) is
          # refused where a program would read it as an option
          - run: ./capture -- {{ v.text }}
          - run: rm capture && ls -A > listing.txt
        on_destroy:
          - save: args.json
            to: args.json
          - save: arg.bin
            to: arg.bin
          - save: listing.txt
            to: listing.txt
"""


def run_capture(tmp_path: Path, value: str) -> tuple[list[str], bytes]:
    config = tmp_path / "capture.yaml"
    if not config.exists():
        config.write_text(CAPTURE)
    out = tmp_path / "out"
    result = runner(
        "run", str(config), "--input", f"t.value.text={value}", "--output-dir", str(out)
    )
    assert result.returncode == 0, result.stderr
    # Nothing the value could have run made a file: only the capture's own files exist.
    assert (out / "listing.txt").read_text().split() == ["arg.bin", "args.json", "listing.txt"]
    return json.loads((out / "args.json").read_text()), (out / "arg.bin").read_bytes()


HOSTILE = [
    'it\'s "quoted"',
    "$(touch pwned)",
    "`touch pwned`",
    "a; touch pwned | cat && echo & wait",
    "line one\nline two\n",
    "* ? [a-z] ~ {a,b}",
    "-n",
    "--help",
    "ünïcødé ☃ 🚀 中文",
    "",
    "back\\slash \\n",
    "x" * 10_000,
]


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_values_reach_the_sandbox_as_one_argument_byte_for_byte(tmp_path, value) -> None:
    args, raw = run_capture(tmp_path, value)
    assert args == [value]
    assert raw == value.encode("utf-8")


# Each example runs the CLI: 15 in CI, 40 in scripts/long (tests/support/scale.py);
# the HOSTILE list above runs in both.
@pytest.mark.slow
@settings(
    max_examples=scaled(15, 40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    value=st.text(
        # Half shell metacharacters (a `$`-only word, a leading `-`...), half any Unicode;
        # tests/config/test_templates.py runs 300 more examples in-process.
        alphabet=st.one_of(
            st.sampled_from("$-'\"`\\ \t\n;&|<>()[]{}*?!~#="),
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        ),
        max_size=200,
    )
)
def test_any_value_reaches_the_sandbox_as_one_argument(tmp_path, value) -> None:
    args, raw = run_capture(tmp_path, value)
    assert args == [value]
    assert raw == value.encode("utf-8")


def test_nul_in_an_input_is_refused_before_anything_runs(tmp_path) -> None:
    config = write(tmp_path, CAPTURE)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"t.value": {"text": "a\u0000b"}}))
    result = runner(
        "run", str(config), "--inputs", str(inputs), "--output-dir", str(tmp_path / "o")
    )
    assert result.returncode == 2
    assert "field 'text' contains a NUL character" in result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_example_validates(example) -> None:
    result = runner("validate", str(example))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{example}: ok"


def test_validate_reports_every_problem_and_exits_2(tmp_path) -> None:
    bad = write(
        tmp_path, "version: 1\nagent:\n  model: m\n  colour: red\n  environment: {sandbox: dockr}\n"
    )
    good = ROOT / "examples" / "quickstart.yaml"
    result = runner("validate", str(good), str(bad))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert (
        f"{bad}:4:3: unknown key 'colour'" in lines[1]
        or f"{bad}:4:3: unknown key 'colour'" in lines[0]
    )
    assert any(f"{bad}:5:26: 'dockr' is not one of" in line for line in lines)
    assert lines[-1] == "runner: 2 problem(s) in 2 file(s)"
    assert result.stdout.strip() == f"{good}: ok"


def test_validate_does_not_import_docker() -> None:
    code = (
        "import sys\nfrom runner.cli.main import main\n"
        f"try:\n    main(['validate', {str(ROOT / 'examples' / 'ci-pipeline.yaml')!r}])\n"
        "except SystemExit as exit:\n    assert exit.code in (0, None), exit.code\n"
        "print('docker' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == "False", result.stderr


def test_render_prints_quoted_commands_in_lifecycle_order(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        consumers: [curl]
        inputs:
          acme.repository:
            as: repo
            schema:
              type: object
              properties:
                repository: {type: string}
              required: [repository]
          acme.token:
            as: token
            secret: true
            schema:
              type: object
              properties:
                value: {type: string}
              required: [value]
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: a
                on_create: [{run: "echo {{ repo.repository }}"}]
                on_destroy: [{run: echo a-bye}]
              - uses: git-identity
                with: {name: "O'Brien", email: o@example.com}
              - name: b
                on_create: [{run: "curl -H {{ token.value }} x"}]
                on_destroy: [{save: out.txt, to: out.txt}]
        """,
    )
    result = runner(
        "render",
        str(config),
        "--input",
        "acme.repository.repository=it's $(x)",
        "--input",
        "acme.token.value=sk-very-secret",
        env={"TMPDIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "# a.on_create",
        "echo 'it'\"'\"'s $(x)'",
        "# git-identity.on_create",
        "git config --global user.name 'O'\"'\"'Brien' && git config --global user.email o@example.com",
        "# b.on_create",
        "curl -H '***' x",
        "# b.on_destroy",
        "# save out.txt -> out.txt",
        "# a.on_destroy",
        "echo a-bye",
    ]
    assert "sk-very-secret" not in result.stdout + result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["agent.yaml"]


def test_run_prints_progress_and_saves_into_the_output_dir(tmp_path) -> None:
    result = runner(
        "run",
        str(ROOT / "examples" / "quickstart.yaml"),
        "--input",
        "acme.repository.repository=acme/api",
        "--output-dir",
        str(tmp_path / "out"),
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "saved-notes.md").read_text() == "Run the tests with pytest.\n"
    assert "    [2] printf '%s@%s\\n' 'acme/api' 'main' > REPOSITORY ok (" in result.stderr
    assert "  seed-workspace.on_destroy ok (" in result.stderr
    assert "  sandbox deleted" in result.stderr


def test_run_json_writes_one_event_per_line(tmp_path) -> None:
    result = runner(
        "run",
        str(ROOT / "examples" / "quickstart.yaml"),
        "--inputs",
        str(write(tmp_path, '{"acme.repository": {"repository": "acme/api"}}', "in.json")),
        "--output-dir",
        str(tmp_path),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "session_starting"
    assert kinds.count("step_finished") == 3
    assert kinds[-2:] == ["session_closed", "result"]
    assert events[-1]["exit_code"] == 0


def test_input_from_a_file_with_at(tmp_path) -> None:
    value = write(tmp_path, "repository: acme/api\nrevision: v2\n", "repo.yaml")
    result = runner(
        "run",
        str(ROOT / "examples" / "quickstart.yaml"),
        "--input",
        f"acme.repository=@{value}",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "printf '%s@%s\\n' 'acme/api' 'v2' > REPOSITORY ok" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "acme.repository.repository=not a repo"], "does not match"),
        ([], "needs session input 'acme.repository'"),
        (["--input", "acme.repo.x=1"], "no declared input matches 'acme.repo.x'"),
        (["--input", "nonsense"], "expected ID.FIELD=VALUE"),
    ],
)
def test_bad_inputs_exit_2_and_create_nothing(tmp_path, args, message) -> None:
    result = runner(
        "run",
        str(ROOT / "examples" / "quickstart.yaml"),
        *args,
        "--output-dir",
        str(tmp_path / "o"),
        env={"TMPDIR": str(tmp_path)},
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_failing_hook_exits_1_naming_the_hook_and_still_cleans_up(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: keeper
                on_destroy: [{save: kept.txt, to: kept.txt}]
              - name: breaker
                on_create:
                  - {write: kept.txt, content: "kept\\n"}
                  - {run: "echo broken >&2; exit 4"}
        """,
    )
    result = runner(
        "run", str(config), "--output-dir", str(tmp_path / "out"), env={"TMPDIR": str(tmp_path)}
    )
    assert result.returncode == 1
    assert (
        "runner: hook breaker.on_create failed: StepFailedError: step 2 "
        "(echo broken >&2; exit 4) failed: command exited 4: broken"
    ) in result.stderr
    assert (tmp_path / "out" / "kept.txt").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml", "out"]


def test_secrets_never_reach_progress_or_errors(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        inputs:
          acme.token:
            as: token
            secret: true
            schema: {type: object, properties: {value: {type: string}}, required: [value]}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: leaky
                on_create:
                  - run: "echo using {{ token.value }} >&2; exit 1"
        """,
    )
    result = runner("run", str(config), "--input", "acme.token.value=sk-live-123456", "--json")
    assert result.returncode == 1
    assert "sk-live-123456" not in result.stderr + result.stdout
    assert "using *** " in result.stderr or "using ***" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_runs_on_destroy_then_exits_130(tmp_path, sig) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: marker
                on_destroy: [{save: MARK, to: destroyed.txt}]
              - name: first
                on_create: [{write: MARK, content: "created\\n"}]
              - name: slow
                on_create: [{run: "sleep 60", timeout_seconds: 120}]
        """,
    )
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", str(config), "--output-dir", str(tmp_path / "out")],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    deadline = time.monotonic() + 30
    progress = ""
    while "slow.on_create" not in progress and time.monotonic() < deadline:
        progress += process.stderr.readline()
    process.send_signal(sig)
    rest = process.communicate(timeout=30)[1]
    assert process.returncode == 130
    assert "marker.on_destroy ok" in rest
    assert "interrupted; the session was closed" in rest
    assert (tmp_path / "out" / "destroyed.txt").read_text() == "created\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml", "out"]


def test_a_prompt_for_a_mistral_model_without_a_key_fails_before_any_sandbox(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MISTRAL_API_KEY"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "run",
            str(ROOT / "examples" / "git-identity.yaml"),
            "--prompt",
            "hi",
        ],
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(tmp_path)},
        timeout=60,
    )
    assert result.returncode == 2
    assert "needs MISTRAL_API_KEY" in result.stderr
    assert list(tmp_path.iterdir()) == []


def agent_file(tmp_path: Path, base_url: str) -> Path:
    return write(
        tmp_path,
        f"""\
        version: 1
        agent:
          name: helper
          model: local-model
          base_url: {base_url}
          instructions: Answer briefly.
          max_tool_calls: 3
          environment:
            sandbox: local
            hooks:
              - name: seed
                on_create: [{{write: FACT.txt, content: "the sky is blue\\n"}}]
        """,
    )


def test_run_with_a_prompt_prints_the_answer(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    replies = [
        assistant(None, ("c1", "bash", {"command": "cat FACT.txt"})),
        assistant("The sky is blue."),
    ]
    with ChatServer(replies) as server:
        result = runner("run", str(agent_file(tmp_path, server.url)), "--prompt", "What colour?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The sky is blue.\n"
    assert "turn completed" in result.stderr
    body = server.requests[0]["body"]
    assert body["model"] == "local-model"
    assert body["messages"][0] == {"role": "system", "content": "Answer briefly."}
    tool_result = server.requests[1]["body"]["messages"][-1]
    assert tool_result["content"] == "exit code 0\n[stdout]\nthe sky is blue\n"


def test_run_with_a_prompt_file_and_json_reports_a_turn_event(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Say hi")
    with ChatServer([assistant("hi!")]) as server:
        result = runner(
            "run", str(agent_file(tmp_path, server.url)), "--prompt-file", str(prompt), "--json"
        )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    turn = next(e for e in events if e["event"] == "turn")
    assert (turn["status"], turn["text"], turn["tool_calls"]) == ("completed", "hi!", [])
    assert server.requests[0]["body"]["messages"][-1] == {"role": "user", "content": "Say hi"}


def test_a_failed_turn_exits_1_after_closing_the_session(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    looping = [assistant(None, (f"c{i}", "bash", {"command": "true"})) for i in range(5)]
    with ChatServer(looping) as server:
        result = runner(
            "run",
            str(agent_file(tmp_path, server.url)),
            "--prompt",
            "loop",
            env={"TMPDIR": str(tmp_path)},
        )
    assert result.returncode == 1
    assert "runner: turn failed: tool call limit of 3 reached" in result.stderr
    assert "sandbox deleted" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


def test_init_writes_a_starter_that_validates_and_runs(tmp_path) -> None:
    result = runner("init", cwd=tmp_path)
    assert result.returncode == 0
    assert runner("validate", "runner.yaml", cwd=tmp_path).returncode == 0
    again = runner("init", cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
    ran = runner("run", "runner.yaml", "--input", "demo.task.title=hello", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "task-notes.md").read_text() == "hello\n"


def test_info_reports_what_can_run_here(tmp_path) -> None:
    result = runner(
        "info",
        str(ROOT / "examples" / "quickstart.yaml"),
        env={"MISTRAL_API_KEY": "sk-x", "KOYEB_API_TOKEN": "kt-y"},
    )
    assert result.returncode == 0, result.stderr
    assert "docker:" in result.stdout
    assert "extra koyeb: installed" in result.stdout  # the test extra brings koyeb-sdk
    assert "KOYEB_API_TOKEN: set" in result.stdout
    assert "kt-y" not in result.stdout
    assert "MISTRAL_API_KEY: set" in result.stdout
    assert "sk-x" not in result.stdout
    assert "sandbox local" in result.stdout


def test_a_failing_on_destroy_fails_the_run(tmp_path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)  # leads outside --output-dir
    config = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: exporter
                on_create: [{write: N.md, content: x}]
                on_destroy: [{save: N.md, to: link/N.md}]
        """,
    )
    result = runner("run", str(config), "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "runner: sandbox hook exporter.on_destroy failed: StepFailedError:" in result.stderr
    assert "through a symlink" in result.stderr
    assert not (tmp_path / "N.md").exists()


def test_the_error_names_the_hook_that_raised_not_the_last_to_fail(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - {name: a, on_destroy: [{run: exit 3}]}
              - {name: b, on_create: [{run: exit 5}]}
        """,
    )
    result = runner("run", str(config))
    assert result.returncode == 1
    assert (
        "runner: hook b.on_create failed: StepFailedError: step 1 (exit 5) failed: command exited 5"
        in result.stderr
    )
    assert "runner: hook a." not in result.stderr


SECRET_CONFIG = """\
version: 1
consumers: [long-error]
inputs:
  t.tok:
    as: tok
    secret: true
    schema:
      type: object
      properties:
        token: {type: string, pattern: "^[A-Za-z0-9!-]+$"}
      required: [token]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: uses-token
        on_create:
          - write: long-error
            content: |
              #!/usr/bin/env python3
              import sys
              sys.stderr.write("x" * 1500 + sys.argv[1] + "y" * 900)
              sys.exit(2)
          - run: chmod +x long-error
          - run: ./long-error {{ tok.token }}
"""


def test_a_secret_that_fails_validation_is_not_shown(tmp_path) -> None:
    config = write(tmp_path, SECRET_CONFIG)
    for command in ("render", "run"):
        result = runner(command, str(config), "--input", "t.tok.token=Sup3r Secret")
        assert result.returncode == 2
        assert "Sup3r Secret" not in result.stderr + result.stdout
        assert "the value is secret and not shown" in result.stderr


def test_a_secret_is_scrubbed_before_long_output_is_cut(tmp_path) -> None:
    config = write(tmp_path, SECRET_CONFIG)
    secret = "SECRETVALUE-ABCDEFGH"
    result = runner("run", str(config), "--input", f"t.tok.token={secret}", "--json")
    assert result.returncode == 1
    for fragment in (secret, "ABCDEFGH", "SECRETVALUE"):
        assert fragment not in result.stderr + result.stdout
    assert "***" in result.stderr


def test_an_optional_input_no_template_uses_is_accepted(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        inputs:
          t.opt:
            required: false
            schema: {type: object, properties: {v: {type: string, default: d}}}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - {name: h, on_create: [{run: "true"}]}
        """,
    )
    assert runner("render", str(config), "--input", "t.opt.v=x").returncode == 0
    assert runner("run", str(config)).returncode == 0


def _interrupted_during_on_destroy(tmp_path, signals: int) -> tuple[subprocess.Popen, str]:
    """A run interrupted once during on_create, then ``signals - 1`` more times
    once the slow on_destroy (sleep 20, then a save) has started."""
    config = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: slow-exporter
                on_create: [{write: MARK, content: "made\\n"}]
                on_destroy: [{run: sleep 20, timeout_seconds: 60}, {save: MARK, to: saved.txt}]
              - name: waits
                on_create: [{run: "sleep 60", timeout_seconds: 120}]
        """,
    )
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", str(config), "--output-dir", str(tmp_path / "out")],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    progress = ""
    deadline = time.monotonic() + 30
    while "waits.on_create" not in progress and time.monotonic() < deadline:
        progress += process.stderr.readline()
    process.send_signal(signal.SIGINT)
    while "slow-exporter.on_destroy" not in progress and time.monotonic() < deadline:
        progress += process.stderr.readline()
    for _ in range(signals - 1):
        process.send_signal(signal.SIGINT)
    return process, progress


@pytest.mark.slow
def test_one_signal_lets_on_destroy_finish(tmp_path) -> None:
    process, progress = _interrupted_during_on_destroy(tmp_path, signals=1)
    rest = process.communicate(timeout=60)[1]
    assert process.returncode == 130
    assert "interrupt again to skip it" in progress + rest
    assert (tmp_path / "out" / "saved.txt").read_text() == "made\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml", "out"]


def test_a_second_signal_stops_on_destroy_and_deletes_the_sandbox_at_once(tmp_path) -> None:
    started = time.monotonic()
    process, _ = _interrupted_during_on_destroy(tmp_path, signals=2)
    rest = process.communicate(timeout=60)[1]
    assert process.returncode == 130
    assert time.monotonic() - started < 15  # not the 20 s of the on_destroy sleep
    assert "interrupted again: on_destroy stopped, deleting the sandbox" in rest
    assert "sandbox deleted" in rest
    assert not (tmp_path / "out" / "saved.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_validate_refuses_what_is_not_a_regular_file_at_once(tmp_path, kind) -> None:
    """/dev/zero would be read until memory runs out; a FIFO with no writer would
    block forever (the subprocess timeout turns a hang into a failure)."""
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "agent.yaml")
        os.mkfifo(path)
    started = time.monotonic()
    result = runner("validate", path, timeout=20)
    assert time.monotonic() - started < 10
    assert result.returncode == 2
    assert f"{path}:1:1: not a regular file" in result.stderr


def test_no_leading_dash_refuses_a_negative_number_from_the_command_line(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        consumers: [git]
        inputs:
          ci.fetch:
            as: fetch
            no_leading_dash: true
            schema: {type: object, properties: {depth: {type: integer}}, required: [depth]}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: clone
                on_create: [{run: "git fetch --depth {{ fetch.depth }} origin"}]
        """,
    )
    for command in ("render", "run"):
        result = runner(command, str(config), "--input", "ci.fetch.depth=-5", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "field 'depth' starts with '-'" in result.stderr
    positive = runner("render", str(config), "--input", "ci.fetch.depth=5", cwd=tmp_path)
    assert positive.returncode == 0, positive.stderr
