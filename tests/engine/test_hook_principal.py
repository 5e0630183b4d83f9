"""Issue 26, "What to build" 1: hooks and the agent are two principals.

On Docker, hook commands run as one uid (``HOOK_UID``) and the agent's tools
as another (``SANDBOX_UID``); the workspace is handed between them by root
(``sandboxes/docker/owners.py``).  Each test plays the agent through the
fake model server (``chat_server``): its bash tool attacks what a hook left
running during its turn, on the full, python3-minimal and busybox images.
On main, where both ran as uid 1000, the agent read the service's secret,
killed it, traced it and wrote its HOME.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from chat_server import ChatServer, assistant

import runner as agents
from runner.sandboxes.docker.owners import HOOK_UID, SANDBOX_UID

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SECRET = "s3cr3t-Service-0815"


class StartsAService(agents.SandboxHook):
    """An ``on_create`` that starts a service for the session with a secret
    in its environment (a database password, a token), and gives it a HOME
    of its own, as docs/python-api.md advises."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        result = await ctx.sandbox.execute(
            "mkdir -m 700 /tmp/service-home && echo '[user]' > /tmp/service-home/.gitconfig || "
            f"exit 1; HOME=/tmp/service-home sh -c ': {self.marker}; sleep 1000; :' "
            ">/dev/null 2>&1 &",
            env={"SERVICE_SECRET": SECRET},
        )
        assert result.exit_code == 0, result.stderr


def find_service(marker: str) -> str:
    """Shell that sets ``pid`` to the service's pid.  The marker is put
    together at run time: written whole, the agent's own command line would
    carry it and match first."""
    head, tail = marker[:8], marker[8:]
    return (
        f"m={head}; m=${{m}}{tail}; pid=; for d in /proc/[0-9]*; do"
        ' case "$(tr "\\0" " " < $d/cmdline 2>/dev/null)" in *"$m"*) pid=${d#/proc/};; esac;'
        " done; [ -n \"$pid\" ] || { echo 'no service' >&2; exit 3; }"
    )


async def agent_runs(backend, hooks: Sequence[agents.SandboxHook], command: str, check) -> None:
    """A session whose agent's bash tool runs ``command`` in its one turn;
    then ``check(sandbox, tool_output)`` while the sandbox lives."""
    replies = [assistant(None, ("c1", "bash", {"command": command})), assistant("done")]
    with ChatServer(replies) as server:
        model = agents.ChatCompletionsModel(
            "test-model", base_url=server.url, api_key="sk-test", backoff_seconds=0.01
        )
        env = backend.environment(hooks=list(hooks))
        agent = agents.Agent(model=model, environment=env)
        async with await agent.start_session() as session:
            result = await session.run("go")
            assert isinstance(result, agents.Completed), result
            (call,) = result.tool_calls
            await check(session.sandbox, call.output)


async def service_lives(sandbox, marker: str) -> bool:
    """Whether the hook's service runs (looked at as root: the agent's
    ``kill -9 -1`` may have taken its own command starter with it)."""
    found = await sandbox.execute_as_root(
        "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done"
    )
    return f": {marker};" in found.stdout


async def test_the_agent_cannot_read_a_hooks_service_environment(docker_on_every_image) -> None:
    """The agent's tool reads every ``/proc/*/environ`` it can, the
    service's by pid too: no secret (on main: ``SERVICE_SECRET=...``)."""
    marker = f"hook-service-{uuid.uuid4().hex}"
    attack = (
        f"{find_service(marker)}; echo uid=$(id -u);"
        " cat /proc/$pid/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep SECRET; true"
    )

    async def check(sandbox, output: str) -> None:
        assert f"uid={SANDBOX_UID}" in output, output
        assert SECRET not in output, "the agent read the hook's service's environment"
        assert await service_lives(sandbox, marker)

    await agent_runs(docker_on_every_image, [StartsAService(marker)], attack, check)


async def test_the_agent_cannot_kill_a_hooks_service(docker_on_every_image) -> None:
    """``kill -9`` of the service (and ``kill -9 -1``, everything the
    agent may signal) leaves it running (on main: it was killed)."""
    marker = f"hook-service-{uuid.uuid4().hex}"
    attack = (
        f"{find_service(marker)}; kill -9 $pid && echo killed-it;"
        " (kill -9 -1 2>/dev/null &); sleep 1; true"
    )

    async def check(sandbox, output: str) -> None:
        assert "killed-it" not in output, output
        assert await service_lives(sandbox, marker), "the agent killed the hook's service"

    await agent_runs(docker_on_every_image, [StartsAService(marker)], attack, check)


