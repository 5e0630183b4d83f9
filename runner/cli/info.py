"""``runner info``: what this machine offers, and what a file needs from it.

Read-only and safe to run in CI before ``runner run``: secret and key
values are never printed, only whether they are set; text from the file is
echoed with terminal controls made visible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .. import __version__
from .common import compile_for_cli, fail


class NotReady(Exception):
    """The file cannot run here; the message says what is missing."""


def _is_set(variable: str) -> bool:
    """Whether ``variable`` has a value here (empty counts as unset, as secrets read it)."""
    import os

    return bool(os.environ.get(variable))


def _set_or_not(variable: str) -> str:
    return "set" if _is_set(variable) else "not set"


def _say(text: str) -> None:
    """Echo a line built from the file's text, with terminal controls made visible."""
    from ..core.progress import terminal_safe

    click.echo(terminal_safe(text))


def docker_engine() -> tuple[Any, str | None]:
    """The engine's client and None, or None and why it is not reachable."""
    from ..sandboxes.docker.environment import DockerClient

    try:
        engine = DockerClient()._connect()
        click.echo(f"docker: reachable (engine {engine.version().get('Version', '?')})")
    except Exception as exc:
        click.echo(f"docker: not reachable: {exc}")
        return None, str(exc)
    _say(f"  isolation: {engine_isolation(engine.info())}")
    return engine, None


def engine_isolation(info: dict[str, Any]) -> str:
    """What the engine adds beyond one shared kernel, from ``docker info``:
    user-namespace remapping or rootless mode, and its OCI runtimes."""
    options = " ".join(info.get("SecurityOptions") or [])
    if "name=rootless" in options:
        users = "rootless engine (container root is your uid)"
    elif "name=userns" in options:
        users = "user namespaces remapped (container root is an unprivileged host uid)"
    else:
        users = "no user-namespace remapping (container uids are host uids)"
    runtimes = sorted(info.get("Runtimes") or {})
    default = info.get("DefaultRuntime") or "runc"
    gvisor = "runsc" in runtimes
    return (
        f"{users}; runtimes {', '.join(runtimes) or '?'} (default {default}; "
        f"{'runtime: runsc available' if gvisor else 'no runsc (gVisor)'})"
    )


def _image_state(engine: Any, image: str) -> str:
    """present, missing, or unknown (no engine to ask)."""
    if engine is None:
        return "unknown (Docker not reachable)"
    from docker.errors import ImageNotFound

    try:
        engine.images.get(image)
    except ImageNotFound:
        return "missing"
    except Exception as exc:
        return f"unknown ({exc})"
    return "present"


def echo_default_image(engine: Any) -> None:
    import os

    from ..sandboxes.docker.environment import DEFAULT_IMAGE, IMAGE_VARIABLE

    image = os.environ.get(IMAGE_VARIABLE) or DEFAULT_IMAGE
    state = _image_state(engine, image)
    suffix = " (will be pulled on first use)" if state == "missing" else ""
    _say(f"image {image}: {state}{suffix}")


KOYEB_INSTALL = "pip install 'sandbox-runner[koyeb]'"


def echo_host_keys() -> None:
    from ..sandboxes.mistral import TOKEN_VARIABLE, koyeb_available

    installed = "installed" if koyeb_available() else f"not installed ({KOYEB_INSTALL})"
    click.echo(f"extra koyeb: {installed}")
    click.echo(f"MISTRAL_API_KEY: {_set_or_not('MISTRAL_API_KEY')}")
    click.echo(f"{TOKEN_VARIABLE}: {_set_or_not(TOKEN_VARIABLE)}")


class _Readiness:
    """What ``runner info FILE`` found: what stops a run, and what is worth knowing."""

    __slots__ = ("missing", "notes")

    def __init__(self) -> None:
        self.missing: list[str] = []
        self.notes: list[str] = []


def echo_file_needs(file: str, compiled: Any, engine: Any, docker_problem: str | None) -> None:
    """Everything FILE needs and whether this machine has it, then the verdict."""
    from ..config.yaml_loader import load_file

    # Secret sources and input descriptions are not kept by the compiled
    # agent; the document they come from has just been validated.
    data = load_file(file).data
    agent = compiled.agent
    click.echo("")
    _say(f"{file}: agent {agent.name!r}, sandbox {agent.environment.backend}")
    readiness = _Readiness()
    _echo_inputs(compiled.inputs, data.get("inputs") or {}, readiness)
    _echo_secrets(data.get("secrets") or {}, compiled.paths.config_dir, readiness)
    _echo_sandbox(agent.environment, engine, docker_problem, readiness)
    _echo_model(agent, readiness)
    _echo_verdict(file, readiness)


