"""Agent turns with a scripted Model: tools act on the real sandbox."""

from __future__ import annotations

import json

import pytest

import runner as agents
from runner.testing import ScriptedModel

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str, **arguments) -> agents.ToolCall:
    return agents.ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def reply(text: str = "", *calls: agents.ToolCall) -> agents.ModelReply:
    return agents.ModelReply(text=text, tool_calls=tuple(calls))


async def test_tool_calls_run_in_the_sandbox_until_the_model_answers(backend) -> None:
    model = ScriptedModel(
        [
            reply("", call("1", "write_file", path="answer.txt", content="42")),
            reply("", call("2", "bash", command="cat answer.txt; echo oops >&2")),
            reply("", call("3", "read_file", path="answer.txt")),
            reply("The answer is 42."),
        ]
    )
    agent = agents.Agent(model=model, instructions="Use tools.", environment=backend.environment())
    result = await agent.run("What is the answer?")
    assert isinstance(result, agents.Completed)
    assert result.text == "The answer is 42."
    assert [r.name for r in result.tool_calls] == [
        "file_system.write_file",
        "file_system.bash",
        "file_system.read_file",
    ]
    assert result.tool_calls[1].output == "exit code 0\n[stdout]\n42\n[stderr]\noops\n"
    assert result.tool_calls[2].output == "42"
    messages, tools = model.requests[-1]
    assert [t["function"]["name"] for t in tools] == ["bash", "read_file", "write_file"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert messages[3]["tool_call_id"] == "1"


async def test_malformed_tool_arguments_go_back_to_the_model(backend) -> None:
    broken = agents.ToolCall(id="1", name="bash", arguments="{not json")
    model = ScriptedModel([reply("", broken), reply("sorry")])
    agent = agents.Agent(model=model, environment=backend.environment())
    result = await agent.run("go")
    assert result == agents.Completed("sorry", result.tool_calls)
    assert result.tool_calls[0].is_error
    assert "malformed arguments" in model.requests[-1][0][-1]["content"]


async def test_a_model_error_is_a_failed_result_and_the_session_still_closes(backend) -> None:
    model = ScriptedModel([ConnectionError("model unreachable")])
    agent = agents.Agent(model=model, environment=backend.environment())
    result = await agent.run("go")
    assert isinstance(result, agents.Failed)
    assert "ConnectionError: model unreachable" in result.error
    assert backend.leftovers() == []


async def test_the_tool_call_limit_ends_the_turn_as_failed() -> None:
    from runner.testing import RecordingSandbox

    model = ScriptedModel([reply("", call(str(i), "bash", command="true")) for i in range(5)])
    agent = agents.Agent(model=model, environment=RecordingSandbox(), max_tool_calls=3)
    result = await agent.run("loop")
    assert isinstance(result, agents.Failed)
    assert "limit of 3" in result.error
    assert len(result.tool_calls) == 3


async def test_no_sandbox_means_no_tools() -> None:
    model = ScriptedModel([reply("plain answer")])
    result = await agents.Agent(model=model).run("hi")
    assert result.text == "plain answer"
    assert model.requests[0][1] == []
