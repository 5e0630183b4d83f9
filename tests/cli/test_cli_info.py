"""``runner info FILE``: everything a file needs, checked on this machine, with a verdict.

A CI job runs it before ``runner run`` to see what is missing: exit 0 when
ready, 2 when something required is not here.  Every test runs the real
command in a subprocess on real files; secret values must never show.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import RUNNER_CLI, TEST_IMAGE

from runner.sandboxes.docker.engine import LABEL_OWNER_PID

SECRET_VALUE = "tok-5f1e9a-never-print-me"
FILE_SECRET_VALUE = "-----BEGIN deploy key 7c3d-----"

#: Variables the tests set or unset themselves, whatever the caller's shell has.
CONTROLLED = ("INFO_TEST_TOKEN", "INFO_TEST_OPTIONAL", "MISTRAL_API_KEY", "KOYEB_API_TOKEN")

INPUTS_AND_SECRETS = """\
    version: 1
    inputs:
      acme.repository:
        as: repo
        description: The repository this session works on.
        schema:
          type: object
          properties:
            repository: {type: string, description: owner/name}
            revision: {type: string, default: main}
          required: [repository]
      acme.options:
        as: options
        required: false
        schema:
          type: object
          properties:
            level: {enum: [low, high], default: low}
      acme.login:
        as: login
        secret: true
        schema:
          type: object
          properties:
            password: {type: string, default: hunter2-default}
    secrets:
      API_TOKEN:
        from_env: INFO_TEST_TOKEN
      DEPLOY_KEY:
        from_file: keys/deploy
      EXTRA:
        from_env: INFO_TEST_OPTIONAL
        required: false
    agent:
      name: info-agent
      model: mistral-large-4
      environment:
        sandbox: local
        hooks:
          - name: use-secrets
            on_create:
              - run: test -n "$TOKEN"
                secrets: {TOKEN: API_TOKEN}
              - secret_file: .deploy
                secret: DEPLOY_KEY
    """


def info(file: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``runner info FILE`` with exactly the controlled variables given in ``env``.
    The result's ``args`` ends with the process id (for its containers' label)."""
    base = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    args = [*RUNNER_CLI, "info", str(file)]
    with subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**base, **env},
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    return subprocess.CompletedProcess([*args, process.pid], process.returncode, stdout, stderr)


def write(folder: Path, text: str, name: str = "agent.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def docker_file(folder: Path, image: str, *settings: str) -> Path:
    """A docker file using ``image``, with more ``key: value`` environment settings."""
    environment = "".join(
        f"    {line}\n" for line in ("sandbox: docker", f"image: {image}", *settings)
    )
    return write(folder, f"version: 1\nagent:\n  model: m\n  environment:\n{environment}")


@pytest.fixture
def secrets_file(tmp_path: Path) -> Path:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "deploy").write_text(FILE_SECRET_VALUE + "\n")
    return write(tmp_path, INPUTS_AND_SECRETS)


def test_every_input_is_listed_with_its_name_need_schema_and_secrecy(secrets_file) -> None:
    result = info(secrets_file, INFO_TEST_TOKEN=SECRET_VALUE)
    lines = result.stdout.splitlines()
    assert "  input acme.repository (as repo): required" in lines
    assert "    The repository this session works on." in lines
    assert "    repository: string, required - owner/name" in lines
    assert '    revision: string, default "main"' in lines
    assert "  input acme.options (as options): optional" in lines
    assert '    level: one of "low", "high", default "low"' in lines
    assert "  input acme.login (as login): required, secret" in lines
    # A secret input's default may be the value itself: only its existence shows.
    assert "    password: string, has a default" in lines
    assert "hunter2-default" not in result.stdout + result.stderr


def test_with_the_secret_set_the_file_is_ready_and_no_value_shows(secrets_file) -> None:
    result = info(secrets_file, INFO_TEST_TOKEN=SECRET_VALUE)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lines = result.stdout.splitlines()
    assert "  secret API_TOKEN (required): from_env: INFO_TEST_TOKEN, set" in lines
    assert "  secret DEPLOY_KEY (required): from_file: keys/deploy, exists" in lines
    assert "  secret EXTRA (optional): from_env: INFO_TEST_OPTIONAL, not set" in lines
    assert SECRET_VALUE not in output
    assert FILE_SECRET_VALUE not in output
    assert lines[-1].startswith(f"ready: {secrets_file} can run here")
    assert "give acme.repository, acme.login with --input or --inputs" in lines[-1]


