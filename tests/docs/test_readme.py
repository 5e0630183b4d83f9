"""README.md and the pages of docs/ are run, not only read: every fenced code
block in them is checked here (issue 31 moved most of README's blocks to
docs/; they are checked where they now live).

Each block is found with its file and line number and checked by its language:

- shell (``sh``, ``bash``, ``shell``, ``console``): run with bash, every
  command, in a fresh folder holding a copy of ``examples/`` and ``bench/``
  and a ``.venv`` link to this venv, PATH starting with the venv's bin (a user
  who followed the install steps); exit status 0 unless the document says
  otherwise.
- ``yaml``: a runner file (it has ``version:``) goes through the real
  ``runner validate``; a fragment is placed into a minimal runner file where
  its marker says, then validated; a GitHub Actions step is checked against
  ``action.yml`` and its session inputs are rendered with the session file it
  stands for.
- ``python``: run in a subprocess with the fresh folder as cwd, as a script;
  a block using ``await`` at the top level runs as in ``python -m asyncio``,
  inside ``runner.local_runtime()`` so that no session outlives it.
- ``json``: parsed.
- ``NOT_EXECUTABLE`` languages (output samples) are not run.

A block's checks are tuned by HTML comments on the lines right above it
(invisible on GitHub), one directive each::

    <!-- doc-test: skip: REASON -->         not run (needs the internet, ...)
    <!-- doc-test: docker -->               needs the Docker engine and the test image
    <!-- doc-test: postgres -->             needs a PostgreSQL server: the tests' own
                                            (tests/support/postgres_server.py), reached through
                                            PGHOST and PGUSER, with an empty database
                                            ``runner``
    <!-- doc-test: creates: FILE... -->     files the block leaves behind, not empty
    <!-- doc-test: exit: N -->              the exit status the document says it has
    <!-- doc-test: files: PATH... -->       repository files the YAML file's folder holds
    <!-- doc-test: network: REASON -->      the runner file opens its sandbox's network
    <!-- doc-test: yaml-fragment: PATH -->  the snippet's place in a runner file ("." merges
                                            it into the top level)
    <!-- doc-test: github-step: FILE -->    a workflow step using action.yml for session FILE
    <!-- doc-test: continues: WHY -->       python: runs after the python block before it,
                                            in one namespace (it uses that block's names)
    <!-- doc-test: python-fragment: WHY --> python: only compiled

Blocks that would reach a model get the chat-completions stand-in in
``tests/support/chat_server.py`` (``MISTRAL_SERVER_URL``); blocks not marked
``docker`` get a ``DOCKER_HOST`` that answers nothing, so a missing marker
fails instead of skipping quietly.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_IMAGE

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
#: Pages of docs/ whose blocks are not run, and why.
NOT_RUN = {
    "docs/architecture.md": "maintainers' notes on the layers: its command needs the checkout's "
    ".importlinter (scripts/test runs lint-imports itself) and its tree is a diagram",
}
#: Every document whose blocks run: the README, then each page of docs/.
DOCUMENTS = [
    README,
    *sorted(
        path
        for path in (ROOT / "docs").glob("*.md")
        if path.relative_to(ROOT).as_posix() not in NOT_RUN
    ),
]
VENV = Path(sys.prefix)
#: Copied into every block's fresh folder: the files the documents' commands name.
WORKDIR_COPIES = ("examples", "bench")

SHELL = {"sh", "bash", "shell", "console"}
#: Languages whose blocks are not run, and why.
NOT_EXECUTABLE = {
    "text": "output samples: what runner prints, not something to type",
}
KNOWN_LANGUAGES = SHELL | {"yaml", "python", "json"} | set(NOT_EXECUTABLE)
MARKERS = {
    "skip",
    "docker",
    "postgres",
    "creates",
    "exit",
    "files",
    "network",
    "yaml-fragment",
    "github-step",
    "continues",
    "python-fragment",
}
#: At most this many blocks may be skipped, in all the documents together.
#: Today two: README's install, which fetches from the package index
#: (scripts/smoke-wheel installs the built package with pip and pipx on every
#: run), and the test command itself.  Raise it only for a command that truly
#: cannot run in a test.
MAX_SKIPPED = 2

#: A runner file a fragment is placed into: the least the schema requires.
MINIMAL_RUNNER_FILE: dict[str, Any] = {
    "version": 1,
    "agent": {"model": "doc-test-model", "environment": {"sandbox": "docker"}},
}
#: Variables of the caller's environment a block must not see (besides every
#: RUNNER_* setting): real credentials, and the venv of whoever runs pytest.
HIDDEN_VARIABLES = ("MISTRAL_API_KEY", "OPENAI_API_KEY", "KOYEB_API_TOKEN", "VIRTUAL_ENV")

FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^<!-- doc-test: ([a-z-]+)(?:: (.+?))? -->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts, its language, text and markers."""

    file: str  # relative to the repository: README.md, docs/yaml.md, ...
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    markers: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def marker_words(self, name: str) -> list[str]:
        return self.markers.get(name, "").split()


