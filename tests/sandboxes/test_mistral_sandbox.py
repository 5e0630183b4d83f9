"""MistralSandbox through the real koyeb-sdk, against a local stand-in of the cloud.

tests/support/koyeb_server.py speaks the control-plane and executor HTTP API on
127.0.0.1 and backs each cloud sandbox with a real container, so the SDK,
our backend and the lifecycle run for real; only the cloud is simulated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import httpx
import pytest
from conftest import TEST_IMAGE
from koyeb_server import FakeCloud, containers_left_by, point_sdk_at, sdk

import runner as agents
from runner.config import validate_file

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def cloud(docker_client, monkeypatch):
    with FakeCloud(docker_client, TEST_IMAGE) as fake:
        point_sdk_at(monkeypatch, fake)
        yield fake
    assert containers_left_by(fake, docker_client) == []


def sandbox(**options) -> agents.MistralSandbox:
    options.setdefault("readiness_timeout_seconds", 10)
    return agents.MistralSandbox(**options)


class Journal(agents.SandboxHook):
    def __init__(self, log: list) -> None:
        self.log = log

    async def on_create(self, ctx) -> None:
        await ctx.sandbox.write_file("notes/NOTES.md", "Run the tests with pytest.\n")
        self.log.append("on_create")

    async def on_destroy(self, ctx) -> None:
        self.log.append((await ctx.sandbox.read_file("notes/NOTES.md")).decode())


@pytest.mark.docker
async def test_a_session_creates_uses_and_deletes_one_cloud_sandbox(cloud) -> None:
    log: list = []
    env = sandbox(instance_type="large", ttl_seconds=7200, hooks=[Journal(log)])
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        result = await box.execute("echo out; echo err >&2; pwd; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n/workspace\n", "err\n")
        timed = await box.execute("sleep 30", timeout_seconds=1)
        assert (timed.exit_code, timed.timed_out) == (124, True)
        payload = bytes(range(256)) * 64
        await box.write_file("bin/data.bin", payload)
        assert await box.read_file("bin/data.bin") == payload
        with pytest.raises(FileNotFoundError):
            await box.read_file("missing.txt")
        with pytest.raises(IsADirectoryError):
            await box.read_file("bin")
        assert len(cloud.containers) == 1
    assert log == ["on_create", "Run the tests with pytest.\n"]
    (service,) = cloud.calls("POST", "/v1/services")
    definition = service["body"]["definition"]
    assert definition["instance_types"] == [{"type": "large"}]
    assert definition["regions"] == ["nl-north-1"]
    assert service["body"]["life_cycle"]["delete_after_create"] == 7200
    assert json.dumps(definition).count("DENY_ALL") == 1
    assert definition["scalings"][0]["min"] == 1  # idle_timeout 0: never sleeps
    assert service["headers"]["authorization"] == "Bearer koyeb-test-token"
    assert [c["path"] for c in cloud.calls("DELETE")] == [f"/v1/apps/{service['body']['app_id']}"]
    assert cloud.containers == {}


@pytest.mark.docker
async def test_network_all_in_another_region_sends_no_block(cloud) -> None:
    env = sandbox(region="fra", network=agents.Network.all())
    async with await agents.Agent(model="m", environment=env).start_session():
        pass
    definition = cloud.calls("POST", "/v1/services")[0]["body"]["definition"]
    assert definition["regions"] == ["fra"]
    assert "DENY_ALL" not in json.dumps(definition)


@pytest.mark.docker
async def test_a_failed_readiness_wait_deletes_the_sandbox(cloud) -> None:
    cloud.deployment_status = "ERROR"
    with pytest.raises(agents.SandboxUnavailableError, match="could not be created"):
        await agents.Agent(model="m", environment=sandbox()).start_session()
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1
    assert cloud.containers == {}


@pytest.mark.docker
async def test_a_readiness_timeout_deletes_the_sandbox(cloud) -> None:
    cloud.deployment_status = "STARTING"
    env = sandbox(readiness_timeout_seconds=1)
    with pytest.raises(agents.SandboxUnavailableError, match="SandboxTimeoutError"):
        await agents.Agent(model="m", environment=env).start_session()
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1
    assert cloud.containers == {}


@pytest.mark.docker
async def test_a_control_plane_error_leaves_nothing(cloud) -> None:
    cloud.fail_service_create = True
    with pytest.raises(agents.SandboxUnavailableError):
        await agents.Agent(model="m", environment=sandbox()).start_session()
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1
    assert cloud.containers == {}


@pytest.mark.docker
async def test_a_failing_setup_script_deletes_the_sandbox(cloud) -> None:
    env = sandbox(setup_script="echo no >&2; exit 9", hooks=[Journal([])])
    with pytest.raises(agents.SandboxSetupError, match="setup_script exited 9 in nl-north-1: no"):
        await agents.Agent(model="m", environment=env).start_session()
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1
    assert cloud.containers == {}


@pytest.mark.docker
async def test_a_failing_hook_deletes_the_sandbox(cloud) -> None:
    class Breaks(agents.SandboxHook):
        async def on_create(self, ctx) -> None:
            raise RuntimeError("hook broke")

    with pytest.raises(RuntimeError, match="hook broke"):
        await agents.Agent(model="m", environment=sandbox(hooks=[Breaks()])).start_session()
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1
    assert cloud.containers == {}


@pytest.mark.docker
async def test_no_token_is_a_clear_error_before_any_request(monkeypatch, docker_client) -> None:
    with FakeCloud(docker_client, TEST_IMAGE) as fake:
        point_sdk_at(monkeypatch, fake)
        monkeypatch.delenv("KOYEB_API_TOKEN")
        with pytest.raises(agents.SandboxUnavailableError, match="KOYEB_API_TOKEN"):
            await agents.Agent(model="m", environment=sandbox()).start_session()
        assert fake.requests == []


@pytest.mark.parametrize("network", [agents.Network.none(), agents.Network.allow(["10.0.0.0/8"])])
def test_only_nl_north_1_can_block_traffic(network) -> None:
    with pytest.raises(ValueError, match="only nl-north-1 can block traffic"):
        agents.MistralSandbox(region="fra", network=network)


def test_allow_takes_addresses_not_host_names() -> None:
    with pytest.raises(ValueError, match="IP addresses or CIDR ranges"):
        agents.MistralSandbox(network=agents.Network.allow(["packages.example.com"]))


def test_validate_reports_the_region_rule(tmp_path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: mistral\n    region: fra\n"
    )
    (problem,) = validate_file(path)
    assert problem.line == 6 and problem.column == 13
    assert "only nl-north-1 can block traffic" in problem.message


def test_yaml_maps_every_option(tmp_path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              model: m
              environment:
                sandbox: mistral
                image: acme/agent:1
                instance_type: small
                idle_timeout_seconds: 300
                ttl_seconds: 3600
                readiness_timeout_seconds: 60
                network: {allow: [192.0.2.0/24]}
                setup_script: make deps
                setup_script_timeout_seconds: 30
            """
        )
    )
    env = agents.load(path).environment
    assert isinstance(env, agents.MistralSandbox)
    options = env.create_options(session_id="sess_x", expires_at=None)
    assert (options["image"], options["instance_type"], options["region"]) == (
        "acme/agent:1",
        "small",
        "nl-north-1",
    )
    assert (options["idle_timeout"], options["delete_after_delay"], options["timeout"]) == (
        300,
        3600,
        60,
    )
    assert options["outbound_allowlist"] == ["192.0.2.0/24"]
    assert (env.setup_script, env.setup_script_timeout_seconds) == ("make deps", 30)


