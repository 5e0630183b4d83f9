"""Agent turns against a real local chat-completions server (tests/support/chat_server.py)."""

from __future__ import annotations

import anyio
import pytest
from chat_server import ChatServer, Reply, assistant, error

import runner as agents
from runner.testing import RecordingSandbox

pytestmark = pytest.mark.anyio


def model(server: ChatServer, **options) -> agents.ChatCompletionsModel:
    options.setdefault("backoff_seconds", 0.01)
    return agents.ChatCompletionsModel(
        "test-model", base_url=server.url, api_key="sk-test", **options
    )


async def test_the_full_loop_runs_tools_in_the_sandbox(backend) -> None:
    replies = [
        assistant(None, ("c1", "write_file", {"path": "answer.txt", "content": "42"})),
        assistant(None, ("c2", "bash", {"command": "cat answer.txt; echo oops >&2"})),
        assistant(None, ("c3", "read_file", {"path": "answer.txt"})),
        assistant("The answer is 42."),
    ]
    with ChatServer(replies) as server:
        agent = agents.Agent(
            model=model(server), instructions="Use tools.", environment=backend.environment()
        )
        result = await agent.run("What is the answer?")
    assert result == agents.Completed("The answer is 42.", result.tool_calls)
    assert [c.name for c in result.tool_calls] == [
        "file_system.write_file",
        "file_system.bash",
        "file_system.read_file",
    ]
    assert result.tool_calls[1].output == "exit code 0\n[stdout]\n42\n[stderr]\noops\n"
    first, last = server.requests[0], server.requests[-1]
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["authorization"] == "Bearer sk-test"
    assert first["body"]["model"] == "test-model"
    assert first["body"]["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["body"]["tools"]] == [
        "bash",
        "read_file",
        "write_file",
    ]
    assert first["body"]["tools"][0]["function"]["parameters"]["required"] == ["command"]
    assert first["body"]["messages"] == [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "What is the answer?"},
    ]
    roles = [m["role"] for m in last["body"]["messages"]]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last["body"]["messages"][2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert last["body"]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": last["body"]["messages"][-2]["tool_calls"][0]["id"],
        "name": "read_file",
        "content": "42",
    }


async def test_malformed_tool_arguments_go_back_to_the_model_as_an_error() -> None:
    replies = [assistant(None, ("c1", "bash", "{not json")), assistant("Sorry.")]
    with ChatServer(replies) as server:
        agent = agents.Agent(model=model(server), environment=RecordingSandbox())
        result = await agent.run("go")
    assert result.text == "Sorry."
    assert result.tool_calls[0].is_error
    tool_message = server.requests[1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith("error: malformed arguments")


async def test_a_rate_limit_is_retried_after_its_retry_after() -> None:
    replies = [error(429, "slow down", **{"Retry-After": "0"}), assistant("ok")]
    with ChatServer(replies) as server:
        result = await agents.Agent(model=model(server)).run("hi")
    assert result == agents.Completed("ok", ())
    assert len(server.requests) == 2


async def test_server_errors_are_retried_then_the_turn_fails(local_backend) -> None:
    replies = [error(500), error(502), error(503)]
    with ChatServer(replies) as server:
        agent = agents.Agent(
            model=model(server, max_retries=2), environment=local_backend.environment()
        )
        result = await agent.run("hi")
    assert isinstance(result, agents.Failed)
    assert "HTTP 503" in result.error
    assert "after 3 attempts" in result.error
    assert len(server.requests) == 3
    assert local_backend.leftovers() == []


async def test_a_timeout_is_retried() -> None:
    slow = assistant("too late")
    slow.delay_seconds = 1.0
    with ChatServer([slow, assistant("in time")]) as server:
        result = await agents.Agent(model=model(server, timeout_seconds=0.3)).run("hi")
    assert result == agents.Completed("in time", ())


def test_yaml_sets_the_request_timeout_and_retries(tmp_path) -> None:
    """``agent.request_timeout_seconds`` and ``agent.max_retries`` reach the
    HTTP client: two slow answers and the turn fails after 2 attempts, in
    about twice the timeout, not the default 120 s x 4."""
    import time

    from runner.config import compile_file

    slow = [assistant("late"), assistant("late too"), assistant("never asked")]
    for reply in slow:
        reply.delay_seconds = 2.0
    with ChatServer(slow) as server:
        config = tmp_path / "agent.yaml"
        config.write_text(
            "version: 1\n"
            "agent:\n"
            "  model: local-model\n"
            f"  base_url: {server.url}\n"
            "  request_timeout_seconds: 0.3\n"
            "  max_retries: 1\n",
            encoding="utf-8",
        )
        agent = compile_file(config).agent
        assert (agent.request_timeout_seconds, agent.max_retries) == (0.3, 1)
        started = time.monotonic()
        result = anyio.run(agent.run, "hi")
        took = time.monotonic() - started
    assert isinstance(result, agents.Failed)
    assert "no answer within 0.3s (after 2 attempts)" in result.error
    assert took < 5
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("options", "word"),
    [
        ({"request_timeout_seconds": 0}, "request_timeout_seconds"),
        ({"max_retries": -1}, "max_retries"),
    ],
)
def test_bad_request_limits_are_refused_at_construction(options, word) -> None:
    with pytest.raises(agents.SdkError, match=word):
        agents.Agent(model="m", **options)