def _echo_inputs(inputs: dict[str, Any], specs: dict[str, Any], readiness: _Readiness) -> None:
    """Each declared input: id, template name, required or optional, secret, its fields."""
    if not inputs:
        click.echo("  inputs: none")
    for declared in inputs.values():
        schema = declared.input_class.json_schema()
        secret = declared.input_class.__secret__
        traits = ("required" if declared.required else "optional") + (", secret" if secret else "")
        alias = f" (as {declared.alias})" if declared.alias else ""
        _say(f"  input {declared.input_id}{alias}: {traits}")
        description = specs[declared.input_id].get("description") or schema.get("description")
        if description:
            _say(f"    {description}")
        for line in _field_lines(schema, secret=secret):
            _say(f"    {line}")
    required = [d.input_id for d in inputs.values() if d.required]
    if required:
        readiness.notes.append(f"give {', '.join(required)} with --input or --inputs")


def _field_lines(schema: dict[str, Any], *, secret: bool) -> list[str]:
    """One line per field of an input's schema: type, required or default, description.

    A secret input's defaults are not shown: they may be the value itself.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return [f"fields: not listed (schema type {_type_of(schema)})"]
    required = set(schema.get("required") or ())
    lines = []
    for name, field in properties.items():
        field = field if isinstance(field, dict) else {}
        if name in required:
            need = "required"
        elif "default" in field:
            need = "has a default" if secret else f"default {json.dumps(field['default'])}"
        else:
            need = "optional"
        about = f" - {field['description']}" if field.get("description") else ""
        lines.append(f"{name}: {_type_of(field)}, {need}{about}")
    return lines


def _type_of(field: dict[str, Any]) -> str:
    """A field's JSON Schema type in words: string, array of string, one of "a", "b"."""
    if "enum" in field and isinstance(field["enum"], list):
        return "one of " + ", ".join(json.dumps(value) for value in field["enum"])
    kind = field.get("type")
    if isinstance(kind, list):
        return " or ".join(map(str, kind))
    items = field.get("items")
    if kind == "array" and isinstance(items, dict) and items:
        return f"array of {_type_of(items)}"
    return str(kind) if kind else "any"


def _echo_secrets(specs: dict[str, Any], config_dir: Path, readiness: _Readiness) -> None:
    """Each secret, where it comes from and whether that is here; never its value."""
    if not specs:
        click.echo("  secrets: none")
    for name, spec in specs.items():
        required = spec.get("required", True)
        if "from_env" in spec:
            variable = spec["from_env"]
            found, state = _is_set(variable), _set_or_not(variable)
            source, absence = f"from_env: {variable}", f"{variable} is not set"
        else:
            found, state = _secret_file_state(config_dir, spec["from_file"], name)
            source = f"from_file: {spec['from_file']}"
            absence = f"{spec['from_file']}: {state}"
        _say(f"  secret {name} ({'required' if required else 'optional'}): {source}, {state}")
        if not found and required:
            readiness.missing.append(f"secret {name} ({absence})")


def _secret_file_state(config_dir: Path, path: str, name: str) -> tuple[bool, str]:
    """Whether a ``from_file`` secret can be read at session start, and in a word why not."""
    from ..config.host_paths import HostPathError, resolve_inside

    try:
        target = resolve_inside(config_dir, path, what=f"secret {name!r}")
    except HostPathError as exc:
        return False, f"refused ({exc})"
    if target.is_file():
        return True, "exists"
    return False, "not a regular file" if target.exists() else "missing"


def _echo_sandbox(
    environment: Any, engine: Any, docker_problem: str | None, readiness: _Readiness
) -> None:
    """The backend, its image and settings, and the extras it needs."""
    backend = environment.backend
    if backend == "docker":
        _echo_docker(environment, engine, docker_problem, readiness)
    elif backend == "mistral":
        _echo_mistral(environment, readiness)
    else:
        click.echo(f"  sandbox {backend}: {SANDBOX_PLACES[backend]}")
        click.echo("    extras: none needed")


SANDBOX_PLACES = {
    "none": "no sandbox; hooks never run",
    "local": "commands run on this machine, no isolation",
}