@pytest.mark.parametrize("docker_on_every_image", ["docker:full"], indirect=True)
async def test_the_agent_cannot_trace_a_hooks_service(docker_on_every_image) -> None:
    """PTRACE_ATTACH to the service fails (on main it succeeded: same uid,
    and Docker's seccomp profile allows ptrace).  Full image only: the
    attack needs python3 with ctypes, which python3-minimal and busybox
    lack (and they have no other tracer)."""
    marker = f"hook-service-{uuid.uuid4().hex}"
    attack = (
        f"{find_service(marker)}; python3 -c '"
        "import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.ptrace(16, int(sys.argv[1]), 0, 0); "
        'print("attach", r, os.strerror(ctypes.get_errno()))'
        "' $pid"
    )

    async def check(sandbox, output: str) -> None:
        assert "attach -1 Operation not permitted" in output, output
        assert await service_lives(sandbox, marker)

    await agent_runs(docker_on_every_image, [StartsAService(marker)], attack, check)


async def test_the_agent_cannot_write_a_hooks_home(docker_on_every_image) -> None:
    """The HOME the hook made for its service (a ``.gitconfig`` there
    would run the agent's code in the service's git) takes no file from
    the agent, and its dotfile cannot be replaced (on main: both done)."""
    marker = f"hook-service-{uuid.uuid4().hex}"
    attack = (
        "echo planted > /tmp/service-home/.profile && echo wrote-home;"
        " printf '[core]\\n\\tpager = touch /tmp/pwned\\n' > /tmp/service-home/.gitconfig"
        " && echo wrote-gitconfig;"
        " mv /tmp/service-home /tmp/moved 2>/dev/null && echo moved-home; true"
    )

    async def check(sandbox, output: str) -> None:
        for done in ("wrote-home", "wrote-gitconfig", "moved-home"):
            assert done not in output, output
        kept = await sandbox.execute_as_root(
            "cat /tmp/service-home/.gitconfig; stat -c '%u %a' /tmp/service-home"
        )
        assert kept.stdout == f"[user]\n{HOOK_UID} 700\n", kept

    await agent_runs(docker_on_every_image, [StartsAService(marker)], attack, check)


class SeedsAndCarries(agents.SandboxHook):
    """``on_create`` seeds a file and a directory; ``on_destroy`` reads and
    changes what the agent wrote, as a hook that carries results out does."""

    def __init__(self) -> None:
        self.found: list[agents.SandboxExecutionResult] = []
        self.read: bytes = b""

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        await ctx.sandbox.write_file("seeded/notes.txt", "from the hook\n")
        made = await ctx.sandbox.execute("id -u; stat -c %u /workspace seeded/notes.txt")
        self.found.append(made)

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        self.read = await ctx.sandbox.read_file("private/result")
        self.found.append(
            await ctx.sandbox.execute(
                "id -u; echo more >> private/result && cat private/result;"
                " stat -c %u /workspace seeded/notes.txt link /tmp/agent-only;"
                ' stat -c "%u %a" "$HOME"'
            )
        )


async def test_the_workspace_is_handed_between_hooks_and_agent(docker_on_every_image) -> None:
    """During ``on_create`` the workspace is the hooks'; the agent may then
    change what they seeded; in ``on_destroy`` the hooks own what the agent
    wrote, a private file in a private directory included, while a link
    the agent left is changed itself, not what it points to; their new
    HOME is theirs, mode 700."""
    hook = SeedsAndCarries()
    attack = (
        "echo agent >> seeded/notes.txt && mkdir private && echo out > private/result &&"
        " chmod 600 private/result && chmod 700 private && echo mine > /tmp/agent-only &&"
        " ln -s /tmp/agent-only link && echo ok"
    )

    async def check(sandbox, output: str) -> None:
        assert output.strip().endswith("ok"), output

    await agent_runs(docker_on_every_image, [hook], attack, check)
    created, destroyed = hook.found
    assert created.stdout.split() == [str(HOOK_UID)] * 3, created
    assert hook.read == b"out\n"
    assert destroyed.stdout.split() == [
        str(HOOK_UID),
        "out",
        "more",
        *[str(HOOK_UID)] * 3,
        str(SANDBOX_UID),  # the link's target: not followed
        str(HOOK_UID),  # the on_destroy HOME
        "700",
    ], destroyed


class ListsProcesses(StartsAService):
    """The service of ``StartsAService``; ``on_destroy`` lists what runs."""

    def __init__(self, marker: str) -> None:
        super().__init__(marker)
        self.running = ""

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        found = await ctx.sandbox.execute(
            "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done"
        )
        self.running = found.stdout


async def test_a_hooks_service_is_ended_before_on_destroy(docker_on_every_image) -> None:
    """The hook's service lives through the turn (the agent cannot end it),
    and is killed before ``on_destroy``, after the agent's processes: it may
    have run what the agent wrote (a dev server, a test watcher), and as
    the hooks' uid that could read an ``on_destroy`` step's secrets.  With
    only the agent's uid killed, the service was still running."""
    marker = f"hook-service-{uuid.uuid4().hex}"
    hook = ListsProcesses(marker)

    async def check(sandbox, output: str) -> None:
        assert await service_lives(sandbox, marker)

    await agent_runs(docker_on_every_image, [hook], "true", check)
    assert "/proc" in hook.running, "on_destroy listed nothing"
    assert f": {marker};" not in hook.running, "the hook's service ran beside on_destroy"
