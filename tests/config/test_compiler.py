"""runner.load(): YAML compiles into ordinary hooks that run through the one lifecycle."""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path
from typing import Annotated

import pytest

import runner as agents
from runner.config import ConfigError, compile_file, validate_file
from runner.config.steps import StepFailedError, StepsHook
from runner.testing import RecordingSandbox

pytestmark = pytest.mark.anyio


def write(tmp_path: Path, text: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


REPOSITORY_INPUT = """\
version: 1
inputs:
  acme.repository:
    as: repo
    schema:
      type: object
      properties:
        repository: {type: string}
        revision: {type: string, default: main}
      required: [repository]
"""


def recording(agent: agents.Agent, **options) -> RecordingSandbox:
    """The same hooks, moved onto an in-memory recording sandbox."""
    env = RecordingSandbox(hooks=agent.environment.hooks, **options)
    agent.environment = env
    return env


class Repo(agents.SessionInput):
    input_id = "acme.repository"
    repository: str
    revision: str = "main"


class PythonSeed(agents.SandboxHook):
    """The hand-written twin of the YAML hook in test_yaml_and_python_hooks_send_identical_commands."""

    async def on_create(self, ctx, *, repo: Annotated[Repo, agents.Depends()]) -> None:
        await ctx.sandbox.execute("echo 'Run the tests with pytest.' > NOTES.md")
        await ctx.sandbox.execute(
            f"git clone --branch {shlex.quote(repo.revision)} -- "
            f"https://github.com/{shlex.quote(repo.repository)}.git src",
            timeout_seconds=240,
        )

    async def on_destroy(self, ctx, *, repo: Annotated[Repo, agents.Depends()]) -> None:
        await ctx.sandbox.execute(f"echo done {shlex.quote(repo.repository)}")


async def test_yaml_and_python_hooks_send_identical_commands(tmp_path) -> None:
    path = write(
        tmp_path,
        REPOSITORY_INPUT
        + """\
consumers: [git]
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: seed-workspace
        on_create:
          - run: echo 'Run the tests with pytest.' > NOTES.md
          - run: git clone --branch {{ repo.revision }} -- https://github.com/{{ repo.repository }}.git src
            timeout_seconds: 240
        on_destroy:
          - run: echo done {{ repo.repository }}
""",
    )
    value = {"repository": "acme/it's $(evil)", "revision": "v1; rm -rf /"}
    yaml_env = recording(agents.load(path))
    yaml_agent = agents.Agent(model="m", environment=yaml_env)
    python_env = RecordingSandbox(hooks=[PythonSeed()])
    python_agent = agents.Agent(model="m", environment=python_env)
    for agent in (yaml_agent, python_agent):
        async with await agent.start_session(session_inputs={"acme.repository": value}):
            pass

    def calls(env):
        return [(c.kind, c.argument, c.options.get("timeout_seconds")) for c in env.calls]

    assert calls(yaml_env) == calls(python_env)
    assert len(yaml_env.commands) == 3


async def test_yaml_hooks_follow_the_lifecycle_order_and_unwind_on_failure(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: a
                on_create: [{run: echo a-create}]
                on_destroy: [{run: echo a-destroy}]
              - name: b
                on_create: [{run: echo b-create}]
                on_destroy: [{run: echo b-destroy}]
              - name: c
                on_create: [{run: exit 3}, {run: echo never}]
                on_destroy: [{run: echo c-destroy}]
        """,
    )
    agent = agents.load(path)

    def respond(command):
        if command == "exit 3":
            return agents.SandboxExecutionResult(exit_code=3, stdout="", stderr="boom")
        return None

    env = recording(agent, respond=respond)
    with pytest.raises(StepFailedError, match=r"step 1 \(exit 3\) failed: command exited 3: boom"):
        await agent.start_session()
    assert env.commands == [
        "echo a-create",
        "echo b-create",
        "exit 3",
        "echo b-destroy",
        "echo a-destroy",
    ]
    assert env.calls[-1].kind == "delete"


async def test_close_runs_yaml_on_destroy_in_reverse_and_continues_past_failures(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - {name: a, on_destroy: [{run: echo a}]}
              - {name: b, on_destroy: [{run: fail-b}, {run: echo never}]}
              - {name: c, on_destroy: [{run: echo c}]}
        """,
    )
    agent = agents.load(path)
    env = recording(
        agent,
        respond=lambda c: agents.SandboxExecutionResult(1, "", "no") if c == "fail-b" else None,
    )
    async with await agent.start_session():
        pass
    assert env.commands == ["echo c", "fail-b", "echo a"]


async def test_check_false_lets_a_step_fail_without_failing_the_hook(tmp_path) -> None:
    """The failing step does not stop the hook: the next step runs, the hook and
    the session succeed, and the failed step's exit code is in its event."""
    from runner.core.events import listen

    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: tolerant
                on_create:
                  - {run: "echo before > before.txt; exit 3", check: false}
                  - {run: echo after > after.txt}
        """,
    )
    agent = agents.load(path, output_dir=tmp_path)
    events: list[dict] = []
    with listen(events.append):
        async with await agent.start_session() as session:
            files = await session.sandbox.execute("cat before.txt after.txt")
    assert files.stdout == "before\nafter\n"
    steps = [(e["event"], e["step"]) for e in events if e["event"].startswith("step_")]
    assert steps == [
        ("step_started", 0),
        ("step_finished", 0),
        ("step_started", 1),
        ("step_finished", 1),
    ]
    finished = [e for e in events if e["event"] == "step_finished"]
    assert [(e["exit_code"], e["timed_out"]) for e in finished] == [(3, False), (0, False)]
    assert [e["event"] for e in events if e["event"].startswith("hook_")] == [
        "hook_started",
        "hook_finished",
        "hook_started",
        "hook_finished",
    ]


async def test_write_save_and_upload_steps_on_the_local_sandbox(tmp_path) -> None:
    (tmp_path / "seed.txt").write_text("from the host\n")
    path = write(
        tmp_path,
        REPOSITORY_INPUT
        + """\
agent:
  model: m
  environment:
    sandbox: local
    env: {GREETING: hello}
    hooks:
      - name: files
        on_create:
          - write: docs/README.md
            content: "# {{ repo.repository }} ($GREETING stays literal)\\n"
          - upload: seed.txt
            to: in/seed.txt
          - run: cat in/seed.txt docs/README.md > combined.txt
            env: {WHO: "{{ repo.repository }}"}
          - run: echo "$WHO" > who.txt
            env: {WHO: "{{ repo.repository }}"}
        on_destroy:
          - save: combined.txt
            to: out/{{ repo.revision }}/combined.txt
          - save: who.txt
            to: who.txt
          - save: never-made.txt
            to: never.txt
            missing_ok: true
""",
    )
    out = tmp_path / "artifacts"
    agent = agents.load(path, output_dir=out)
    async with await agent.start_session(session_inputs={"acme.repository": {"repository": "a b"}}):
        pass
    assert (out / "out" / "main" / "combined.txt").read_text() == (
        "from the host\n# a b ($GREETING stays literal)\n"
    )
    assert (out / "who.txt").read_text() == "a b\n"
    assert not (out / "never.txt").exists()


async def test_a_templated_host_path_that_leaves_the_output_dir_fails_the_step(tmp_path) -> None:
    path = write(
        tmp_path,
        REPOSITORY_INPUT
        + """\
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: exporter
        on_create:
          - write: f.txt
            content: x
          - save: f.txt
            to: "{{ repo.repository }}/f.txt"
""",
    )
    agent = agents.load(path, output_dir=tmp_path / "out")
    recording(agent)
    with pytest.raises(
        StepFailedError, match=r"HostPathError: save: to: '\.\./\.\./x/f\.txt' contains '\.\.'"
    ):
        await agent.start_session(session_inputs={"acme.repository": {"repository": "../../x"}})
    assert not (tmp_path / "x").exists()


async def test_a_python_hook_depends_on_a_yaml_declared_input(tmp_path) -> None:
    (tmp_path / "my_hooks.py").write_text(
        textwrap.dedent(
            """\
            from typing import Annotated
            import runner as agents

            class Repo(agents.SessionInput):
                input_id = "acme.repository"
                repository: str
                revision: str = "main"

            class Record(agents.SandboxHook):
                def __init__(self, prefix):
                    self.prefix = prefix

                async def on_create(self, ctx, *, repo: Annotated[Repo, agents.Depends()]):
                    await ctx.sandbox.execute(f"echo {self.prefix} {repo.repository} {repo.revision}")
            """
        )
    )
    path = write(
        tmp_path,
        REPOSITORY_INPUT
        + """\
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - python: my_hooks:Record
        name: recorder
        with: {prefix: seen}
""",
    )
    agent = agents.load(path)
    assert agent.environment.hooks[0].display_name == "recorder"
    env = recording(agent)
    async with await agent.start_session(session_inputs={"acme.repository": {"repository": "a/b"}}):
        pass
    assert env.commands == ["echo seen a/b main"]
    with pytest.raises(agents.SessionInputError, match="acme.repository"):
        await agent.start_session(session_inputs={"acme.repository": {"revision": "x"}})


async def test_declared_inputs_are_required_before_any_sandbox(tmp_path) -> None:
    path = write(
        tmp_path,
        REPOSITORY_INPUT + "agent:\n  model: m\n  environment:\n    sandbox: local\n",
    )
    agent = agents.load(path)
    env = recording(agent)
    with pytest.raises(
        agents.SessionInputError, match="agent default_agent needs session input 'acme.repository'"
    ):
        await agent.start_session()
    assert env.calls == []


async def test_an_optional_input_gets_its_defaults(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        inputs:
          ci.options:
            as: opts
            required: false
            schema:
              type: object
              properties:
                level: {type: integer, default: 2}
        agent:
          model: m
          environment:
            sandbox: local
            hooks:
              - name: h
                on_create: [{run: "echo level {{ opts.level }}"}]
        """,
    )
    agent = agents.load(path)
    env = recording(agent)
    async with await agent.start_session():
        pass
    assert env.commands == ["echo level '2'"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: local\n    image: x\n",
            "agent.yaml:6:5: 'image' does not apply to sandbox: local (at agent.environment.image)",
        ),
        (
            "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: none\n    hooks:\n"
            "      - {name: h, on_create: [{run: x}]}\n",
            "agent.yaml:7:7: hooks never run with sandbox: none; choose sandbox: local or docker "
            "(at agent.environment.hooks)",
        ),
        (
            "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: docker\n"
            "    network: {allow: [packages.example.com]}\n",
            "agent.yaml:6:14: docker cannot enforce network: {allow: [...]}; use none or all "
            "(at agent.environment.network)",
        ),
        (
            "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: local\n    hooks:\n"
            "      - python: no_such_module_here:Hook\n",
            "agent.yaml:7:17: cannot import 'no_such_module_here': No module named "
            "'no_such_module_here' (at agent.environment.hooks[0].python)",
        ),
        (
            "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: local\n    hooks:\n"
            "      - python: json:JSONDecoder\n",
            "agent.yaml:7:17: json:JSONDecoder is not a SandboxHook subclass "
            "(at agent.environment.hooks[0].python)",
        ),
        (
            "version: 1\ninputs:\n  x.y:\n    schema: {type: string}\nagent:\n  model: m\n",
            "agent.yaml:4:13: an input's schema must have type: object (at inputs.x.y.schema)",
        ),
        (
            "version: 1\ninputs:\n  x.y:\n    schema: {type: object, properties: {a: {type: nope}}}\n"
            "agent:\n  model: m\n",
            "agent.yaml:4:51: not a valid JSON Schema: 'nope' is not valid under any of the given "
            "schemas (at inputs.x.y.schema.properties.a.type)",
        ),
    ],
)
def test_compile_errors_name_file_line_column_and_path(tmp_path, text, expected) -> None:
    path = write(tmp_path, text)
    problems = [str(p).replace(str(path), "agent.yaml") for p in validate_file(path)]
    assert problems == [expected]