async def test_a_client_error_fails_at_once() -> None:
    with ChatServer([error(401, "bad key"), assistant("never")]) as server:
        result = await agents.Agent(model=model(server)).run("hi")
    assert isinstance(result, agents.Failed)
    assert "answered HTTP 401" in result.error and "bad key" in result.error
    assert len(server.requests) == 1


async def test_a_malformed_response_is_a_failed_turn() -> None:
    with ChatServer([Reply({"unexpected": True})]) as server:
        result = await agents.Agent(model=model(server)).run("hi")
    assert isinstance(result, agents.Failed)
    assert "unexpected response" in result.error


async def test_long_tool_output_is_capped_with_head_tail_and_size(local_backend) -> None:
    replies = [
        assistant(None, ("c1", "bash", {"command": 'python3 -c \'print("a" * 50000 + "END")\''})),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        env = local_backend.environment()
        result = await agents.Agent(model=model(server), environment=env).run("go")
    content = server.requests[1]["body"]["messages"][-1]["content"]
    assert len(content) < 17_000
    assert content.startswith("exit code 0\n[stdout]\naaa")
    assert content.rstrip().endswith("END")
    full = len("exit code 0\n[stdout]\n" + "a" * 50000 + "END\n")
    assert f"of {full} characters omitted" in content
    assert result.text == "done"


async def test_the_model_cannot_read_host_files_through_the_local_sandbox(local_backend) -> None:
    replies = [assistant(None, ("c1", "read_file", {"path": "/etc/passwd"})), assistant("ok")]
    with ChatServer(replies) as server:
        agent = agents.Agent(model=model(server), environment=local_backend.environment())
        result = await agent.run("read it")
    record = result.tool_calls[0]
    assert record.is_error
    assert "outside the sandbox workspace" in record.output
    assert "root:" not in server.requests[1]["body"]["messages"][-1]["content"]


async def test_a_session_keeps_its_conversation_across_turns() -> None:
    with ChatServer([assistant("one"), assistant("two")]) as server:
        agent = agents.Agent(model=model(server), environment=RecordingSandbox())
        async with await agent.start_session() as session:
            await session.run("first")
            await session.run("second")
    messages = server.requests[1]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
    ]


async def test_no_sandbox_means_no_tools_in_the_request() -> None:
    with ChatServer([assistant("plain")]) as server:
        await agents.Agent(model=model(server)).run("hi")
    assert "tools" not in server.requests[0]["body"]


async def test_a_mistral_model_without_a_key_fails_before_any_sandbox(monkeypatch) -> None:
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    env = RecordingSandbox()
    agent = agents.Agent(model="mistral-large-4", environment=env)
    with pytest.raises(agents.MissingCredentialsError, match="MISTRAL_API_KEY"):
        await agent.run("hi")
    assert env.calls == []


async def test_a_mistral_model_name_uses_the_mistral_server_and_key(monkeypatch) -> None:
    with ChatServer([assistant("bonjour")]) as server:
        monkeypatch.setenv("MISTRAL_API_KEY", "sk-mistral")
        monkeypatch.setenv("MISTRAL_SERVER_URL", server.url)
        result = await agents.Agent(model="mistral-large-4").run("hi")
    assert result.text == "bonjour"
    request = server.requests[0]
    assert request["headers"]["authorization"] == "Bearer sk-mistral"
    assert request["body"]["model"] == "mistral-large-4"


