"""The ``run --json`` events are a contract: ``runner/schemas/events.schema.json``.

Every test here runs the real CLI in a subprocess on the local sandbox and
validates every line it writes to stdout against the shipped schema, so a
field added, renamed or retyped in the code without the schema fails here.
Each scenario also names the event kinds it must produce; together with the
kinds only Docker can produce, they must cover every kind the schema
documents, and every ``emit("...")`` in the source must be documented.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import RUNNER_CLI, cli_package_dir
from jsonschema import Draft202012Validator

ROOT = Path(__file__).parents[2]
SCHEMA_FILE = ROOT / "runner" / "schemas" / "events.schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
DOCUMENTED = {entry["properties"]["event"]["const"] for entry in SCHEMA["oneOf"]}

SESSION = {
    "session_starting",
    "sandbox_creating",
    "sandbox_created",
    "hook_started",
    "hook_finished",
    "step_started",
    "step_finished",
    "session_started",
    "session_closing",
    "sandbox_deleting",
    "sandbox_deleted",
    "session_closed",
    "result",
}
#: The kinds each scenario below must produce.
PRODUCES = {
    "success": SESSION,
    "hook failure": {"hook_failed", "step_failed", "result"},
    "config error": {"result"},
    "input error": {"result"},
    "interrupt": {"hook_cancelled", "result"},
    "input sets": {"set_result", "result"},
    "turn": {"turn_started", "tool_called", "tool_finished", "turn", "result"},
}
#: Kinds no local run can produce: the exec channel and snapshots exist in
#: Docker sandboxes only (tests/sandboxes/test_exec_channel.py and tests/sandboxes/test_snapshots.py
#: check them on a real engine).
#: Kinds only runner serve sends (tests/serve/test_serve_durability.py and
#: tests/serve/test_serve_sandbox_gone.py check them).
SERVE_ONLY = {"session_resumed", "sandbox_gone"}
DOCKER_ONLY = {
    "exec_channel_started",
    "exec_channel_unavailable",
    "exec_channel_lost",
    "snapshot_used",
    "snapshot_saved",
}


def write(tmp_path: Path, text: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_json(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``runner run ARGS --json``, its sandboxes made under ``tmp_path`` (to see them go)."""
    return subprocess.run(
        [*RUNNER_CLI, "run", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=timeout,
    )


def valid_events(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line parsed, each one checked against the schema."""
    events = [json.loads(line) for line in stdout.splitlines()]
    assert events, "no events on stdout"
    for event in events:
        errors = [e.message for e in VALIDATOR.iter_errors(event)]
        assert not errors, f"{event} does not match the schema: {errors}"
    return events


def final_result(events: list[dict[str, Any]], exit_code: int) -> dict[str, Any]:
    """The last event, which must be the one and only ``result``, with the exit code."""
    result = events[-1]
    assert result["event"] == "result"
    assert [e["event"] for e in events].count("result") == 1
    assert result["exit_code"] == exit_code
    assert result["duration_seconds"] >= 0
    assert "session_id" in result
    assert (result["error"] is None) == (exit_code == 0)
    return result


def kinds(events: list[dict[str, Any]]) -> set[str]:
    return {event["event"] for event in events}


SUCCESS = """\
version: 1
agent:
  name: events-agent
  model: m
  environment:
    sandbox: local
    hooks:
      - name: seed
        on_create:
          - {write: NOTE.md, content: "hello\\n"}
          - run: cat NOTE.md
        on_destroy:
          - {save: NOTE.md, to: note.md}
          - {save: ABSENT, to: absent.md, missing_ok: true}
"""


def test_a_successful_run_matches_the_schema_and_ends_with_its_result(tmp_path) -> None:
    config = write(tmp_path, SUCCESS)
    result = run_json(tmp_path, str(config), "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    events = valid_events(result.stdout)
    assert kinds(events) >= PRODUCES["success"]
    final = final_result(events, 0)
    assert final["session_id"] == events[0]["session_id"]
    assert (final["messages"], final["text"]) == ([], None)
    saved = [e for e in events if e["event"] == "step_finished" and e["kind"] == "save"]
    assert (saved[0]["host_path"], saved[0]["bytes"]) == (str(tmp_path / "out" / "note.md"), 6)
    assert saved[1]["skipped"] == "missing"
    ran = next(e for e in events if e["event"] == "step_finished" and e["kind"] == "run")
    assert (ran["exit_code"], ran["timed_out"]) == (0, False)


def test_a_hook_failure_ends_with_a_result_that_says_which_hook(tmp_path) -> None:
    config = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: breaks
                on_create: [{run: "echo broken >&2; exit 3"}]
        """,
    )
    result = run_json(tmp_path, str(config))
    assert result.returncode == 1, result.stderr
    events = valid_events(result.stdout)
    assert kinds(events) >= PRODUCES["hook failure"]
    final = final_result(events, 1)
    assert final["session_id"] == events[0]["session_id"]
    assert "hook breaks.on_create failed" in final["error"]
    assert "command exited 3: broken" in final["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


def test_a_config_error_is_one_result_event_naming_the_problem(tmp_path) -> None:
    config = write(tmp_path, "version: 1\nagent:\n  model: m\n  bogus: 1\n")
    result = run_json(tmp_path, str(config))
    assert result.returncode == 2
    events = valid_events(result.stdout)
    assert len(events) == 1 and kinds(events) == PRODUCES["config error"]
    final = final_result(events, 2)
    assert final["session_id"] is None
    assert f"{config}:4:3: unknown key 'bogus'" in final["error"]
    assert final["messages"][0] == f"1 problem(s) in {config}"


@pytest.mark.parametrize("bad", [["--sandbox", "bogus"], ["--no-such-option"], ["--parallel", "0"]])
def test_a_usage_error_is_one_result_event_too(tmp_path, bad) -> None:
    """Errors click finds in the arguments, before run's own code starts."""
    config = write(tmp_path, "version: 1\nagent:\n  model: m\n")
    result = run_json(tmp_path, str(config), *bad)
    assert result.returncode == 2
    events = valid_events(result.stdout)
    assert len(events) == 1
    final = final_result(events, 2)
    assert final["session_id"] is None
    assert bad[0] in final["error"], final


INPUTS = """\
version: 1
inputs:
  demo.task:
    as: task
    schema:
      type: object
      properties:
        title: {type: string, minLength: 1}
      required: [title]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: note
        on_create: [{run: "echo {{ task.title }} > TASK.md"}]
        on_destroy: [{save: TASK.md, to: task.md}]
"""


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ([], "demo.task"),
        (["--input", "demo.tusk.title=x"], "demo.tusk"),
        (["--input", "demo.task.title="], "title"),
        (["--inputs", "missing.json"], "missing.json"),
        (["--input-sets", "missing.yaml"], "missing.yaml"),
    ],
    ids=["missing-input", "unknown-input", "invalid-value", "missing-inputs-file", "missing-sets"],
)
def test_an_input_error_is_one_result_event_saying_why(tmp_path, args, why) -> None:
    config = write(tmp_path, INPUTS)
    result = run_json(tmp_path, str(config), *args)
    assert result.returncode == 2
    events = valid_events(result.stdout)
    assert len(events) == 1 and kinds(events) == PRODUCES["input error"]
    final = final_result(events, 2)
    assert final["session_id"] is None
    assert why in final["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


def test_input_sets_report_each_set_then_one_result(tmp_path) -> None:
    config = write(tmp_path, INPUTS)
    sets = write(tmp_path, "- {demo.task: {title: one}}\n- {demo.task: {title: ''}}\n", "sets.yaml")
    result = run_json(
        tmp_path, str(config), "--input-sets", str(sets), "--output-dir", str(tmp_path / "out")
    )
    assert result.returncode == 2, result.stderr
    events = valid_events(result.stdout)
    assert kinds(events) >= PRODUCES["input sets"]
    assert all(e["set"] in (1, 2) for e in events if e["event"] not in ("result", "set_result"))
    per_set = [e for e in events if e["event"] == "set_result"]
    assert [(e["set"], e["exit_code"]) for e in per_set] == [(1, 0), (2, 2)]
    assert per_set[0]["session_id"].startswith("sess_") and per_set[1]["session_id"] is None
    final = final_result(events, 2)
    assert (final["sessions"], final["failed"], final["session_id"]) == (2, 1, None)
    assert final["error"].startswith("set 2: ")


AGENT = """\
version: 1
agent:
  name: helper
  model: local-model
  base_url: {base_url}
  max_tool_calls: 3
  environment:
    sandbox: local
    hooks:
      - name: seed
        on_create: [{{write: FACT.txt, content: "the sky is blue\\n"}}]
"""


def test_a_turn_event_carries_the_answer_and_its_tool_calls(tmp_path) -> None:
    from chat_server import ChatServer, assistant

    replies = [
        assistant(None, ("c1", "bash", {"command": "cat FACT.txt"})),
        assistant("The sky is blue."),
    ]
    with ChatServer(replies) as server:
        config = write(tmp_path, AGENT.format(base_url=server.url))
        result = run_json(tmp_path, str(config), "--prompt", "What colour?")
    assert result.returncode == 0, result.stderr
    events = valid_events(result.stdout)
    assert kinds(events) >= PRODUCES["turn"]
    turn = next(e for e in events if e["event"] == "turn")
    assert (turn["status"], turn["text"], turn["error"]) == ("completed", "The sky is blue.", None)
    assert turn["tool_calls"] == [{"name": "file_system.bash", "is_error": False}]
    called = next(e for e in events if e["event"] == "tool_called")
    finished = next(e for e in events if e["event"] == "tool_finished")
    assert called["tool"] == finished["tool"] == "file_system.bash"
    assert called["call_id"] == finished["call_id"] and not finished["is_error"]
    assert final_result(events, 0)["text"] == "The sky is blue."


INTERRUPTED = {
    "hooks completed": (
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
        "on_destroy ran for first (ok), marker (ok); the sandbox was deleted",
    ),
    "none completed": (
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: slow
                on_create: [{run: "sleep 60", timeout_seconds: 120}]
                on_destroy: [{save: MARK, to: destroyed.txt}]
        """,
        "no on_destroy ran (no hook had completed on_create); the sandbox was deleted",
    ),
}


def is_sleep_started(event: dict[str, Any]) -> bool:
    return event["event"] == "step_started" and event["title"] == "sleep 60"


def interrupt_during_sleep(
    tmp_path: Path, config: Path, sig: signal.Signals, *args: str
) -> tuple[str, str]:
    """Start a run, wait for a ``sleep 60`` step's ``step_started`` event, signal it."""
    command = [*RUNNER_CLI, "run", str(config), "--json", *args]
    process = subprocess.Popen(
        [*command, "--output-dir", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    seen = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        seen += line
        if not line or is_sleep_started(json.loads(line)):
            break
    assert line, f"the run ended before its sleep step started: {seen}"
    process.send_signal(sig)
    rest, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    return seen + rest, stderr


@pytest.mark.parametrize("case", list(INTERRUPTED))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_ends_with_a_result_saying_what_cleanup_ran(tmp_path, case, sig) -> None:
    text, closing = INTERRUPTED[case]
    config = write(tmp_path, text)
    stdout, stderr = interrupt_during_sleep(tmp_path, config, sig)
    events = valid_events(stdout)
    assert kinds(events) >= PRODUCES["interrupt"]
    final = final_result(events, 130)
    assert final["session_id"] == events[0]["session_id"]
    assert final["error"] == f"interrupted; the session was closed: {closing}"
    assert f"runner: interrupted; the session was closed: {closing}" in stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "out") == ["agent.yaml"]


def test_an_interrupt_of_input_sets_says_how_each_set_was_closed(tmp_path) -> None:
    config = write(tmp_path, INTERRUPTED["hooks completed"][0])
    sets = write(tmp_path, "- {}\n- {}\n", "sets.yaml")
    stdout, stderr = interrupt_during_sleep(
        tmp_path, config, signal.SIGINT, "--input-sets", str(sets), "--parallel", "2"
    )
    events = valid_events(stdout)
    waited = next(e["set"] for e in events if e.get("title") == "sleep 60")
    final = final_result(events, 130)
    assert (final["session_id"], final["sessions"], "failed" in final) == (None, 2, False)
    assert final["messages"][0] == "interrupted; every session that had started was closed"
    closed = f"set {waited}: on_destroy ran for first (ok), marker (ok); the sandbox was deleted"
    assert closed in final["messages"]
    assert f"runner: {closed}" in stderr
    assert not [e for e in events if e["event"] == "set_result"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "out") == [
        "agent.yaml",
        "sets.yaml",
    ]


def test_every_documented_kind_is_produced_by_a_scenario_here_or_needs_docker() -> None:
    produced = set().union(*PRODUCES.values())
    assert produced | DOCKER_ONLY | SERVE_ONLY == DOCUMENTED
    assert not produced & (DOCKER_ONLY | SERVE_ONLY)


def source_texts() -> dict[Path, str]:
    return {
        path: path.read_text(encoding="utf-8") for path in sorted((ROOT / "runner").rglob("*.py"))
    }


def test_every_emitted_event_is_documented() -> None:
    """A new ``emit("name", ...)`` (or a CLI-written event) cannot go undocumented."""
    patterns = [r"\bemit\(\s*\"(\w+)\"", r"\"event\":\s*\"(\w+)\"", r"as_event\(\s*\"(\w+)\""]
    emitted = {
        (name, path.name)
        for path, text in source_texts().items()
        for pattern in patterns
        for name in re.findall(pattern, text)
    }
    assert len({name for name, _ in emitted}) >= 18, emitted  # the scan does find them
    dynamic = [
        (path.name, first)
        for path, text in source_texts().items()
        for first in re.findall(r"(?<!def )\bemit\(\s*([^\s,)]+)", text)
        if not first.startswith('"')
    ]
    assert not dynamic, f"emit a literal kind, so this test can see it: {dynamic}"
    undocumented = sorted((name, where) for name, where in emitted if name not in DOCUMENTED)
    assert not undocumented, f"document these in {SCHEMA_FILE.name}: {undocumented}"


def test_every_documented_event_is_sent_somewhere() -> None:
    """The reverse: the schema lists no kind the code never sends."""
    everything = "\n".join(source_texts().values())
    phantom = sorted(kind for kind in DOCUMENTED if f'"{kind}"' not in everything)
    assert not phantom


def test_every_field_is_typed_described_and_closed() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    definitions = SCHEMA["$defs"]
    for entry in SCHEMA["oneOf"]:
        assert entry["additionalProperties"] is False, entry["title"]
        assert {"event", "time"} <= set(entry["required"]) <= set(entry["properties"])
        for name, field in entry["properties"].items():
            if "$ref" in field:
                field = definitions[field["$ref"].removeprefix("#/$defs/")]
            assert field.get("description"), (entry["title"], name)
            assert "type" in field or "const" in field, (entry["title"], name)


def test_an_undocumented_field_or_kind_fails_validation() -> None:
    event = {
        "event": "session_started",
        "time": 1.0,
        "session_id": "sess_" + "0" * 32,
        "agent": "a",
    }
    assert VALIDATOR.is_valid(event)
    assert not VALIDATOR.is_valid({**event, "extra": 1})
    assert not VALIDATOR.is_valid({**event, "event": "session_exploded"})
    assert not VALIDATOR.is_valid({k: v for k, v in event.items() if k != "time"})


def runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*RUNNER_CLI, *args], capture_output=True, text=True, timeout=60)


def test_schema_events_prints_the_shipped_events_schema() -> None:
    printed = runner("schema", "--events")
    assert printed.returncode == 0
    assert json.loads(printed.stdout) == SCHEMA


@pytest.mark.parametrize(
    ("args", "name"),
    [(["--path"], "runner.schema.json"), (["--events", "--path"], "events.schema.json")],
)
def test_schema_path_prints_the_installed_file(args, name) -> None:
    printed = runner("schema", *args)
    assert printed.returncode == 0
    path = Path(printed.stdout.strip())
    assert path.is_absolute() and path.name == name
    assert path == (cli_package_dir() / "schemas" / name).resolve()
    text = runner("schema", *args[:-1]).stdout
    assert path.read_text(encoding="utf-8") == text


def test_schema_alone_still_prints_the_yaml_schema() -> None:
    printed = runner("schema")
    assert printed.returncode == 0
    assert json.loads(printed.stdout)["title"] == "sandbox-runner configuration"
