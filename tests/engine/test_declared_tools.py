"""Issue 29: tools the model may call, declared in Python (``@runner.tool``)
or YAML (``agent.tools``), with the guarantees hook steps have.

The model is the project's chat stand-in (``chat_server``) over real HTTP,
which checks every request with the OpenAI package's typed parameters and
Mistral's own validator; the sandboxes are real (a local workspace, and
Docker where marked); the YAML tests go through the installed CLI.
"""

from __future__ import annotations

import json
import warnings
from typing import Annotated, Literal

import pytest
from chat_server import ChatServer, assistant

import runner as agents
from runner.sandboxes.local import DangerousLocalWarning

pytestmark = pytest.mark.anyio


class Ticket(agents.SessionInput):
    input_id = "acme.ticket"

    number: int
    secret_note: str = "kept out of the model's sight"


SEEN: list[dict] = []


@agents.tool
async def file_ticket_note(
    ctx: agents.ToolContext,
    text: Annotated[str, "The note to write"],
    *,
    ticket: Annotated[Ticket, agents.Depends()],
    urgent: bool = False,
) -> str:
    """Write a note about the session's ticket into NOTES.md."""
    SEEN.append({"ticket": ticket.number, "text": text, "urgent": urgent})
    assert ctx.sandbox is not None
    await ctx.sandbox.write_file("NOTES.md", f"#{ticket.number}: {text}\n")
    result = await ctx.sandbox.execute("cat NOTES.md")
    return result.stdout


@agents.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    SEEN.append({"a": a, "b": b})
    return a + b


def tools_sent(server: ChatServer) -> list[dict]:
    return [request["body"].get("tools") or [] for request in server.requests]


def tool_messages(server: ChatServer) -> list[str]:
    last = server.requests[-1]["body"]["messages"]
    return [m["content"] for m in last if m["role"] == "tool"]


def local_sandbox(tmp_path) -> agents.SandboxEnvironment:
    (tmp_path / "boxes").mkdir(exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DangerousLocalWarning)
        return agents.DangerousLocalSandbox(temp_dir=tmp_path / "boxes")


# --- Python function tools --------------------------------------------------