BLOCK_KOYEB = (
    "import sys; sys.modules['koyeb'] = None\n"
    "import importlib.util\n"
    "_find = importlib.util.find_spec\n"
    "importlib.util.find_spec = lambda name, *a: None if name.split('.')[0] == 'koyeb' "
    "else _find(name, *a)\n"
)


def run_without_koyeb(*args: str, tmp_path) -> subprocess.CompletedProcess[str]:
    code = BLOCK_KOYEB + "from runner.cli.main import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KOYEB_API_TOKEN": "t", "TMPDIR": str(tmp_path)},
        timeout=60,
    )


MISTRAL_YAML = "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: mistral\n"


@pytest.mark.parametrize("command", ["run", "info"])
def test_without_the_extra_the_cli_names_it_and_exits_2(tmp_path, command) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(MISTRAL_YAML)
    result = run_without_koyeb(command, str(path), tmp_path=tmp_path)
    assert result.returncode == 2
    assert "pip install 'sandbox-runner[koyeb]'" in result.stderr
    assert "validate" not in result.stderr


def test_without_the_extra_start_session_raises_missing_extra(tmp_path) -> None:
    code = BLOCK_KOYEB + textwrap.dedent(
        """\
        import anyio, runner
        agent = runner.Agent(model="m", environment=runner.MistralSandbox())
        try:
            anyio.run(agent.start_session)
        except runner.MissingExtraError as exc:
            print("MissingExtraError:", exc, exc.extra)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == (
        "MissingExtraError: MistralSandbox needs the 'koyeb' extra: "
        "pip install 'sandbox-runner[koyeb]' koyeb"
    ), result.stderr


# --- the executor as it really behaves (tests/support/koyeb_server.py follows it) ---


@pytest.fixture
async def cloud_box(cloud):
    agent = agents.Agent(model="m", environment=sandbox(default_exec_timeout_seconds=20))
    async with await agent.start_session() as session:
        yield session.sandbox


@pytest.mark.docker
async def test_more_stderr_than_a_pipe_holds_does_not_block(cloud_box) -> None:
    script = "import sys; sys.stderr.write('e' * 300000); sys.stdout.write('o' * 300000)"
    result = await cloud_box.execute(f'python3 -c "{script}"; echo " end"; echo tail >&2')
    assert (result.exit_code, result.timed_out) == (0, False)
    assert result.stdout == "o" * 300000 + " end\n"
    assert result.stderr == "e" * 300000 + "tail\n"
    assert result.duration_seconds < 15


@pytest.mark.docker
async def test_a_missing_cwd_is_an_exit_code_not_an_sdk_error(cloud_box, cloud) -> None:
    result = await cloud_box.execute("pwd", cwd="no/such/dir")
    assert result.exit_code == 126
    assert result.stderr == "cannot change directory to no/such/dir: no such directory\n"
    await cloud_box.execute("mkdir -p sub/dir")
    assert (await cloud_box.execute("pwd", cwd="sub/dir")).stdout == "/workspace/sub/dir\n"
    # The executor itself would refuse a missing cwd: the sandbox never sends one.
    assert {r["body"].get("cwd") for r in cloud.calls("POST", "/exec/") if "cmd" in r["body"]} == {
        "/"
    }


@pytest.mark.docker
async def test_a_run_call_the_sdk_retries_runs_the_command_once(cloud_box, cloud) -> None:
    cloud.run_faults = [502]  # the answer is lost after the command ran; the SDK asks again
    result = await cloud_box.execute("echo ran >> count.txt; cat count.txt")
    assert (result.exit_code, result.stdout) == (0, "ran\n")
    assert (await cloud_box.read_file("count.txt")) == b"ran\n"
    runs = [r for r in cloud.calls("POST", "/exec/") if "echo ran" in json.dumps(r["body"])]
    assert len(runs) == 2  # two requests, one run


@pytest.mark.docker
async def test_sdk_errors_of_commands_and_files_are_sandbox_unavailable(cloud_box, cloud) -> None:
    cloud.run_faults = [503] * 4  # more than the SDK's three retries
    with pytest.raises(agents.SandboxUnavailableError, match="did not run the command"):
        await cloud_box.execute("true")
    cloud.expire(next(iter(cloud.containers)))  # the executor now answers 404
    with pytest.raises(agents.SandboxUnavailableError):
        await cloud_box.execute("true")
    with pytest.raises(agents.SandboxUnavailableError):
        await cloud_box.read_file("x.txt")
    with pytest.raises(agents.SandboxUnavailableError):
        await cloud_box.write_file("x.txt", "data")


@pytest.mark.docker
async def test_a_sandbox_the_platform_already_deleted_counts_as_deleted(cloud) -> None:
    agent = agents.Agent(model="m", environment=sandbox())
    session = await agent.start_session()
    cloud.expire(next(iter(cloud.containers)))  # its TTL passed
    await session.cancel()  # no error: it is gone, which is what close wants
    assert session.status == "terminated"
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1
    await session.sandbox.delete()  # and it is not asked again
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1


# --- the stand-in enforces the platform's rules (issue 16) ---


def control_plane(cloud, method: str, path: str, *, token: str | None = None, body=None):
    """A raw control-plane request, as a client other than the SDK could send it."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.request(method, cloud.url + path, headers=headers, json=body, timeout=10)


def executor(box, action: str, *, secret: str | None, body=None) -> httpx.Response:
    """A raw executor request to ``box``'s instance, with ``secret`` as its bearer."""
    url, routing_key = box.remote._sandbox_url
    headers = {"X-Routing-Key": routing_key}
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    return httpx.post(f"{url}/{action}", headers=headers, json=body, timeout=30)


def executor_secret(cloud) -> str:
    (service,) = cloud.calls("POST", "/v1/services")
    env = service["body"]["definition"]["env"]
    return next(e["value"] for e in env if e["key"] == "SANDBOX_SECRET")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/apps", {"name": "a", "colour": "teal"}, "colour"),
        (
            "/v1/apps",
            {"name": "a", "life_cycle": {"delete_when_empty": True, "x": 1}},
            "life_cycle.x",
        ),
        (
            "/v1/services",
            {"app_id": "app-1", "definition": {"regions": ["fra"], "cpu": 2}},
            "definition.cpu",
        ),
        (
            "/v1/services",
            {"app_id": "app-1", "definition": {"env": [{"key": "A", "valeu": "1"}]}},
            "definition.env.valeu",
        ),
    ],
)
@pytest.mark.docker
async def test_the_stand_in_refuses_unknown_fields_with_error_with_fields(
    docker_client, path, body, field
) -> None:
    with FakeCloud(docker_client, TEST_IMAGE) as cloud:
        reply = control_plane(cloud, "POST", path, token=cloud.token, body=body)
        assert cloud.containers == {}
    assert reply.status_code == 400
    error = sdk().ErrorWithFields.from_dict(reply.json())
    assert (error.status, [f.var_field for f in error.fields]) == (400, [field])


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/apps", {"name": 5}, "name"),
        ("/v1/services", {"app_id": "app-1", "definition": {"regions": "fra"}}, "regions"),
    ],
)
@pytest.mark.docker
async def test_the_stand_in_refuses_wrong_types(docker_client, path, body, field) -> None:
    with FakeCloud(docker_client, TEST_IMAGE) as cloud:
        reply = control_plane(cloud, "POST", path, token=cloud.token, body=body)
    assert reply.status_code == 400
    assert field in [f.var_field for f in sdk().ErrorWithFields.from_dict(reply.json()).fields]