def _echo_docker(
    environment: Any, engine: Any, docker_problem: str | None, readiness: _Readiness
) -> None:
    state = _image_state(engine, environment.image)
    click.echo(f"  sandbox docker: engine {'not reachable' if docker_problem else 'reachable'}")
    _say(f"    image {environment.image}: {state}")
    read_only = "true" if environment.read_only_root else "false"
    click.echo(f"    user: {environment.user}, read_only_root: {read_only}")
    runtime = environment.runtime or "the engine's default"
    click.echo(f"    runtime: {runtime}, seccomp: {environment.seccomp}")
    click.echo("    extras: none needed (the docker package is a dependency)")
    if not docker_problem and state == "present":
        _echo_exec_channel(environment)
    if docker_problem:
        readiness.missing.append("Docker, which is not reachable here")
    elif state == "missing":
        readiness.notes.append(f"image {environment.image} is not here; a run tries to pull it")


def _echo_exec_channel(environment: Any) -> None:
    """Which exec helper the image gets, found by starting it in a throwaway
    container (about half a second; removed at once)."""
    import anyio

    try:
        kind, reason = anyio.run(environment.probe_exec_channel)
    except Exception as exc:  # a probe that fails says so; it is not the verdict
        _say(f"    exec channel: not probed ({type(exc).__name__}: {exc})")
        return
    names = {
        "python": "the Python helper",
        "shell": "the shell helper",
        "per-command": "one docker exec per command",
        "off": "off",
    }
    _say(f"    exec channel: {names[kind]} ({reason})")


def _echo_mistral(environment: Any, readiness: _Readiness) -> None:
    from ..sandboxes.mistral import TOKEN_VARIABLE, koyeb_available

    image = environment.image or "the platform's default"
    _say(f"  sandbox mistral: region {environment.region}, image {image} (pulled by the cloud)")
    installed = koyeb_available()
    click.echo(
        f"    extra koyeb: {'installed' if installed else f'not installed ({KOYEB_INSTALL})'}"
    )
    click.echo(f"    {TOKEN_VARIABLE}: {_set_or_not(TOKEN_VARIABLE)}")
    if not installed:
        readiness.missing.append(f"the koyeb extra ({KOYEB_INSTALL})")
    if not _is_set(TOKEN_VARIABLE):
        readiness.missing.append(f"{TOKEN_VARIABLE}, which is not set")


def _echo_model(agent: Any, readiness: _Readiness) -> None:
    """The model and the key it needs: set or not set, never the key."""
    if agent.base_url:
        _say(
            f"  model {agent.model} at {_without_userinfo(agent.base_url)}: "
            f"OPENAI_API_KEY {_set_or_not('OPENAI_API_KEY')} (optional; sent if set)"
        )
        return
    _say(
        f"  model {agent.model} on the Mistral API: MISTRAL_API_KEY "
        f"{_set_or_not('MISTRAL_API_KEY')} (needed by --prompt)"
    )
    if not _is_set("MISTRAL_API_KEY"):
        readiness.notes.append("a --prompt needs MISTRAL_API_KEY, which is not set")


def _without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: it may hold a key."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


def _echo_verdict(file: str, readiness: _Readiness) -> None:
    """One line: ready (exit 0, with what is worth knowing), or what is missing (exit 2)."""
    if readiness.missing:
        from ..core.progress import terminal_safe

        raise NotReady(terminal_safe(f"not ready: {file} needs {'; '.join(readiness.missing)}"))
    notes = f" ({'; '.join(readiness.notes)})" if readiness.notes else ""
    _say(f"ready: {file} can run here{notes}")


#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner info                 # Docker, isolation, extras, keys
  runner info agent.yaml      # and what the file needs
"""


@click.command(epilog=EXAMPLES)
@click.argument("file", required=False, type=click.Path(dir_okay=False))
def info(file: str | None) -> None:
    """What can run here: Docker, images, extras, keys; with FILE, what FILE needs.

    With FILE it lists every input, secret, the sandbox and its image, the
    extras and the model's key, then a verdict, so a CI job can check before
    it runs: exit 0 when ready, 2 when something required is missing.  Secret
    and key values are never printed, only whether they are set.
    """
    import platform

    compiled = compile_for_cli(file) if file else None  # a broken file fails before Docker is asked
    click.echo(f"runner {__version__} on Python {platform.python_version()}")
    engine, docker_problem = docker_engine()
    if compiled is None:
        echo_default_image(engine)
    echo_host_keys()
    if compiled is not None:
        try:
            echo_file_needs(str(file), compiled, engine, docker_problem)
        except NotReady as exc:
            fail(str(exc))