def markers_above(lines: list[str], fence_index: int, file: str) -> dict[str, str]:
    """The ``doc-test`` comments on the lines right above a fence, by name."""
    markers: dict[str, str] = {}
    index = fence_index - 1
    while index >= 0 and (match := MARKER.match(lines[index])):
        name, value = match.groups()
        assert name not in markers, f"{file}:{index + 1}: a second {name!r} marker"
        markers[name] = value or ""
        index -= 1
    return markers


def read_blocks(text: str, file: str) -> list[Block]:
    """Every fenced block of a Markdown text, in order."""
    lines = text.splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, language = match.groups()
        end = next((i for i in range(index + 1, len(lines)) if lines[i].rstrip() == fence), None)
        assert end is not None, f"{file}:{index + 1}: the block is never closed"
        body = "".join(line + "\n" for line in lines[index + 1 : end])
        blocks.append(Block(file, index + 1, language, body, markers_above(lines, index, file)))
        index = end + 1
    return blocks


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


TEXTS = {relative(path): path.read_text(encoding="utf-8") for path in DOCUMENTS}
BLOCKS = [block for file, text in TEXTS.items() for block in read_blocks(text, file)]


def needs_docker(block: Block) -> bool:
    """A block needs Docker if it, or a block it continues, is marked so."""
    return any("docker" in b.markers for b in program_of(block))


def program_of(block: Block) -> list[Block]:
    """The python blocks that run together: those it continues, then the block."""
    if "continues" not in block.markers:
        return [block]
    earlier = [
        b for b in BLOCKS if b.file == block.file and b.language == "python" and b.line < block.line
    ]
    assert earlier, f"{block.where}: 'continues', but no python block comes before it"
    return [*program_of(earlier[-1]), block]


def block_params() -> Iterator[Any]:
    for block in BLOCKS:
        if block.language in NOT_EXECUTABLE:
            continue
        marks = []
        if "skip" in block.markers:
            marks.append(pytest.mark.skip(reason=f"{block.where}: {block.markers['skip']}"))
        if needs_docker(block):
            marks.append(pytest.mark.docker)
        yield pytest.param(block, id=f"{block.where}-{block.language}", marks=marks)


# --- the environment blocks run in -------------------------------------------


@pytest.fixture(scope="module")
def chat_server_url() -> Iterator[str]:
    """A chat-completions stand-in on 127.0.0.1 for any block that calls a model."""
    from chat_server import ChatServer, assistant

    with ChatServer([assistant("Done.") for _ in range(20)]) as server:
        yield server.url


