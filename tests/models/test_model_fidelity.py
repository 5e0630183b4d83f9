"""The model stand-in checks requests with validators nobody here wrote (issue 16).

tests/support/chat_server.py refuses, as a strict server would, a request that the
``openai`` package's typed request parameters or ``mistral-common``'s request
validator refuses (plus a few rules written by hand).  Every existing test
talks to that server in strict mode, so every request the runner sends there
passes both; these tests show that each check does refuse a bad request (it
is not a check that never fails) and that a whole tool-using turn passes.
"""

from __future__ import annotations

import httpx
import pytest
from chat_server import (
    ChatServer,
    assistant,
    conversation_problem,
    mistral_problem,
    request_problem,
)

import runner as agents
from runner.testing import RecordingSandbox

pytestmark = pytest.mark.anyio

USER = {"role": "user", "content": "hi"}
BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def body(*messages, **fields) -> dict:
    return {"model": "m", "messages": list(messages), **fields}


def problems(request: dict) -> tuple:
    """(openai, mistral-common, by hand): which checks refuse ``request``."""
    return (
        request_problem(request),
        mistral_problem(request),
        conversation_problem(request["messages"]),
    )


async def test_a_whole_tool_using_turn_passes_every_check() -> None:
    replies = [
        assistant(None, ("c1", "write_file", {"path": "a.txt", "content": "1"})),
        assistant("thinking aloud", ("call_0", "bash", {"command": "cat a.txt"})),
        assistant(None, ("x", "read_file", "{broken")),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        agent = agents.Agent(
            model=model(server), instructions="Be brief.", environment=RecordingSandbox()
        )
        async with await agent.start_session() as session:
            first = await session.run("go")
    assert first.text == "done"
    assert server.refusals == []
    assert len(server.requests) == 4
    for request in server.requests:
        assert problems(request["body"]) == (None, None, None)
    assert server.requests[-1]["body"]["tools"][0]["type"] == "function"


def model(server: ChatServer) -> agents.ChatCompletionsModel:
    return agents.ChatCompletionsModel("m", base_url=server.url, backoff_seconds=0.01)


def test_the_openai_request_shape_refuses_what_the_others_let_pass() -> None:
    unknown_argument = body(USER, colour="teal")
    assert problems(unknown_argument)[1:] == (None, None)
    assert "Unrecognized request argument supplied: colour" in request_problem(unknown_argument)
    # A list the typed parameters declare as Iterable: checked, not skipped.
    bad_role = body(USER, {"role": "narrator", "content": "meanwhile"})
    assert "openai: messages.1" in request_problem(bad_role)
    no_call_id = body(USER, {"role": "tool", "content": "out"})
    assert "tool_call_id" in request_problem(no_call_id)
    bad_tool = body(USER, tools=[{"type": "function", "function": {"description": "no name"}}])
    assert "openai: tools.0" in request_problem(bad_tool)
    assert request_problem(body(USER, tools=[BASH], tool_choice="auto")) is None


def test_mistral_common_refuses_what_the_others_let_pass() -> None:
    # A tool whose parameters are no JSON schema: only mistral-common looks.
    broken_schema = {"type": "function", "function": {"name": "bash", "parameters": {"type": 5}}}
    request = body(USER, tools=[broken_schema])
    assert request_problem(request) is None
    assert conversation_problem(request["messages"]) is None
    assert "mistral-common: InvalidToolSchemaException" in mistral_problem(request)
    # Its rules on tool-call ids and on the last message.
    call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    short_id = body(
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "out"},
    )
    assert "must be a-z, A-Z, 0-9, with a length of 9" in mistral_problem(short_id)
    ends_with_assistant = body(USER, {"role": "assistant", "content": "hello"})
    assert "Expected last role User or Tool" in mistral_problem(ends_with_assistant)
    assert mistral_problem(body(USER, tools=[BASH], tool_choice="auto")) is None


def test_the_rules_by_hand_refuse_what_the_validators_let_pass() -> None:
    empty_assistant = body(USER, {"role": "assistant", "content": ""}, USER)
    assert problems(empty_assistant)[:2] == (None, None)
    assert "either content or tool_calls" in conversation_problem(empty_assistant["messages"])


@pytest.mark.parametrize(
    ("request_body", "word"),
    [
        (body(USER, colour="teal"), "openai:"),
        (
            body(
                USER,
                tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}],
            ),
            "mistral-common:",
        ),
        (body(USER, {"role": "assistant", "content": ""}, USER), "either content or tool_calls"),
    ],
)
def test_the_server_refuses_a_bad_request_with_mistrals_400(request_body, word) -> None:
    with ChatServer([assistant("never")]) as server:
        reply = httpx.post(f"{server.url}/chat/completions", json=request_body, timeout=30)
    assert reply.status_code == 400
    assert reply.json()["object"] == "error"
    assert word in reply.json()["message"]
    assert len(server.refusals) == 1 and word in server.refusals[0]
    assert server.replies  # the scripted reply was not used up
