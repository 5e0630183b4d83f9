"""Editor support, proved with the real yaml-language-server over LSP.

``runner init`` writes the schema beside the starter file and names it in the
modeline by a relative path; the examples name the repository's schema the
same way.  These tests start the server editors run (installed by
``scripts/yaml-language-server``, a pinned version, outside the source tree),
speak JSON-RPC to it over stdio, and check what an editor would show:
diagnostics at the right places, completion in the right place, and nothing
to complain about in the files we ship.  Every read has a deadline, so a hung
server fails the test instead of hanging it.

The schema's text is checked against the code here too: the examples its
descriptions give must validate, and what they say about ``network.allow``
and about defaults must be what the compiler does.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import RUNNER_CLI

from runner.config import compile_file, validate_file
from runner.config.schema import schema_text

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
REPOSITORY_SCHEMA = ROOT / "schemas" / "runner.schema.json"
SCHEMA = json.loads(schema_text())
#: The longest wait for any one message from the server.
READ_TIMEOUT_SECONDS = 30.0
#: Offline settings: no schema catalogue or CRD store to download.
SETTINGS = {
    "yaml": {
        "validate": True,
        "completion": True,
        "hover": True,
        "schemaStore": {"enable": False},
        "kubernetesCRDStore": {"enable": False},
    },
}


def runner_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


# --- runner init: the schema beside the file -------------------------------


def test_init_writes_the_schema_beside_the_file_and_names_it_relatively(tmp_path) -> None:
    result = runner_cli("init", "project/runner.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = tmp_path / "project" / "runner.yaml"
    modeline = written.read_text().splitlines()[0]
    assert modeline == "# yaml-language-server: $schema=./runner.schema.json"
    assert (tmp_path / "project" / "runner.schema.json").read_text() == schema_text()


def test_init_keeps_a_different_schema_file_unless_forced(tmp_path) -> None:
    (tmp_path / "runner.schema.json").write_text("{}\n")
    refused = runner_cli("init", cwd=tmp_path)
    assert refused.returncode == 2
    assert "runner.schema.json exists with other content" in refused.stderr
    assert (tmp_path / "runner.schema.json").read_text() == "{}\n"
    assert not (tmp_path / "runner.yaml").exists()  # nothing half-written

    forced = runner_cli("init", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "runner.schema.json").read_text() == schema_text()


def test_init_beside_a_current_schema_adds_only_the_yaml(tmp_path) -> None:
    assert runner_cli("init", "first.yaml", cwd=tmp_path).returncode == 0
    second = runner_cli("init", "second.yaml", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["first.yaml", "runner.schema.json", "second.yaml"]


# --- a minimal LSP client --------------------------------------------------


class LanguageServer:
    """One yaml-language-server process, spoken to over stdio (LSP JSON-RPC).

    A reader thread turns the server's framed messages into a queue, so every
    wait is a ``queue.get`` with a deadline.  Requests the server sends us
    (``workspace/configuration`` and the like) are answered as they arrive.
    """

    def __init__(self, program: str, stderr_path: Path) -> None:
        self._stderr_path = stderr_path
        self._stderr = stderr_path.open("wb")
        self.process = subprocess.Popen(
            [program, "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._responses: dict[int, dict[str, Any]] = {}
        self._diagnostics: dict[str, list[dict[str, Any]]] = {}
        self._next_id = 0
        threading.Thread(target=self._read_messages, daemon=True).start()

    def _read_messages(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while line := stream.readline():
                if not line.strip():
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if length is None:  # end of stream: the server exited
                self._messages.put(None)
                return
            self._messages.put(json.loads(stream.read(length)))

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.process.stdin.flush()

    def _wait_until(self, done: Callable[[], bool], what: str) -> None:
        """Handle messages until ``done()``; fail after READ_TIMEOUT_SECONDS of silence."""
        while not done():
            try:
                message = self._messages.get(timeout=READ_TIMEOUT_SECONDS)
            except queue.Empty:
                pytest.fail(
                    f"yaml-language-server sent nothing for {READ_TIMEOUT_SECONDS}s "
                    f"while we waited for {what}{self._stderr_tail()}"
                )
            if message is None:
                pytest.fail(
                    f"yaml-language-server exited while we waited for {what}{self._stderr_tail()}"
                )
            self._handle(message)

    def _handle(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self._send({"id": message["id"], "result": self._answer(message)})
        elif message.get("method") == "textDocument/publishDiagnostics":
            params = message["params"]
            self._diagnostics[params["uri"]] = params["diagnostics"]
        elif "id" in message:
            self._responses[message["id"]] = message

    @staticmethod
    def _answer(request: dict[str, Any]) -> Any:
        if request["method"] == "workspace/configuration":
            return [SETTINGS.get(item.get("section")) for item in request["params"]["items"]]
        return None  # client/registerCapability and the like need no more

    def _stderr_tail(self) -> str:
        self._stderr.flush()
        tail = self._stderr_path.read_text(errors="replace")[-2000:]
        return f"; its stderr ends with:\n{tail}" if tail else ""

    def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        request_id = self._next_id
        self._send({"id": request_id, "method": method, "params": params})
        self._wait_until(lambda: request_id in self._responses, f"the answer to {method}")
        response = self._responses.pop(request_id)
        assert "error" not in response, response
        return response["result"]

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def initialize(self) -> dict[str, Any]:
        capabilities = {
            "workspace": {"configuration": True, "didChangeConfiguration": {}},
            "textDocument": {"publishDiagnostics": {}, "completion": {"completionItem": {}}},
        }
        result = self.request(
            "initialize",
            {"processId": os.getpid(), "rootUri": ROOT.as_uri(), "capabilities": capabilities},
        )
        self.notify("initialized", {})
        self.notify("workspace/didChangeConfiguration", {"settings": SETTINGS})
        return result

    def open(self, path: Path, text: str) -> str:
        """Open ``text`` as the document at ``path`` (which need not exist on disk)."""
        uri = path.as_uri()
        self._diagnostics.pop(uri, None)
        document = {"uri": uri, "languageId": "yaml", "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": document})
        return uri

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        """The diagnostics the server publishes for ``uri`` after it was opened."""
        self._wait_until(lambda: uri in self._diagnostics, f"diagnostics of {uri}")
        return self._diagnostics[uri]

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.process.wait(timeout=10)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._stderr.close()


def installed_server() -> str:
    """The server's program, as scripts/yaml-language-server installed it."""
    found = subprocess.run(
        [str(ROOT / "scripts" / "yaml-language-server"), "--installed"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if found.returncode != 0:
        reason = found.stderr.strip() or "scripts/yaml-language-server --installed failed"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found.stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LanguageServer]:
    stderr_path = tmp_path_factory.mktemp("yaml-language-server") / "stderr.log"
    language_server = LanguageServer(installed_server(), stderr_path)
    try:
        info = language_server.initialize()
        assert info["serverInfo"]["name"] == "yaml-language-server"
        yield language_server
    finally:
        language_server.close()


def span(text: str, needle: str) -> dict[str, Any]:
    """The LSP range of the one occurrence of ``needle`` in ``text``."""
    assert text.count(needle) == 1, needle
    before = text[: text.index(needle)]
    line = before.count("\n")
    character = len(before) - (before.rfind("\n") + 1)
    return {
        "start": {"line": line, "character": character},
        "end": {"line": line, "character": character + len(needle)},
    }


def schema_uris(diagnostics: list[dict[str, Any]]) -> set[str]:
    return {uri for d in diagnostics for uri in (d.get("data") or {}).get("schemaUri", [])}


# --- what an editor shows --------------------------------------------------

BROKEN = """\
# yaml-language-server: $schema=./runner.schema.json
version: 1
agent:
  model: mistral-large-4
  environment:
    sandbox: docker
    pids_limit: many
    hooks:
      - name: seed
        on_craete:
          - run: echo hello
"""


@pytest.fixture
def initialized(tmp_path: Path) -> Path:
    """A folder where `runner init` wrote runner.yaml and runner.schema.json."""
    result = runner_cli("init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path


def test_a_misspelled_key_and_a_wrong_type_are_shown_where_they_are(
    server: LanguageServer, initialized: Path
) -> None:
    uri = server.open(initialized / "broken.yaml", BROKEN)
    diagnostics = server.diagnostics(uri)
    shown = sorted((json.dumps(d["range"]), d["message"]) for d in diagnostics)
    # The hook lacks on_create (its anyOf): shown on the first character of the item.
    hook_item = span(BROKEN, "name: seed")
    hook_item["end"] = {**hook_item["start"], "character": hook_item["start"]["character"] + 1}
    assert shown == sorted(
        [
            (json.dumps(span(BROKEN, "on_craete")), "Property on_craete is not allowed."),
            (json.dumps(span(BROKEN, "many")), 'Incorrect type. Expected "integer".'),
            (json.dumps(hook_item), 'Missing property "on_create".'),
        ]
    )
    # Checked against the copy `runner init` wrote, not a download.
    assert schema_uris(diagnostics) == {(initialized / "runner.schema.json").as_uri()}


def test_completion_inside_the_environment_offers_its_keys(
    server: LanguageServer, initialized: Path
) -> None:
    text = (
        "# yaml-language-server: $schema=./runner.schema.json\n"
        "version: 1\n"
        "agent:\n"
        "  model: mistral-large-4\n"
        "  environment:\n"
        "    sandbox: docker\n"
        "    \n"
    )
    uri = server.open(initialized / "completing.yaml", text)
    server.diagnostics(uri)  # the schema is loaded once the first check is out
    result = server.request(
        "textDocument/completion",
        {"textDocument": {"uri": uri}, "position": {"line": 6, "character": 4}},
    )
    items = result["items"] if isinstance(result, dict) else result
    labels = {item["label"] for item in items}
    assert {"image", "memory", "read_only_root", "pids_limit", "hooks"} <= labels
    assert "sandbox" not in labels  # already there
    assert "model" not in labels  # a key of agent, one level up


def test_completion_offers_the_tool_keys(server: LanguageServer, initialized: Path) -> None:
    """Issue 29: ``agent.builtin_tools`` and ``agent.tools`` are in the schema
    the editor reads, and so is every key of a declared tool."""
    text = (
        "# yaml-language-server: $schema=./runner.schema.json\n"
        "version: 1\n"
        "agent:\n"
        "  model: mistral-large-4\n"
        "  tools:\n"
        "    - name: count_lines\n"
        "      \n"
        "  \n"
    )
    uri = server.open(initialized / "tools.yaml", text)
    server.diagnostics(uri)

    def labels(line: int, character: int) -> set[str]:
        result = server.request(
            "textDocument/completion",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
        )
        items = result["items"] if isinstance(result, dict) else result
        return {item["label"] for item in items}

    in_tool = labels(6, 6)
    assert {"description", "parameters", "run", "timeout_seconds", "env", "cwd"} <= in_tool
    assert {"secrets", "consumers", "no_leading_option", "max_output_chars"} <= in_tool
    assert "name" not in in_tool  # already there
    assert {"builtin_tools", "environment"} <= labels(7, 2)


def assert_checked_and_clean(server: LanguageServer, path: Path, schema: Path) -> None:
    """``path`` has no diagnostics, and the same text plus a stray key has one,
    from ``schema``: so "no diagnostics" means checked and fine, not unchecked."""
    text = path.read_text()
    assert server.diagnostics(server.open(path, text)) == []
    stray = path.with_name(f"{path.stem}.with-stray-key.yaml")  # never written
    diagnostics = server.diagnostics(server.open(stray, text + "\nstray_key: 1\n"))
    assert [d["message"] for d in diagnostics] == ["Property stray_key is not allowed."]
    assert schema_uris(diagnostics) == {schema.as_uri()}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_an_example_is_checked_and_has_no_diagnostics(
    server: LanguageServer, example: Path
) -> None:
    # The modeline names schemas/runner.schema.json, a symlink into the package.
    assert REPOSITORY_SCHEMA.is_symlink()
    assert example.read_text().splitlines()[0] == (
        "# yaml-language-server: $schema=../schemas/runner.schema.json"
    )
    assert_checked_and_clean(server, example, REPOSITORY_SCHEMA)


def test_the_file_runner_init_writes_is_checked_and_has_no_diagnostics(
    server: LanguageServer, initialized: Path
) -> None:
    assert_checked_and_clean(
        server, initialized / "runner.yaml", initialized / "runner.schema.json"
    )


def test_there_are_examples_to_check() -> None:
    assert len(EXAMPLES) >= 5


# --- the schema's text against the code -------------------------------------

ENVIRONMENT = SCHEMA["$defs"]["environment"]["properties"]
NETWORK = SCHEMA["$defs"]["network"]
ALLOW = NETWORK["oneOf"][1]["properties"]["allow"]
EXAMPLE_PHRASE = re.compile(r"(?:for example|such as|e\.g\.)\s+([^,;()]+?)(?=[,;()]|\.\s|\.?$)")


def examples_in(description: str) -> list[Any]:
    """The example values a description gives ("for example 1.5", "such as 512m or 2g")."""
    values = []
    for phrase in EXAMPLE_PHRASE.findall(description):
        values += [yaml.safe_load(word) for word in phrase.split(" or ")]
    return values


def backend_of(description: str) -> str:
    """The first backend a description is prefixed with ("docker, mistral: ..."), else docker."""
    prefix = re.match(r"^((?:docker|mistral)(?:, (?:docker|mistral))*):", description)
    return prefix.group(1).split(", ")[0] if prefix else "docker"


def config_problems(tmp_path: Path, environment: dict[str, Any]) -> list[str]:
    path = tmp_path / "config.yaml"
    config = {"version": 1, "agent": {"model": "m", "environment": environment}}
    path.write_text(yaml.safe_dump(config))
    return [problem.message for problem in validate_file(path)]


def test_the_network_allow_description_says_what_the_code_accepts(tmp_path) -> None:
    for description in (NETWORK["description"], ALLOW["description"]):
        text = description.lower()
        assert "ip addresses or cidr ranges" in text, description
        assert "host names are refused" in text, description
    assert "ip address or cidr range" in ALLOW["items"]["description"].lower()
    examples = examples_in(ALLOW["description"]) + examples_in(ALLOW["items"]["description"])
    assert len(examples) >= 2, "the allow descriptions should show an address and a range"
    for value in examples:
        environment = {"sandbox": "mistral", "network": {"allow": [value]}}
        assert config_problems(tmp_path, environment) == [], value
    refused = config_problems(
        tmp_path, {"sandbox": "mistral", "network": {"allow": ["api.github.com"]}}
    )
    assert any("not host names" in problem for problem in refused), refused


EXAMPLES_BY_OPTION = [
    (name, value)
    for name, option in ENVIRONMENT.items()
    if "description" in option
    for value in examples_in(option["description"])
]


def test_environment_descriptions_give_examples() -> None:
    assert {"memory", "cpus", "workspace_size"} <= {name for name, _ in EXAMPLES_BY_OPTION}


@pytest.mark.parametrize(("option", "value"), EXAMPLES_BY_OPTION, ids=str)
def test_an_example_in_an_environment_description_validates(
    tmp_path: Path, option: str, value: Any
) -> None:
    backend = backend_of(ENVIRONMENT[option]["description"])
    assert config_problems(tmp_path, {"sandbox": backend, option: value}) == []


DEFAULT_PHRASE = re.compile(r"\(default ([^,;()\s]+)")
#: The compiled sandbox's attribute for an option, where the names differ.
ATTRIBUTES = {"pool": "pool_size"}
DEFAULTS = [
    (name, yaml.safe_load(match.group(1)))
    for name, option in ENVIRONMENT.items()
    if (match := DEFAULT_PHRASE.search(option.get("description", "")))
]


@pytest.mark.parametrize(("option", "default"), DEFAULTS, ids=str)
def test_a_default_in_an_environment_description_is_the_compiled_default(
    tmp_path: Path, option: str, default: Any
) -> None:
    backend = backend_of(ENVIRONMENT[option]["description"])
    path = tmp_path / "config.yaml"
    config = {"version": 1, "agent": {"model": "m", "environment": {"sandbox": backend}}}
    path.write_text(yaml.safe_dump(config))
    environment = compile_file(path).agent.environment
    assert getattr(environment, ATTRIBUTES.get(option, option)) == default


def test_defaults_are_found_in_the_descriptions() -> None:
    assert {"memory", "pids_limit", "default_exec_timeout_seconds"} <= dict(DEFAULTS).keys()