async def test_a_base_url_means_an_openai_compatible_server(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    with ChatServer([assistant("hello")]) as server:
        result = await agents.Agent(model="local-llama", base_url=server.url).run("hi")
    assert result.text == "hello"
    assert "authorization" not in server.requests[0]["headers"]


def test_the_api_key_is_not_in_the_repr() -> None:
    text = repr(agents.ChatCompletionsModel("m", base_url="http://127.0.0.1:9/v1", api_key="sk-x"))
    assert "sk-x" not in text and "api_key=***" in text


async def test_a_server_that_trickles_its_answer_still_times_out() -> None:
    slow = assistant("too slow")
    slow.trickle_seconds = 0.05  # ~10 s for the whole body, each byte well within a read timeout
    with ChatServer([slow, assistant("in time")]) as server:
        with anyio.fail_after(30):
            result = await agents.Agent(model=model(server, timeout_seconds=1.0)).run("hi")
    assert result == agents.Completed("in time", ())


async def test_a_turn_stopped_by_the_limit_leaves_no_unanswered_tool_call() -> None:
    from runner.testing import ScriptedModel

    calls = [
        agents.ToolCall(id=f"c{i}", name="bash", arguments='{"command": "true"}') for i in range(3)
    ]
    model = ScriptedModel(
        [agents.ModelReply(tool_calls=tuple(calls)), agents.ModelReply(text="ok")]
    )
    env = RecordingSandbox()
    agent = agents.Agent(model=model, environment=env, max_tool_calls=1)
    async with await agent.start_session() as session:
        first = await session.run("go")
        await session.run("again")
    assert isinstance(first, agents.Failed)
    assert len(first.tool_calls) == 1 and env.commands[-1] == "true"
    # The failed turn is gone as a whole: no call without its answer, no
    # unanswered "go" (a strict server refuses both).
    assert model.requests[1][0] == [{"role": "user", "content": "again"}]


async def test_read_file_refuses_huge_files_with_a_hint(local_backend) -> None:
    replies = [assistant(None, ("c1", "read_file", {"path": "big.bin"})), assistant("ok")]
    with ChatServer(replies) as server:
        env = local_backend.environment()
        agent = agents.Agent(model=model(server), environment=env)
        async with await agent.start_session() as session:
            await session.sandbox.execute("head -c 3000000 /dev/zero > big.bin")
            result = await session.run("read it")
    assert result.tool_calls[0].is_error
    assert "big.bin is 3000000 bytes; read parts of it with bash" in result.tool_calls[0].output


async def test_a_reply_without_a_message_says_so() -> None:
    body = {"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}
    with ChatServer([Reply(body)]) as server:
        result = await agents.Agent(model=model(server)).run("hi")
    assert isinstance(result, agents.Failed)
    assert "ModelError: the reply has no message (got None)" in result.error


async def test_finish_reason_and_refusal_reach_the_model_reply() -> None:
    replies = [assistant("partial", finish_reason="length"), assistant(None, refusal="no")]
    with ChatServer(replies) as server:
        cut = await model(server).complete([{"role": "user", "content": "hi"}], [])
        refused = await model(server).complete([{"role": "user", "content": "hi"}], [])
    assert cut == agents.ModelReply(text="partial", finish_reason="length")
    assert refused == agents.ModelReply(finish_reason="stop", refusal="no")


# --- which errors are retried (issue 16): permanent ones fail at once ---

#: llama.cpp's llama-server without --jinja, asked with tools (its error body).
NO_JINJA = Reply(
    {
        "error": {
            "code": 500,
            "message": "tools param requires --jinja flag",
            "type": "server_error",
        }
    },
    status=500,
)


async def test_a_permanent_server_error_fails_at_once_with_advice() -> None:
    with ChatServer([NO_JINJA, assistant("never")]) as server:
        agent = agents.Agent(model=model(server), environment=RecordingSandbox())
        result = await agent.run("hi")
    assert isinstance(result, agents.Failed)
    assert "answered HTTP 500" in result.error
    assert "tools param requires --jinja flag" in result.error
    assert "start llama.cpp's llama-server with --jinja to use tools" in result.error
    assert "attempts" not in result.error
    assert len(server.requests) == 1  # not asked again: the answer would be the same


@pytest.mark.slow
async def test_which_answers_are_retried() -> None:
    """The rule of runner/models/chat_completions.py, status by status, over real HTTP:
    the number of requests one call makes when the first answer is ``status``."""
    expected = {
        408: 2,
        409: 2,
        429: 2,
        500: 2,  # a 500 that does not say it is permanent
        502: 2,
        503: 2,
        504: 2,
        400: 1,
        401: 1,
        403: 1,
        404: 1,
        422: 1,
        425: 1,
        501: 1,
        505: 1,
    }
    counted = {}
    for status in expected:
        with ChatServer([error(status), assistant("ok")]) as server:
            try:
                await model(server).complete([{"role": "user", "content": "hi"}], [])
            except agents.ModelError as exc:
                assert f"answered HTTP {status}" in str(exc)
            counted[status] = len(server.requests)
    assert counted == expected
    permanent = [error(500, "this feature is not supported by the server"), assistant("no")]
    with ChatServer(permanent) as server:
        with pytest.raises(agents.ModelError, match="not supported by the server"):
            await model(server).complete([{"role": "user", "content": "hi"}], [])
        assert len(server.requests) == 1


async def test_a_redirect_is_a_clear_error_not_an_empty_one() -> None:
    moved = Reply({}, status=308, headers={"Location": "https://models.example/v1/chat"})
    with ChatServer([moved, assistant("never")]) as server:
        result = await agents.Agent(model=model(server)).run("hi")
    assert isinstance(result, agents.Failed)
    assert "answered HTTP 308, a redirect to https://models.example/v1/chat" in result.error
    assert "set base_url to the final address" in result.error
    assert len(server.requests) == 1