def test_the_schema_comes_from_the_type_hints_and_hides_ctx_and_depends() -> None:
    from jsonschema import Draft202012Validator

    spec = file_ticket_note.spec()["function"]
    assert spec["name"] == "file_ticket_note"
    assert spec["description"] == "Write a note about the session's ticket into NOTES.md."
    assert spec["parameters"] == {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The note to write"},
            "urgent": {"type": "boolean", "default": False},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(spec["parameters"])

    @agents.tool(name="pick-one", description="Pick.")
    def pick(kind: Literal["a", "b"], tags: list[str], limit: int | None = None) -> str:
        return kind

    parameters = pick.spec()["function"]["parameters"]
    Draft202012Validator.check_schema(parameters)
    assert parameters["properties"]["kind"] == {"enum": ["a", "b"]}
    assert parameters["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert pick.name == "pick-one" and pick("a", [], None) == "a"


@pytest.mark.parametrize("via", ["openai-compatible", "mistral"])
async def test_a_depends_input_reaches_the_tool_and_never_the_model(
    tmp_path, monkeypatch, via
) -> None:
    """Both request formats (a base_url, and the Mistral API's) carry the
    schema, and both validators the stand-in runs accept it."""
    SEEN.clear()
    replies = [
        assistant(None, ("abcdefghi", "file_ticket_note", {"text": "fixed", "urgent": True})),
        assistant(None, ("bcdefghij", "add", {"a": 2, "b": 3})),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        if via == "mistral":
            monkeypatch.setenv("MISTRAL_SERVER_URL", server.url)
            monkeypatch.setenv("MISTRAL_API_KEY", "test-key")
            base_url = None
        else:
            base_url = server.url
        agent = agents.Agent(
            model="m",
            base_url=base_url,
            environment=local_sandbox(tmp_path),
            tools=[file_ticket_note, add],
            builtin_tools=[],
        )
        result = await agent.run("go", session_inputs={"acme.ticket": {"number": 4711}})
    assert server.refusals == []
    assert isinstance(result, agents.Completed), result
    assert SEEN == [{"ticket": 4711, "text": "fixed", "urgent": True}, {"a": 2, "b": 3}]
    assert tool_messages(server) == ["#4711: fixed\n", "5"]
    for tools in tools_sent(server):
        assert [t["function"]["name"] for t in tools] == ["file_ticket_note", "add"]
        sent = json.dumps(tools)
        assert "ticket" not in json.dumps(tools[0]["function"]["parameters"])
        assert "ctx" not in sent and "secret_note" not in sent and "4711" not in sent
    assert [c.name for c in result.tool_calls] == ["file_ticket_note", "add"]


async def test_a_missing_depends_input_fails_before_any_sandbox(tmp_path) -> None:
    environment = local_sandbox(tmp_path)
    agent = agents.Agent(
        model="m", base_url="http://127.0.0.1:9", environment=environment, tools=[file_ticket_note]
    )
    with pytest.raises(agents.SessionInputError, match="tool file_ticket_note needs session input"):
        await agent.run("go")
    assert list((tmp_path / "boxes").iterdir()) == []


async def test_arguments_the_schema_refuses_run_nothing_and_the_turn_goes_on(tmp_path) -> None:
    SEEN.clear()
    replies = [
        assistant(
            None,
            ("abcdefghi", "add", {"a": "$(touch CANARY)", "b": 1}),
            ("bcdefghij", "add", {"a": 1}),
            ("cdefghijk", "add", {"a": 1, "b": 2, "c": 3}),
        ),
        assistant("I will stop."),
    ]
    with ChatServer(replies) as server:
        agent = agents.Agent(
            model="m", base_url=server.url, environment=local_sandbox(tmp_path), tools=[add]
        )
        result = await agent.run("go")
    assert isinstance(result, agents.Completed), result
    assert SEEN == []
    outputs = tool_messages(server)
    assert all(o.startswith("error: invalid arguments for add: ") for o in outputs), outputs
    assert "'a'" in outputs[0] and "integer" in outputs[0]
    assert "'b' is a required property" in outputs[1]
    assert "'c' was unexpected" in outputs[2]
    assert all(c.is_error for c in result.tool_calls)


async def test_a_tool_that_raises_is_a_tool_error_not_the_end_of_the_turn() -> None:
    @agents.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("the database is down")

    replies = [assistant(None, ("abcdefghi", "broken", {})), assistant("sorry")]
    with ChatServer(replies) as server:
        agent = agents.Agent(model="m", base_url=server.url, tools=[broken])
        result = await agent.run("go")
    assert isinstance(result, agents.Completed)
    assert tool_messages(server) == ["error: RuntimeError: the database is down"]


async def test_a_disabled_builtin_or_an_undeclared_tool_runs_nothing(tmp_path) -> None:
    canary = tmp_path / "CANARY"
    replies = [
        assistant(
            None,
            ("abcdefghi", "bash", {"command": f"touch {canary}"}),
            ("bcdefghij", "write_file", {"path": str(canary), "content": "x"}),
            ("cdefghijk", "run_anything", {"command": f"touch {canary}"}),
        ),
        assistant(None, ("defghijkl", "read_file", {"path": "README"})),
        assistant("ok"),
    ]
    with ChatServer(replies) as server:
        agent = agents.Agent(
            model="m",
            base_url=server.url,
            environment=local_sandbox(tmp_path),
            tools=[add],
            builtin_tools=["read_file"],
        )
        result = await agent.run("go")
    assert server.refusals == []
    assert isinstance(result, agents.Completed), result
    assert not canary.exists()
    outputs = tool_messages(server)
    for output, name in zip(outputs, ["bash", "write_file", "run_anything"], strict=False):
        assert output == f"error: unknown tool {name!r} (tools: read_file, add)"
    assert outputs[3].startswith("error: FileNotFoundError")  # read_file still works
    for tools in tools_sent(server):
        assert [t["function"]["name"] for t in tools] == ["read_file", "add"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: agents.Agent(model="m", builtin_tools=["python"]), "unknown built-in tool"),
        (lambda: agents.Agent(model="m", builtin_tools="bash"), "takes a list of names"),
        (lambda: agents.Agent(model="m", tools=[add, add]), "two tools are named 'add'"),
        (lambda: agents.Agent(model="m", tools=[print]), "takes tools"),
        (lambda: agents.tool(lambda x: x), "a tool name is"),
    ],
)
def test_wrong_tool_declarations_are_sdk_errors(make, message) -> None:
    with pytest.raises(agents.SdkError, match=message):
        make()


def test_wrong_tool_signatures_are_sdk_errors() -> None:
    def undocumented(a: int) -> int:
        return a

    def untyped(a) -> int:  # type: ignore[no-untyped-def]
        """Doc."""
        return a

    def variadic(*rest: int) -> int:
        """Doc."""
        return 0

    def bash(a: int) -> int:
        """Doc."""
        return a

    with pytest.raises(agents.SdkError, match="docstring"):
        agents.tool(undocumented)
    with pytest.raises(agents.SdkError, match="needs a type annotation"):
        agents.tool(untyped)
    with pytest.raises(agents.SdkError, match=r"\*rest"):
        agents.tool(variadic)
    with pytest.raises(agents.SdkError, match="name of a built-in"):
        agents.Agent(model="m", tools=[agents.tool(bash)])


async def test_a_tool_without_ctx_works_without_a_sandbox() -> None:
    replies = [assistant(None, ("abcdefghi", "add", {"a": 40, "b": 2})), assistant("42")]
    with ChatServer(replies) as server:
        agent = agents.Agent(model="m", base_url=server.url, tools=[add])  # NoSandbox
        result = await agent.run("go")
    assert isinstance(result, agents.Completed), result
    assert tool_messages(server) == ["42"]
    assert [t["function"]["name"] for t in tools_sent(server)[0]] == ["add"]


# --- YAML tools through the Python API ------------------------------------------


async def test_a_yaml_tool_loaded_in_python_runs_hostile_values_as_one_word(tmp_path) -> None:
    """``runner.load`` gives the same tool objects the CLI runs: the model's
    hostile values reach printf as one word each, and nothing else runs."""
    hostile = ["$(touch CANARY)", "; touch CANARY", "`touch CANARY`", "a\ntouch CANARY"]
    replies = [
        assistant(
            None, *[(f"call{i:05d}", "echo_it", {"value": v}) for i, v in enumerate(hostile)]
        ),
        assistant(None, ("call00099", "listing", {})),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        config = tmp_path / "agent.yaml"
        config.write_text(
            "version: 1\n"
            "agent:\n"
            "  model: m\n"
            f"  base_url: {server.url}\n"
            "  builtin_tools: []\n"
            "  tools:\n"
            "    - name: echo_it\n"
            "      description: Print a value between brackets.\n"
            "      parameters: {type: object, properties: {value: {type: string}}}\n"
            "      run: printf '[%s]\\n' {{ args.value }}\n"
            "    - name: listing\n"
            "      description: List the workspace.\n"
            "      run: ls -A\n"
            "  environment:\n"
            "    sandbox: local\n"
        )
        agent = agents.load(str(config), output_dir=str(tmp_path))
        agent.environment.temp_dir = str(tmp_path)  # its workspace under tmp_path
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DangerousLocalWarning)
            result = await agent.run("go")
    assert isinstance(result, agents.Completed), result
    assert [type(t).__name__ for t in agent.tools] == ["CommandTool", "CommandTool"]
    answers = tool_messages(server)
    assert answers[:4] == [f"exit code 0\n[stdout]\n[{value}]\n" for value in hostile]
    assert answers[4] == "exit code 0"
    assert not (tmp_path / "CANARY").exists()


class ApiKey(agents.SessionInput):
    input_id = "acme.api_key"
    __secret__ = True

    key: str


@agents.tool
def call_api(query: str, *, api: Annotated[ApiKey, agents.Depends()]) -> str:
    """Ask the API."""
    if query == "fail":
        raise PermissionError(f"key {api.key} was refused")
    return f"answer for {query} (sent with {api.key})"


async def test_the_model_never_reads_a_secret_input_a_tool_depends_on() -> None:
    secret = "sk-very-secret-4711"
    replies = [
        assistant(
            None,
            ("abcdefghi", "call_api", {"query": "weather"}),
            ("bcdefghij", "call_api", {"query": "fail"}),
        ),
        assistant("ok"),
    ]
    with ChatServer(replies) as server:
        agent = agents.Agent(model="m", base_url=server.url, tools=[call_api])
        result = await agent.run("go", session_inputs={"acme.api_key": {"key": secret}})
    assert isinstance(result, agents.Completed), result
    assert tool_messages(server) == [
        "answer for weather (sent with ***)",
        "error: PermissionError: key *** was refused",
    ]
    assert all(secret not in json.dumps(request["body"]) for request in server.requests)
