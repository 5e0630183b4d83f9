"""Issue 26, finding 3: what the agent starts does not outlive its turn, and
nothing it started runs beside an ``on_destroy`` hook.

Each test plays the agent through the fake model server (``chat_server``):
its bash tool starts a loop in the background that reads every process's
environment, as the review's reproducer did.  On the full, python3-minimal
and busybox images and on the local sandbox.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import uuid
from pathlib import Path

import anyio
import pytest
from chat_server import ChatServer, assistant
from conftest import EVERY_BACKEND, RUNNER_CLI, on_userns

import runner as agents
from runner.sandboxes.docker.environment import LABEL_OWNER_PID

SECRET = "s3cr3t-Value-4711"


def loop(marker: str) -> str:
    """The agent's command: a loop in the background that keeps every
    ``SECRET`` variable it finds in any process's environment in ``loot``,
    and a beat in ``beats`` each round.  ``marker`` is in the command line
    of the loop's shell (its /proc/PID/cmdline), so a listing finds it."""
    return (
        f": {marker}; touch loot beats; (while :; do cat /proc/*/environ 2>/dev/null"
        " | tr '\\0' '\\n' | grep SECRET >> loot; echo beat >> beats; sleep 0.05; done)"
        " >/dev/null 2>&1 &"
    )


#: The agent's second command: wait until the loop has gone round once.
BEATING = "while [ ! -s beats ]; do sleep 0.1; done"

#: A hook step: every process's command line into procs.txt, one a line.
LIST_PROCESSES = (
    "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done > procs.txt"
)


def owned_by(docker_client, pid: int) -> list[str]:
    containers = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"}
    )
    return [c.id for c in containers]