def test_a_required_secret_not_set_is_named_and_exits_2(secrets_file) -> None:
    result = info(secrets_file)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "  secret API_TOKEN (required): from_env: INFO_TEST_TOKEN, not set" in result.stdout
    assert "ready:" not in result.stdout
    assert result.stderr.strip() == (
        f"runner: not ready: {secrets_file} needs secret API_TOKEN (INFO_TEST_TOKEN is not set)"
    )


def test_an_empty_variable_counts_as_not_set_as_the_run_reads_it(secrets_file) -> None:
    result = info(secrets_file, INFO_TEST_TOKEN="")
    assert result.returncode == 2
    assert "(INFO_TEST_TOKEN is not set)" in result.stderr


def test_a_missing_secret_file_is_named_and_exits_2(secrets_file, tmp_path) -> None:
    (tmp_path / "keys" / "deploy").unlink()
    result = info(secrets_file, INFO_TEST_TOKEN=SECRET_VALUE)
    assert result.returncode == 2
    assert "  secret DEPLOY_KEY (required): from_file: keys/deploy, missing" in result.stdout
    assert "needs secret DEPLOY_KEY (keys/deploy: missing)" in result.stderr
    assert SECRET_VALUE not in result.stdout + result.stderr


def test_a_secret_file_reached_through_a_symlink_outside_is_refused(secrets_file, tmp_path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "deploy").write_text(FILE_SECRET_VALUE)
    (tmp_path / "keys" / "deploy").unlink()
    (tmp_path / "keys" / "deploy").symlink_to(outside / "deploy")
    result = info(secrets_file, INFO_TEST_TOKEN=SECRET_VALUE)
    assert result.returncode == 2
    assert "from_file: keys/deploy, refused (" in result.stdout
    assert "through a symlink" in result.stdout
    assert FILE_SECRET_VALUE not in result.stdout + result.stderr


def test_a_local_file_with_nothing_to_provide_is_ready(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: mistral-large-4
          environment: {sandbox: local}
        """,
    )
    result = info(path, MISTRAL_API_KEY="sk-live-key-9d2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  inputs: none" in lines
    assert "  secrets: none" in lines
    assert "  sandbox local: commands run on this machine, no isolation" in lines
    assert "    extras: none needed" in lines
    assert (
        "  model mistral-large-4 on the Mistral API: MISTRAL_API_KEY set (needed by --prompt)"
        in lines
    )
    assert lines[-1] == f"ready: {path} can run here"
    assert "sk-live-key-9d2" not in result.stdout + result.stderr


def test_without_a_model_key_the_lifecycle_is_ready_and_the_prompt_need_is_named(
    tmp_path,
) -> None:
    path = write(tmp_path, "version: 1\nagent: {model: m, environment: {sandbox: local}}\n")
    result = info(path)
    assert result.returncode == 0, result.stderr
    assert "MISTRAL_API_KEY not set (needed by --prompt)" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        f"ready: {path} can run here (a --prompt needs MISTRAL_API_KEY, which is not set)"
    )


def test_an_openai_compatible_model_names_its_optional_key_and_hides_url_credentials(
    tmp_path,
) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: llama
          base_url: http://user:pa55word@127.0.0.1:9/v1
          environment: {sandbox: none}
        """,
    )
    result = info(path, OPENAI_API_KEY="sk-openai-31f")
    assert result.returncode == 0, result.stderr
    assert (
        "  model llama at http://***@127.0.0.1:9/v1: OPENAI_API_KEY set (optional; sent if set)"
        in result.stdout.splitlines()
    )
    assert "  sandbox none: no sandbox; hooks never run" in result.stdout.splitlines()
    output = result.stdout + result.stderr
    assert "pa55word" not in output
    assert "sk-openai-31f" not in output