def block_environment(block: Block, chat_server_url: str) -> dict[str, str]:
    """The caller's environment, as after the install steps, with no real keys."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in HIDDEN_VARIABLES and not name.startswith("RUNNER_")
    }
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MISTRAL_SERVER_URL"] = chat_server_url
    env["MISTRAL_API_KEY"] = "doc-test-key"
    if needs_docker(block):
        # what docs/events.md says to do where nothing is pulled
        env["RUNNER_DOCKER_IMAGE"] = TEST_IMAGE
    else:
        env["DOCKER_HOST"] = "unix:///nonexistent/doc-test-has-no-docker.sock"
    return env


def fresh_workdir(path: Path) -> Path:
    """A folder like a checkout after the install steps: the files commands name, the venv."""
    for name in WORKDIR_COPIES:
        shutil.copytree(ROOT / name, path / name, ignore=shutil.ignore_patterns("__pycache__"))
    (path / ".venv").symlink_to(VENV)
    return path


def assert_created(block: Block, workdir: Path) -> None:
    for name in block.marker_words("creates"):
        file = workdir / name
        assert file.is_file() and file.stat().st_size > 0, f"{block.where} did not create {name}"


def runner_command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The installed ``runner`` console script, as the documents' reader runs it."""
    return subprocess.run(
        [str(VENV / "bin" / "runner"), *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


# --- shell blocks -------------------------------------------------------------


def shell_script(block: Block) -> str:
    """The commands of a shell block; in ``console`` blocks, the ``$ `` lines only."""
    if block.language != "console":
        return block.text
    return "".join(line[2:] + "\n" for line in block.text.splitlines() if line.startswith("$ "))


def check_shell(block: Block, workdir: Path, env: dict[str, str]) -> None:
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", shell_script(block)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    expected = int(block.markers.get("exit", "0"))
    assert result.returncode == expected, (
        f"{block.where}: exit {result.returncode}, the document says {expected}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    )
    assert_created(block, workdir)


# --- python blocks ------------------------------------------------------------

#: Runs the block files named on its command line (pairs: the document's
#: name, the file) in one namespace, in order.  Compiled under the document's
#: name so tracebacks name its lines.
PYTHON_HARNESS = """\
import ast, asyncio, inspect, sys

pairs = zip(sys.argv[1::2], sys.argv[2::2])
codes = [
    compile(open(path).read(), name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    for name, path in pairs
]
namespace = {"__builtins__": __builtins__}
if not any(code.co_flags & inspect.CO_COROUTINE for code in codes):
    # A script: only the last block is __main__, earlier ones read like imports.
    for number, code in enumerate(codes, 1):
        namespace["__name__"] = "__main__" if number == len(codes) else "readme"
        exec(code, namespace)
else:
    import runner

    async def run_blocks():
        namespace["__name__"] = "readme"
        async with runner.local_runtime():  # closes the sessions the blocks leave open
            for code in codes:
                result = eval(code, namespace)
                if inspect.isawaitable(result):
                    await result

    asyncio.run(run_blocks())
"""


def block_source(block: Block) -> str:
    """The block's text, padded so that its lines keep their line numbers."""
    return "\n" * block.line + block.text


def check_python(block: Block, workdir: Path, env: dict[str, str]) -> None:
    if "python-fragment" in block.markers:
        compile(block_source(block), block.file, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    harness = workdir / "readme_harness.py"
    harness.write_text(PYTHON_HARNESS, encoding="utf-8")
    files = []
    for part in program_of(block):
        file = workdir / f"block_{part.file.replace('/', '_')}_{part.line}.py"
        file.write_text(block_source(part), encoding="utf-8")
        files += [part.file, str(file)]
    result = subprocess.run(
        [str(VENV / "bin" / "python"), str(harness), *files],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{block.where}: exit {result.returncode}\n{result.stderr}"
    assert_created(block, workdir)


# --- yaml blocks --------------------------------------------------------------


def steps_of(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    environment = document["agent"].get("environment") or {}
    for hook in environment.get("hooks", []):
        for point in ("on_create", "on_destroy"):
            yield from hook.get(point, [])


def check_network_is_declared(block: Block, document: dict[str, Any]) -> None:
    """A file that fetches over the network opens its sandbox's network, and says why."""
    environment = document["agent"].get("environment") or {}
    fetches = any("://" in step.get("run", "") for step in steps_of(document))
    opened = environment.get("network", "none") != "none"
    if fetches and environment.get("sandbox") in ("docker", "mistral"):
        assert opened, f"{block.where}: a run step fetches over a network the sandbox lacks"
    assert ("network" in block.markers) == (fetches or opened), (
        f"{block.where}: a file that uses the network has a 'network' marker saying why, "
        "and only such a file"
    )


def validate(text: str, folder: Path, block: Block) -> None:
    file = folder / f"readme-{block.line}.yaml"
    file.write_text(text, encoding="utf-8")
    result = runner_command("validate", str(file), cwd=folder)
    assert result.returncode == 0, (
        f"{block.where}: runner validate failed\n{result.stdout}{result.stderr}\n--- file:\n{text}"
    )


def place_fragment(fragment: Any, position: str) -> dict[str, Any]:
    """A minimal runner file with the fragment at ``position`` (``.`` merges at the top)."""
    document = json.loads(json.dumps(MINIMAL_RUNNER_FILE))
    if position == ".":
        return merge(document, fragment)
    *parents, last = position.split(".")
    node = document
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = fragment
    return document


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def load_runner_yaml(block: Block) -> Any:
    """The block's data as runner reads YAML (1.2 core: ``on``/``no`` stay strings)."""
    from runner.config.yaml_loader import load_text

    return load_text(block.text, file=block.where).data


def check_yaml(block: Block, workdir: Path, env: dict[str, str]) -> None:
    if "github-step" in block.markers:
        check_github_step(block, workdir)
        return
    if "yaml-fragment" in block.markers:
        document = place_fragment(load_runner_yaml(block), block.markers["yaml-fragment"])
        validate(yaml.safe_dump(document, sort_keys=False), workdir, block)
        return
    document = load_runner_yaml(block)
    assert isinstance(document, dict) and "version" in document, (
        f"{block.where}: a YAML block without version: needs a yaml-fragment or github-step marker"
    )
    for name in block.marker_words("files"):
        shutil.copy(ROOT / name, workdir / Path(name).name)
    check_network_is_declared(block, document)
    validate(block.text, workdir, block)


#: A pull request title as hostile as docs/github-actions.md says titles may be.
HOSTILE_TITLE = 'Fix "it" $(touch pwned) `id` ::error::x'
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def fill_expressions(text: str) -> str:
    """What GitHub pastes for each ``${{ }}``: toJSON of a hostile text, else a number."""

    def value(match: re.Match[str]) -> str:
        return json.dumps(HOSTILE_TITLE) if match[1].startswith("toJSON(") else "7"

    return EXPRESSION.sub(value, text)


def check_github_step(block: Block, workdir: Path) -> None:
    """The step's ``with:`` fits action.yml, and its inputs fit the session file."""
    (step,) = yaml.safe_load(block.text)
    declared = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"]
    given = step["with"]
    assert set(given) <= set(declared), (
        f"{block.where}: unknown inputs {set(given) - set(declared)}"
    )
    required = {name for name, spec in declared.items() if spec.get("required")}
    assert required <= set(given), f"{block.where}: missing inputs {required - set(given)}"
    inputs_file = workdir / "inputs.json"
    inputs_file.write_text(fill_expressions(given["inputs"]), encoding="utf-8")
    json.loads(inputs_file.read_text(encoding="utf-8"))  # the inputs are one JSON object
    session_file = block.markers["github-step"]
    sandbox = ["--sandbox", given["sandbox"]] if "sandbox" in given else []
    result = runner_command(
        "render", session_file, "--inputs", str(inputs_file), *sandbox, cwd=workdir
    )
    assert result.returncode == 0, f"{block.where}: {result.stderr}"
    assert shlex.quote(HOSTILE_TITLE) in result.stdout, result.stdout


def check_json(block: Block, workdir: Path, env: dict[str, str]) -> None:
    json.loads(block.text)


CHECKS = {
    **dict.fromkeys(SHELL, check_shell),
    "yaml": check_yaml,
    "python": check_python,
    "json": check_json,
}


# --- the tests ----------------------------------------------------------------


@pytest.mark.parametrize("block", list(block_params()))
def test_readme_block(
    block: Block, tmp_path: Path, chat_server_url: str, request: pytest.FixtureRequest
) -> None:
    if needs_docker(block):
        request.getfixturevalue("docker_client")  # skips, or fails under CI, without Docker
    workdir = fresh_workdir(tmp_path)
    env = block_environment(block, chat_server_url)
    if "postgres" in block.markers:
        env.update(postgres_environment(request.getfixturevalue("postgres_server")))
    CHECKS[block.language](block, workdir, env)


def postgres_environment(server: Any) -> dict[str, str]:
    """libpq's variables for the tests' PostgreSQL server, which gets a fresh
    database ``runner`` (what docs/serve.md has its reader create)."""
    import psycopg

    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS runner WITH (FORCE)")
        admin.execute("CREATE DATABASE runner")
    return {"PGHOST": str(server.socket_dir), "PGUSER": "runner"}


def test_the_documents_are_readme_and_every_docs_page() -> None:
    assert "README.md" in TEXTS and "docs/yaml.md" in TEXTS and "docs/events.md" in TEXTS
    assert len(TEXTS) == 1 + len(list((ROOT / "docs").glob("*.md"))) - len(NOT_RUN)
    assert all((ROOT / name).is_file() for name in NOT_RUN)


@pytest.mark.parametrize("file", list(TEXTS))
def test_every_block_is_found_and_has_a_known_language(file: str) -> None:
    lines = TEXTS[file].splitlines()
    blocks = [b for b in BLOCKS if b.file == file]
    fence_lines = [n for n, line in enumerate(lines, 1) if line.lstrip().startswith("```")]
    for n in fence_lines:
        assert lines[n - 1].startswith("```"), (
            f"{file}:{n}: an indented fence; this test reads fences at the line start only"
        )
    assert len(fence_lines) == 2 * len(blocks), "a fence the reader did not pair"
    unknown = [(b.where, b.language) for b in blocks if b.language not in KNOWN_LANGUAGES]
    assert unknown == [], "give each block a language this test knows how to check"


def test_the_documents_have_blocks() -> None:
    assert [b for b in BLOCKS if b.file == "README.md"], "no code block found in README.md"
    run = [b for b in BLOCKS if b.language not in NOT_EXECUTABLE and "skip" not in b.markers]
    # README had 15 blocks that ran before issue 31 split it into docs/: none was dropped
    assert len(run) >= 15, "fewer blocks run than README had before it was split"


@pytest.mark.parametrize("file", list(TEXTS))
def test_every_marker_is_known_and_sits_on_a_block(file: str) -> None:
    marker_lines = [
        line for line in TEXTS[file].splitlines() if line.lstrip().startswith("<!-- doc-test")
    ]
    for line in marker_lines:
        match = MARKER.match(line)
        assert match and match[1] in MARKERS, f"not a doc-test marker this test knows: {line}"
    assert len(marker_lines) == sum(len(b.markers) for b in BLOCKS if b.file == file), (
        f"{file}: a doc-test marker that is not on the lines right above a block"
    )


def test_skipped_blocks_say_why_and_stay_few() -> None:
    skipped = [b for b in BLOCKS if "skip" in b.markers]
    for block in skipped:
        assert len(block.markers["skip"].split()) >= 3, f"{block.where}: say why it is skipped"
    assert len(skipped) <= MAX_SKIPPED, [b.where for b in skipped]


def test_ci_runs_the_test_command_readme_gives() -> None:
    (test_block,) = [b for b in BLOCKS if b.text.strip() == "scripts/test"]
    assert test_block.file == "README.md"
    commands = [
        shlex.split(line)
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-1] == ["exec", *shlex.split(test_block.text)]


def test_runner_is_the_command_readme_names() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "runner" in pyproject["project"]["scripts"]
    assert (VENV / "bin" / "runner").exists()


def test_the_starter_file_readme_shows_is_what_runner_init_writes(tmp_path: Path) -> None:
    (shown,) = [
        b
        for b in BLOCKS
        if b.file == "README.md" and b.text.startswith("# yaml-language-server: $schema=./")
    ]
    result = runner_command("init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "runner.yaml").read_text(encoding="utf-8") == shown.text


def doc_section(file: str, heading: str) -> str:
    """The text under a ``## `` or ``### `` heading of a document, up to the next
    heading of its level."""
    text = TEXTS[file]
    level = heading.split()[0]
    start = text.index(f"\n{heading}\n")
    end = text.find(f"\n{level} ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_tests_section_names_every_step_of_scripts_test() -> None:
    script = "\n".join(
        line
        for line in (ROOT / "scripts" / "test").read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#")
    )
    steps = set(re.findall(r"\bscripts/[\w-]+", script))
    steps |= set(re.findall(r"\.venv/bin/(ruff \w+(?: --\w+)?|pytest|mkdocs \w+)", script))
    assert {"scripts/docker-up", "scripts/smoke-wheel", "ruff check", "pytest"} <= steps
    assert "mkdocs build" in steps
    section = doc_section("docs/contributing.md", "## Tests")
    assert [step for step in sorted(steps) if f"`{step}`" not in section] == []


def test_the_events_table_lists_every_event_kind() -> None:
    schema = json.loads((ROOT / "runner" / "schemas" / "events.schema.json").read_text())
    kinds = {entry["properties"]["event"]["const"] for entry in schema["oneOf"]}
    rows = [
        line.split("|")[1]
        for line in doc_section("docs/events.md", "## The events").splitlines()
        if line.startswith("| `")
    ]
    in_table = {name for cell in rows for name in re.findall(r"`([a-z_]+)`", cell)}
    assert in_table == kinds