@pytest.mark.docker
@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_the_control_plane_answers_401_without_the_right_token(docker_client, token) -> None:
    with FakeCloud(docker_client, TEST_IMAGE) as cloud:
        reply = control_plane(cloud, "POST", "/v1/apps", token=token, body={"name": "a"})
        assert cloud.apps == {}
    assert reply.status_code == 401
    assert sdk().Error.from_dict(reply.json()).status == 401


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/services/svc-404"),
        ("GET", "/v1/deployments/dep-404"),
        ("DELETE", "/v1/apps/app-404"),
    ],
)
@pytest.mark.docker
async def test_unknown_ids_are_404_in_the_error_shape(docker_client, method, path) -> None:
    with FakeCloud(docker_client, TEST_IMAGE) as cloud:
        reply = control_plane(cloud, method, path, token=cloud.token)
    assert reply.status_code == 404
    assert sdk().Error.from_dict(reply.json()).status == 404


@pytest.mark.docker
async def test_a_refused_token_is_one_clear_line_and_creates_nothing(cloud, monkeypatch) -> None:
    monkeypatch.setenv("KOYEB_API_TOKEN", "not-the-token")
    with pytest.raises(agents.SandboxUnavailableError) as caught:
        await agents.Agent(model="m", environment=sandbox()).start_session()
    assert str(caught.value) == (
        "the cloud sandbox API refused the token in KOYEB_API_TOKEN "
        "(UnauthorizedException: 401 Unauthorized: missing or invalid API token)"
    )
    assert [r["status"] for r in cloud.requests] == [401]
    assert cloud.containers == {}


