"""Agent turns with a scripted Model: tools act on the real sandbox."""

from __future__ import annotations

import json
import re

import pytest
from chat_server import ChatServer, Reply, assistant, error

import runner as agents
from runner.testing import RecordingSandbox, ScriptedModel

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
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]


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


# --- replies a strict server (tests/support/chat_server.py, Mistral's rules) would choke on ---

VALID_ID = re.compile(r"[A-Za-z0-9]{9}")


def http_model(server: ChatServer) -> agents.ChatCompletionsModel:
    return agents.ChatCompletionsModel(
        "test-model", base_url=server.url, api_key="sk-test", backoff_seconds=0.01
    )


async def two_turns(replies: list[Reply], environment=None) -> tuple[object, object, ChatServer]:
    """Run "first" then "second" in one session; the server enforces Mistral's rules."""
    with ChatServer(replies) as server:
        agent = agents.Agent(model=http_model(server), environment=environment)
        async with await agent.start_session() as session:
            first = await session.run("first")
            second = await session.run("second")
    return first, second, server


def last_messages(server: ChatServer) -> list[dict]:
    return server.requests[-1]["body"]["messages"]


@pytest.mark.parametrize("content", [None, ""])
async def test_an_empty_reply_fails_the_turn_and_is_never_sent_back(content) -> None:
    first, second, server = await two_turns([assistant(content), assistant("hello")])
    assert isinstance(first, agents.Failed)
    assert "empty reply (finish_reason stop)" in first.error
    assert second == agents.Completed("hello", ())
    assert last_messages(server) == [{"role": "user", "content": "second"}]


async def test_a_cut_off_reply_is_failed_with_its_partial_text() -> None:
    replies = [assistant("The answer is", finish_reason="length"), assistant("42")]
    first, second, server = await two_turns(replies)
    assert first == agents.Failed(
        "the reply was cut off at the model's token limit (finish_reason length)",
        partial_text="The answer is",
    )
    assert second.text == "42"
    assert server.requests[1]["body"]["messages"] == [{"role": "user", "content": "second"}]


async def test_a_reply_cut_off_before_any_text_says_so() -> None:
    first, _, _ = await two_turns([assistant(None, finish_reason="length"), assistant("ok")])
    assert "cut off at the model's token limit before any text" in first.error


async def test_a_filtered_reply_is_failed_not_completed() -> None:
    replies = [assistant(None, finish_reason="content_filter"), assistant("ok")]
    first, second, _ = await two_turns(replies)
    assert isinstance(first, agents.Failed)
    assert "content filter" in first.error
    assert second.text == "ok"


async def test_a_refusal_is_reported_as_the_failure() -> None:
    replies = [assistant(None, refusal="I can't help with that."), assistant("ok")]
    first, second, _ = await two_turns(replies)
    assert first == agents.Failed("the model refused: I can't help with that.")
    assert second.text == "ok"


async def test_malformed_arguments_are_replaced_in_history_and_explained() -> None:
    replies = [
        assistant(None, ("abcdefghi", "bash", "{not json")),
        assistant("Sorry."),
        assistant("fine"),
    ]
    env = RecordingSandbox()
    first, second, server = await two_turns(replies, env)
    assert first.text == "Sorry." and second.text == "fine"
    assert env.commands == []  # nothing ran
    messages = server.requests[1]["body"]["messages"]
    call = messages[1]["tool_calls"][0]
    assert call["function"] == {"name": "bash", "arguments": "{}"}
    assert messages[2]["content"].startswith("error: malformed arguments (")
    assert "the call was not run" in messages[2]["content"]
    assert "{not json" not in json.dumps(last_messages(server))


async def test_invalid_and_repeated_tool_call_ids_are_replaced_consistently() -> None:
    replies = [
        assistant(
            None, ("call_0", "bash", {"command": "true"}), ("c1", "bash", {"command": "true"})
        ),
        assistant(None, ("call_0", "bash", {"command": "true"}), ("", "bash", {"command": "true"})),
        assistant(None, ("abcdefghi", "bash", {"command": "true"})),
        assistant(None, ("abcdefghi", "bash", {"command": "true"})),  # repeats an earlier id
        assistant("done"),
        assistant("again"),
    ]
    first, second, server = await two_turns(replies, RecordingSandbox())
    assert first.text == "done" and second.text == "again"
    messages = last_messages(server)
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(ids) == 6 and answers == ids
    assert all(VALID_ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == 6
    assert ids[4] == "abcdefghi"  # a valid, unused id is kept


async def test_an_invented_tool_gets_a_tool_error_and_the_turn_goes_on() -> None:
    replies = [
        assistant(
            None,
            ("abcdefghi", "python", {"code": "print(1)"}),
            ("jklmnopqr", "file_system.bash", {"command": "true"}),
        ),
        assistant("I will use bash."),
        assistant("ok"),
    ]
    env = RecordingSandbox()
    first, second, server = await two_turns(replies, env)
    assert first.text == "I will use bash." and second.text == "ok"
    assert env.commands == []
    assert [r.is_error for r in first.tool_calls] == [True, True]
    assert "unknown tool 'python'" in first.tool_calls[0].output
    assert "unknown tool 'file_system.bash'" in first.tool_calls[1].output
    sent = server.requests[1]["body"]["messages"][1]["tool_calls"]
    assert [c["function"]["name"] for c in sent] == ["python", "unknown_tool"]


async def test_a_failed_turn_leaves_neither_its_message_nor_its_tool_calls() -> None:
    replies = [
        assistant(None, ("abcdefghi", "bash", {"command": "echo hi"})),
        error(400, "context too long"),
        assistant("fresh start"),
    ]
    env = RecordingSandbox()
    first, second, server = await two_turns(replies, env)
    assert isinstance(first, agents.Failed) and "HTTP 400" in first.error
    assert len(first.tool_calls) == 1 and env.commands == ["echo hi"]
    assert second.text == "fresh start"
    assert last_messages(server) == [{"role": "user", "content": "second"}]


async def test_a_model_error_drops_the_unanswered_user_message() -> None:
    model = ScriptedModel([ConnectionError("down"), reply("up again")])
    agent = agents.Agent(model=model, instructions="Be brief.")
    async with await agent.start_session() as session:
        assert isinstance(await session.run("first"), agents.Failed)
        assert (await session.run("second")).text == "up again"
    assert model.requests[1][0] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "second"},
    ]


def test_the_strict_stand_in_refuses_what_mistral_refuses() -> None:
    from chat_server import conversation_problem

    user = {"role": "user", "content": "hi"}
    empty = {"role": "assistant", "content": ""}
    assert "either content or tool_calls" in conversation_problem([user, empty, user])
    call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    asks = {"role": "assistant", "content": "", "tool_calls": [call]}
    answer = {"role": "tool", "tool_call_id": "call_0", "name": "bash", "content": "ok"}
    assert "length of 9" in conversation_problem([user, asks, answer])
    call["id"] = answer["tool_call_id"] = "abcdefghi"
    assert conversation_problem([user, asks, answer]) is None
    assert "after role 'tool'" in conversation_problem([user, asks, answer, user])
    assert "function calls and responses" in conversation_problem([user, asks, user])