@pytest.mark.parametrize(
    "backend_on_every_image", [*EVERY_BACKEND, *on_userns("full")], indirect=True
)
def test_nothing_the_agent_started_runs_during_on_destroy(tmp_path, backend_on_every_image) -> None:
    """The review's reproducer, through ``runner run``: the agent's loop
    (kept past its turn with ``keep_background_processes: true``) read the
    ``secrets:`` value of an ``on_destroy`` step that slept a second, and
    the hook's own ``save:`` carried it out.  Now every process of the
    sandbox's commands is killed before ``on_destroy``: the loot holds no
    secret and the hook sees none of the agent's processes.  Without the
    kill, the loot held ``SECRET_TOKEN=...`` on every image and locally.
    Also on the remapped engine (``userns:full``), through ``DOCKER_HOST``."""
    backend = backend_on_every_image
    marker = f"agent-loop-{uuid.uuid4().hex}"
    replies = [
        assistant(None, ("c1", "bash", {"command": loop(marker)})),
        assistant(None, ("c2", "bash", {"command": BEATING})),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        config = tmp_path / "agent.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                secrets:
                  token: {{from_env: TEST_TOKEN}}
                agent:
                  model: m
                  base_url: {server.url}
                  keep_background_processes: true
                  environment:
                    sandbox: {backend.name}
                    hooks:
                      - name: carry
                        on_destroy:
                          - run: sleep 1; {LIST_PROCESSES}
                            secrets: {{SECRET_TOKEN: token}}
                          - save: loot
                            to: loot
                          - save: beats
                            to: beats
                          - save: procs.txt
                            to: procs.txt
                """
            )
        )
        process = subprocess.Popen(
            [*RUNNER_CLI, "run", str(config), "--prompt", "go", "--output-dir", "out"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env={
                **os.environ,
                "TMPDIR": str(tmp_path),
                "TEST_TOKEN": SECRET,
                **(backend.cli_environment() if backend.name == "docker" else {}),
            },
        )
        try:
            _, stderr = process.communicate(timeout=180)
        finally:
            process.kill()
    if backend.name == "docker":
        assert owned_by(backend.docker_client, process.pid) == []
    assert process.returncode == 0, stderr
    saved = {p.name: p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert saved["beats"], "the agent's loop never ran"
    assert SECRET not in saved["loot"], "the agent's loop read the on_destroy step's secret"
    assert marker not in saved["procs.txt"], "the agent's loop ran during on_destroy"


async def _command_lines(sandbox: agents.Sandbox) -> str:
    result = await sandbox.execute(LIST_PROCESSES + "; cat procs.txt")
    assert result.exit_code == 0, result.stderr
    return result.stdout


class StartsAService(agents.SandboxHook):
    """An ``on_create`` that leaves a process running for the agent (a
    database, a dev server) which starts a worker a second later, during the
    turn: a turn's end must kill neither.  (CI caught the worker race: a
    service's ``sleep``, forked after the mark, was killed, and the service
    with it.)"""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        worker = f'sh -c ": {self.marker}-worker; sleep 1000; :"'
        result = await ctx.sandbox.execute(
            f"sh -c ': {self.marker}; sleep 1; {worker}; :' >/dev/null 2>&1 &"
        )
        assert result.exit_code == 0, result.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("keep", [False, True])
async def test_a_turn_ends_what_it_started_in_the_background(
    backend_on_every_image, keep: bool
) -> None:
    """After a turn, what its tools left running is killed, unless the agent
    keeps it (``keep_background_processes=True``); what a hook started
    before the turn keeps running either way.  Without the kill, the loop
    was still running after the turn on every image and locally."""
    service = f"hook-service-{uuid.uuid4().hex}"
    marker = f"agent-loop-{uuid.uuid4().hex}"
    replies = [
        assistant(None, ("c1", "bash", {"command": loop(marker)})),
        assistant(None, ("c2", "bash", {"command": BEATING + "; sleep 1.5"})),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        model = agents.ChatCompletionsModel(
            "test-model", base_url=server.url, api_key="sk-test", backoff_seconds=0.01
        )
        env = backend_on_every_image.environment(hooks=[StartsAService(service)])
        agent = agents.Agent(model=model, environment=env, keep_background_processes=keep)
        async with await agent.start_session() as session:
            result = await session.run("go")
            assert isinstance(result, agents.Completed), result
            running = await _command_lines(session.sandbox)
            assert service in running, "the hook's process was killed with the turn's"
            assert f"{service}-worker" in running, "the worker the hook's service forked was killed"
            if keep:
                assert marker in running, "keep_background_processes did not keep the loop"
            else:
                assert marker not in running, "the turn's background loop outlived the turn"
            beats = await session.sandbox.read_file("beats")
            assert beats, "the agent's loop never ran"


def test_keep_background_processes_must_be_a_bool() -> None:
    with pytest.raises(agents.SdkError, match="keep_background_processes"):
        agents.Agent(model="m", keep_background_processes="yes")  # type: ignore[arg-type]


def test_the_yaml_option_reaches_the_agent(tmp_path: Path) -> None:
    from runner.config import ConfigError, load

    config = tmp_path / "agent.yaml"
    for value in ("true", "false"):
        config.write_text(f"version: 1\nagent:\n  model: m\n  keep_background_processes: {value}\n")
        assert load(config).keep_background_processes is (value == "true")
    config.write_text("version: 1\nagent:\n  model: m\n  keep_background_processes: 1\n")
    with pytest.raises(ConfigError, match="keep_background_processes"):
        load(config)


class Destroyed(agents.SandboxHook):
    def __init__(self) -> None:
        self.ran: list[str] = []

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        self.ran.append("on_destroy")


@pytest.mark.anyio
@pytest.mark.parametrize("failure", [RuntimeError("the engine is gone"), "hang", None])
async def test_no_on_destroy_runs_beside_processes_that_could_not_be_killed(
    failure, monkeypatch
) -> None:
    """If the processes cannot be killed (or the kill does not finish in
    time), no ``on_destroy`` runs beside them: the close reports why and
    still deletes the sandbox.  When the kill works, it comes first."""
    from runner.engine import cleanup
    from runner.testing import InMemorySandbox, RecordingSandbox

    order: list[str] = []

    class Stubborn(InMemorySandbox):
        async def end_processes(self, *, since=None):
            order.append("end_processes")
            if failure == "hang":
                await anyio.sleep_forever()
            if failure is not None:
                raise failure
            return 0

    class Environment(RecordingSandbox):
        async def create(self, *, session_id, expires_at):
            sandbox = Stubborn(self, session_id)
            self.sandboxes.append(sandbox)
            return sandbox

    monkeypatch.setattr(cleanup, "END_PROCESSES_SECONDS", 0.2)
    hook = Destroyed()
    hook.ran = order
    env = Environment(hooks=[hook])
    session = await agents.Agent(model="m", environment=env).start_session()
    await session.close()
    assert env.sandboxes[0].deleted
    if failure is None:
        assert order == ["end_processes", "on_destroy"]
        assert session.destroy_failures == []
    else:
        assert order == ["end_processes"]
        (reported,) = session.destroy_failures
        why = "timed out" if failure == "hang" else "the engine is gone"
        assert f"could not be stopped ({why})" in str(reported)
        assert "no on_destroy hook ran" in str(reported)


class SavesAfterTheAgent(agents.SandboxHook):
    """An ``on_destroy`` that needs one process (as every step does)."""

    def __init__(self) -> None:
        self.results: list[agents.SandboxExecutionResult] = []

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        self.results.append(await ctx.sandbox.execute("echo ok"))


@pytest.mark.anyio
async def test_processes_holding_every_pid_are_killed_before_on_destroy(
    docker_on_every_image,
) -> None:
    """The agent's loop (kept past its turn) holds every pid the container
    may have, so no process can start, the killer's own included: it gets
    a little room above the limit for that moment, and the hook's step then
    runs.  Without the kill, the step could not start (exit 126).

    Commands time out at 5 s, not the default 30: the agent's second command
    (``sleep 2``) cannot start once its loop holds the pids, and its answer
    is waited for that long plus the exec channel's grace (45 s in all on
    busybox, where the shell helper cannot fork; the channel is lost either
    way)."""
    hook = SavesAfterTheAgent()
    fill = "(while :; do sleep 1000 & done) >/dev/null 2>&1 &"
    replies = [
        assistant(None, ("c1", "bash", {"command": fill})),
        assistant(None, ("c2", "bash", {"command": "sleep 2"})),
        assistant("done"),
    ]
    with ChatServer(replies) as server:
        model = agents.ChatCompletionsModel(
            "test-model", base_url=server.url, api_key="sk-test", backoff_seconds=0.01
        )
        env = docker_on_every_image.environment(
            hooks=[hook], pids_limit=32, default_exec_timeout_seconds=5
        )
        agent = agents.Agent(model=model, environment=env, keep_background_processes=True)
        async with await agent.start_session() as session:
            await session.run("go")
            # A subshell needs a new process in every shell (busybox runs
            # `true` itself, without one, when its helper is a shell).
            for _ in range(50):  # until the agent's loops hold them all
                full = await session.sandbox.execute("( : ) && echo forked")
                if "forked" not in full.stdout:
                    break
                # busybox's loop can end when a fork fails: the agent starts another
                await session.sandbox.execute(fill)
                await anyio.sleep(0.2)
            assert "forked" not in full.stdout, "the pids were not all taken"
    assert session.destroy_failures == []
    (result,) = hook.results
    assert (result.exit_code, result.stdout) == (0, "ok\n"), result


#: The agent's planting: a git ``diff.external`` and a Python user
#: site-packages ``.pth`` in its HOME, each of which would run its code in
#: whatever later runs git or python3 as the sandbox user with that HOME.
PLANT = (
    "printf '#!/bin/sh\\ntouch /workspace/pwned-git\\n' > $HOME/d.sh; chmod +x $HOME/d.sh;"
    " printf '[diff]\\n\\texternal = %s/d.sh\\n' $HOME > $HOME/.gitconfig;"
    " for v in 3 3.9 3.10 3.11 3.12 3.13; do mkdir -p $HOME/.local/lib/python$v/site-packages;"
    " echo \"import os; open('/workspace/pwned-py', 'w')\""
    " > $HOME/.local/lib/python$v/site-packages/x.pth; done; touch $HOME/planted"
)
#: The hook: what the review's hooks do to carry results out (a diff, a
#: Python script), then what it found.
CARRY = (
    'echo "$HOME" > home.txt; ls -A "$HOME" >> home.txt;'
    " if command -v git >/dev/null; then printf 1 > a; printf 2 > b;"
    " git diff --no-index a b > /dev/null; fi;"
    " if command -v python3 >/dev/null; then python3 -c pass; fi;"
    " ls pwned-* > evidence.txt 2>/dev/null; true"
)


@pytest.mark.docker
def test_a_hook_runs_nothing_the_agent_planted_in_its_home(tmp_path, docker_on_every_image) -> None:
    """Issue 26: the agent's HOME is the agent's.  Its bash tool plants a
    ``.gitconfig`` whose external diff, and a ``.pth`` that Python's user
    site runs; an ``on_destroy`` step then runs ``git diff`` and ``python3``
    as hooks do.  The step gets a new, empty HOME (``fresh_home``), so
    neither runs; a step's own ``env: {HOME: ...}`` still wins.  Without the
    new HOME, the evidence held pwned-git (full image) and pwned-py (full
    and python3-minimal)."""
    backend = docker_on_every_image
    replies = [assistant(None, ("c1", "bash", {"command": PLANT})), assistant("done")]
    with ChatServer(replies) as server:
        config = tmp_path / "agent.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                agent:
                  model: m
                  base_url: {server.url}
                  environment:
                    sandbox: docker
                    hooks:
                      - name: carry
                        on_destroy:
                          - run: {CARRY!r}
                          - run: echo "$HOME" > chosen.txt
                            env: {{HOME: /home/sandbox}}
                          - save: home.txt
                            to: home.txt
                          - save: evidence.txt
                            to: evidence.txt
                          - save: chosen.txt
                            to: chosen.txt
                """
            )
        )
        result = subprocess.run(
            [*RUNNER_CLI, "run", str(config), "--prompt", "go", "--output-dir", "out"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "TMPDIR": str(tmp_path), "RUNNER_DOCKER_IMAGE": backend.image},
            timeout=180,
        )
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    home, *listing = (out / "home.txt").read_text().split()
    assert home.startswith("/tmp/runner-hooks-home."), home
    assert listing == [], f"the hooks' HOME is not empty: {listing}"
    assert (out / "evidence.txt").read_text() == "", "a hook ran the agent's planted code"
    assert (out / "chosen.txt").read_text() == "/home/sandbox\n"