@pytest.mark.docker
async def test_the_executor_wants_the_sandbox_secret(cloud_box, cloud) -> None:
    secret = executor_secret(cloud)
    assert executor(cloud_box, "run", secret=None, body={"cmd": "true"}).status_code == 401
    assert executor(cloud_box, "run", secret="guess", body={"cmd": "true"}).status_code == 401
    reply = executor(cloud_box, "run", secret=secret, body={"cmd": "echo in"})
    assert (reply.status_code, reply.json()["stdout"]) == (200, "in\n")
    await cloud_box.write_file("f.txt", "x")
    assert await cloud_box.read_file("f.txt") == b"x"
    statuses = [r["status"] for r in cloud.calls(prefix="/exec/")]
    assert statuses.count(401) == 2  # the two above: every SDK call carried the secret


@pytest.mark.docker
async def test_the_sandbox_env_reaches_every_command_and_a_command_env_wins(cloud) -> None:
    env = sandbox(env={"GREETING": "hello", "ONLY_HERE": "yes"})
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        assert (await box.execute('echo "$GREETING $ONLY_HERE"')).stdout == "hello yes\n"
        result = await box.execute('echo "$GREETING $ONLY_HERE"', env={"GREETING": "bye"})
        assert result.stdout == "bye yes\n"