def test_runner_load_builds_the_agent_and_its_hooks_in_order(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          name: data-agent
          model: mistral-large-4
          instructions: Use bash.
          base_url: http://127.0.0.1:9/v1
          max_tool_calls: 7
          environment:
            sandbox: docker
            image: sandbox-runner-test:latest
            default_exec_timeout_seconds: 60
            memory: 512m
            hooks:
              - {name: first, on_create: [{run: "true"}]}
              - uses: git-identity
                with: {name: Review Bot, email: bot@example.com}
        """,
    )
    agent = agents.load(path)
    assert (agent.name, agent.model, agent.instructions) == (
        "data-agent",
        "mistral-large-4",
        "Use bash.",
    )
    assert (agent.base_url, agent.max_tool_calls) == ("http://127.0.0.1:9/v1", 7)
    env = agent.environment
    assert isinstance(env, agents.LocalDockerSandbox)
    assert (env.image, env.default_exec_timeout_seconds, env.memory) == (
        "sandbox-runner-test:latest",
        60,
        "512m",
    )
    assert env.network == agents.Network.none()
    assert (env.user, env.read_only_root) == ("sandbox", False)  # the defaults
    first, identity = env.hooks
    assert isinstance(first, StepsHook) and first.name == "first"
    assert isinstance(identity, agents.pattern.sandbox_hook.GitIdentity)
    assert (identity.git_name, identity.git_email) == ("Review Bot", "bot@example.com")


def test_docker_user_and_read_only_root_reach_the_sandbox(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment: {sandbox: docker, user: root, read_only_root: true}
        """,
    )
    env = agents.load(path).environment
    assert (env.user, env.read_only_root) == ("root", True)
    options = env.container_options(session_id="s", expires_at=None)
    assert options["read_only"] is True
    assert set(options["tmpfs"]) == {"/tmp", "/root", "/workspace", "/run/sandbox-runner"}


def test_compile_errors_raise_config_error_with_every_problem(tmp_path) -> None:
    path = write(
        tmp_path,
        REPOSITORY_INPUT
        + """\
agent:
  model: m
  environment:
    sandbox: local
    hooks:
      - name: h
        on_create:
          - run: echo "{{ repo.repository }}"
          - run: echo {{ nope }}
""",
    )
    with pytest.raises(ConfigError) as info:
        compile_file(path)
    assert len(info.value.problems) == 2


async def test_no_leading_dash_in_yaml_refuses_option_like_values(tmp_path) -> None:
    agent = agents.load(Path(__file__).parents[2] / "examples" / "quickstart.yaml")
    env = recording(agent)
    with pytest.raises(agents.SessionInputError, match="starts with '-'"):
        await agent.start_session(
            session_inputs={"acme.repository": {"repository": "a/b", "revision": "--force"}}
        )
    assert env.calls == []