def test_a_docker_file_without_an_engine_is_not_ready(tmp_path) -> None:
    path = docker_file(tmp_path, TEST_IMAGE)
    result = info(path, DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert result.returncode == 2
    assert "  sandbox docker: engine not reachable" in result.stdout
    assert f"    image {TEST_IMAGE}: unknown (Docker not reachable)" in result.stdout
    assert "needs Docker, which is not reachable here" in result.stderr


@pytest.mark.docker
def test_a_docker_file_whose_image_is_present_is_ready(tmp_path, docker_client) -> None:
    path = docker_file(tmp_path, TEST_IMAGE, "user: root", "read_only_root: true")
    result = info(path, MISTRAL_API_KEY="k")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  sandbox docker: engine reachable" in lines
    assert f"    image {TEST_IMAGE}: present" in lines
    assert "    user: root, read_only_root: true" in lines
    assert "    extras: none needed (the docker package is a dependency)" in lines
    assert (
        "    exec channel: the Python helper (the image has python3 (full or "
        "python3-minimal): the Python helper is the faster)" in lines
    )
    assert lines[-1] == f"ready: {path} can run here"


@pytest.mark.docker
def test_the_exec_channel_each_image_gets_is_named(tmp_path, docker_client, image) -> None:
    """Found by starting the helper in a throwaway container, which is gone after."""
    kind, tag = image
    path = docker_file(tmp_path, tag)
    result = info(path, MISTRAL_API_KEY="k")
    assert result.returncode == 0, result.stderr
    channel = [line for line in result.stdout.splitlines() if "exec channel:" in line]
    expected = "the shell helper" if kind == "busybox" else "the Python helper"
    assert len(channel) == 1 and channel[0].startswith(f"    exec channel: {expected} ("), channel
    # Its own containers (labelled with its pid): other test processes may
    # run containers meanwhile (pytest -n).
    pid = result.args[-1]
    left = docker_client.containers.list(all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"})
    assert left == []


@pytest.mark.docker
def test_an_image_where_neither_helper_can_start_is_named_per_command(
    tmp_path, docker_client
) -> None:
    """No python3, and neither setpriv nor nsenter to become the sandbox user:
    ``runner info`` says commands go one docker exec each, and why."""
    tag = f"sandbox-runner-test:no-helper-{os.getpid()}"
    container = docker_client.containers.run(
        TEST_IMAGE,
        ["sh", "-c", "rm -f /usr/bin/python3* /usr/bin/setpriv /usr/bin/nsenter"],
        detach=True,
    )
    try:
        assert container.wait()["StatusCode"] == 0
        container.commit(*tag.split(":"))
    finally:
        container.remove(force=True)
    try:
        result = info(docker_file(tmp_path, tag), MISTRAL_API_KEY="k")
    finally:
        docker_client.images.remove(tag, force=True)
    assert result.returncode == 0, result.stderr
    (channel,) = [line for line in result.stdout.splitlines() if "exec channel:" in line]
    assert channel.startswith("    exec channel: one docker exec per command ("), channel
    assert "neither setpriv nor nsenter" in channel


@pytest.mark.docker
def test_a_docker_file_whose_image_is_missing_says_the_run_will_pull_it(
    tmp_path, docker_client
) -> None:
    image = "sandbox-runner-no-such-image:never"
    path = docker_file(tmp_path, image)
    result = info(path, MISTRAL_API_KEY="k")
    # Missing is not fatal: `runner run` pulls it, which works where there is a registry.
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"    image {image}: missing" in lines
    assert "    user: sandbox, read_only_root: false" in lines
    assert lines[-1] == (
        f"ready: {path} can run here (image {image} is not here; a run tries to pull it)"
    )


def test_a_mistral_file_names_its_extra_and_its_missing_token(tmp_path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        agent:
          model: m
          environment: {sandbox: mistral, image: "python:3.12"}
        """,
    )
    result = info(path, MISTRAL_API_KEY="k")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert "  sandbox mistral: region nl-north-1, image python:3.12 (pulled by the cloud)" in lines
    assert "    extra koyeb: installed" in lines  # the test extra brings koyeb-sdk
    assert "    KOYEB_API_TOKEN: not set" in lines
    assert (
        result.stderr.strip()
        == f"runner: not ready: {path} needs KOYEB_API_TOKEN, which is not set"
    )
    ready = info(path, MISTRAL_API_KEY="k", KOYEB_API_TOKEN="kt-secret-77")
    assert ready.returncode == 0, ready.stderr
    assert "    KOYEB_API_TOKEN: set" in ready.stdout.splitlines()
    assert "kt-secret-77" not in ready.stdout + ready.stderr


def test_terminal_controls_in_a_description_are_shown_escaped(tmp_path) -> None:
    path = write(
        tmp_path,
        'version: 1\ninputs:\n  a.b:\n    description: "x\\u001b[2Jy"\n'
        "    schema: {type: object}\nagent: {model: m}\n",
    )
    result = info(path)
    assert "\x1b" not in result.stdout
    assert "  input a.b: required" in result.stdout