@pytest.mark.docker
async def test_commands_do_not_see_the_executor_secret(cloud_box, cloud) -> None:
    secret = executor_secret(cloud)
    # The platform puts it in the instance's environment, so a raw command sees it...
    raw = executor(cloud_box, "run", secret=secret, body={"cmd": "echo $SANDBOX_SECRET"})
    assert raw.json()["stdout"] == f"{secret}\n"
    # ...and ours do not.
    result = await cloud_box.execute(
        'echo "${SANDBOX_SECRET:-unset}"; env | grep -c SANDBOX_SECRET'
    )
    assert result.stdout == "unset\n0\n"


def test_the_executor_secret_name_is_not_a_sandbox_env_name() -> None:
    with pytest.raises(ValueError, match="SANDBOX_SECRET is the platform's"):
        agents.MistralSandbox(env={"SANDBOX_SECRET": "mine"})


@pytest.mark.docker
async def test_the_executor_makes_no_parent_directories(cloud_box) -> None:
    from koyeb.sandbox.filesystem import SandboxFilesystemError

    with pytest.raises(SandboxFilesystemError, match="no such file or directory"):
        await cloud_box.remote.filesystem.write_file("/workspace/no/such/dir/f.txt", "x")


@pytest.mark.docker
async def test_write_file_makes_the_parent_directories(cloud_box) -> None:
    await cloud_box.write_file("a/b/c/notes.txt", "text\n")
    await cloud_box.write_file("d/e/blob.bin", b"\x00\xff" * 10)
    assert await cloud_box.read_file("a/b/c/notes.txt") == b"text\n"
    assert await cloud_box.read_file("d/e/blob.bin") == b"\x00\xff" * 10
    with pytest.raises(OSError, match="cannot write a/b in the sandbox"):
        await cloud_box.write_file("a/b", "a directory is there")


@pytest.mark.docker
async def test_creation_waits_through_the_pre_ready_states(cloud_box, cloud) -> None:
    (instance,) = cloud.instances.values()
    assert instance.statuses_served == ["PENDING", "PROVISIONING", "STARTING", "HEALTHY"]
    last_poll = max(i for i, r in enumerate(cloud.requests) if r["path"].startswith("/v1/deploy"))
    first_exec = min(i for i, r in enumerate(cloud.requests) if r["path"].startswith("/exec/"))
    assert first_exec > last_poll  # nothing reached the instance before it was HEALTHY
    assert all(r["status"] == 200 for r in cloud.calls(prefix="/exec/"))
