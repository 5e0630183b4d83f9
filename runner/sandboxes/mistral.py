"""``MistralSandbox``: one cloud container per session, through the ``koyeb-sdk`` package.

The optional extra ``koyeb`` (``pip install 'sandbox-runner[koyeb]'``) brings
the SDK; without it ``check_available`` raises ``MissingExtraError`` before
inputs are resolved or anything is created.  The token is read from
``KOYEB_API_TOKEN`` (the SDK's own variable; ``KOYEB_API_HOST`` points it at
another control plane).

How the options map onto the SDK's ``AsyncSandbox.create``:

| option | SDK |
|---|---|
| ``image`` (None: the SDK's default image) | ``image`` |
| ``instance_type``, ``region`` | ``instance_type``, ``region`` |
| ``idle_timeout_seconds`` (0: never sleeps) | ``idle_timeout`` (0: always on) |
| ``ttl_seconds`` | ``delete_after_delay``: the platform deletes it even if we die |
| ``Network.none()`` | ``block_network=True`` |
| ``Network.allow([ip or cidr, ...])`` | ``outbound_allowlist`` |
| ``readiness_timeout_seconds`` | ``timeout`` of the readiness wait; a failed wait deletes it |

Only ``nl-north-1`` can block traffic, so any other region with a network
other than ``Network.all()`` is refused at construction: nothing is created.

Commands run through the executor's ``run`` endpoint under GNU ``timeout``,
because the SDK's own timeout only stops waiting and leaves the command
running.  The executor reads a command's stdout to the end before its stderr,
so a command writing more than a pipe's worth (64 KiB) to stderr would block
until killed; and the SDK repeats a request that met a 5xx or a dropped
connection, which would run a command twice.  So each command runs inside a
small wrapper (``wrap_command``) under an id of its own: its output goes to
files in the instance, printed once it has ended (stdout, then stdout closed,
then stderr), and a repeated request for the same id waits for the first run's
result instead of running it again.  A missing ``cwd`` is reported by the
wrapper as exit 126, like the other backends (the executor would answer 400).
``prepare`` leaves a marker file in the instance; an instance without it has
started afresh and lost its files (a deep sleep when ``idle_timeout_seconds``
is set, or a platform restart), and every later command is a
``SandboxUnavailableError`` saying so, never run on the empty instance.

The platform puts the executor's secret in the instance's environment
(``SANDBOX_SECRET``, which is why it cannot be a sandbox ``env=`` name); the
wrapper unsets it so that commands and their output do not carry it (any
process can still read it from the executor's own environment: this keeps it
out of transcripts, it is not a boundary).  The executor's file write makes
no parent directories, so ``write_file`` makes them first with a command.

Files are written through the SDK's filesystem API (text) or as base64 text
decoded by a command (binary), and read back as base64 through a command,
since the filesystem API returns text only.  Any SDK or transport error of a
command or a file call is a ``SandboxUnavailableError``; a sandbox the
platform already deleted (its TTL) counts as deleted at close.

Re-attaching (``runner serve`` after a restart):
``MistralCloudSandbox.record()`` is what a server stores once the
instance exists (its service id, app id and name, the marker file, the shell;
never a token or the executor's secret, which ``reattach`` reads again from the
deployment through the API). ``MistralSandbox.reattach(record, session_id=)``
rebuilds the sandbox for that instance: it must still exist, be that session's
(its name and app), have a deployment that runs or sleeps, and still hold the
marker (a deep sleep that lost the disk is refused, not used empty); any
failure is a ``SandboxUnavailableError`` naming the instance. ``discard``
deletes a recorded instance if it is still there and is that session's;
``discard_unrecorded`` deletes those named as a session's (made before the
server could record them; found by name: the platform has no labels). Nothing
here deletes an instance when the process dies: the platform's
``delete_after_delay`` (``ttl_seconds``) bounds every instance.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import posixpath
import secrets
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..core.errors import MissingExtraError, SandboxUnavailableError, SandboxUnreachableError
from ..core.network import Network
from .base import (
    READ_LIMIT,
    TIMEOUT_EXIT_CODE,
    FileTooLargeError,
    OptionError,
    Sandbox,
    SandboxEnvironment,
    SandboxExecutionResult,
    check_env,
    check_timeout,
    run_setup_script,
)

if TYPE_CHECKING:
    from ..core.hooks import SandboxHook

TOKEN_VARIABLE = "KOYEB_API_TOKEN"
BLOCKING_REGION = "nl-north-1"
WORKSPACE = "/workspace"
KILL_GRACE_SECONDS = 2
#: Extra seconds the client waits beyond a command's own timeout.
CLIENT_SLACK_SECONDS = 15
#: Where the wrapper keeps each command's output until it is sent.
RUNS_DIR = "/tmp/.runner-runs"
#: Exit code of a command whose ``cwd`` does not exist (as in the other backends).
MISSING_CWD_EXIT_CODE = 126
#: The environment variable the SDK sets to the executor's secret.
EXECUTOR_SECRET_VARIABLE = "SANDBOX_SECRET"
#: Exit code and stderr line of the wrapper when the instance lost the marker
#: file ``prepare`` left: it started afresh (a deep sleep, a platform restart).
RESTARTED_EXIT_CODE = 125
RESTARTED_MESSAGE = "runner: this cloud instance restarted and lost its files"


def wrap_command(
    command: str,
    *,
    run_id: str,
    shell: str,
    timeout: float,
    cwd: str,
    cwd_label: str | None = None,
    forget: Sequence[str] = (),
    marker: str | None = None,
) -> str:
    """The shell text that runs ``command`` once per ``run_id`` with its outputs in files.

    A first request runs it and records stdout, stderr and the exit code; a
    repeated request (the SDK's retry) waits for that record.  Both then print
    stdout, close it (the executor then reads stderr), print stderr and exit
    with the code.  ``cwd_label`` is how a missing ``cwd`` is named in the
    message; ``forget`` names earlier runs whose records can go.  With
    ``marker`` (the file ``prepare`` made), an instance without it is one
    that started afresh: the wrapper runs nothing and says so.
    """
    run = f"{RUNS_DIR}/{run_id}"
    q_cwd = shlex.quote(cwd)
    missing = shlex.quote(f"cannot change directory to {cwd_label or cwd}: no such directory")
    cleanup = "".join(f" {shlex.quote(f'{RUNS_DIR}/{old}')}" for old in forget)
    restarted = (
        f"[ -f {shlex.quote(marker)} ] || "
        f"{{ echo {shlex.quote(RESTARTED_MESSAGE)} >&2; exit {RESTARTED_EXIT_CODE}; }}; "
        if marker
        else ""
    )
    return (
        f"unset {EXECUTOR_SECRET_VARIABLE}; "
        + restarted
        + (f"rm -rf{cleanup}; " if cleanup else "")
        + f"mkdir -p {RUNS_DIR} && chmod 700 {RUNS_DIR} || exit 125; "
        f"if mkdir {run} 2>/dev/null; then "
        f"( cd {q_cwd} 2>/dev/null || {{ echo {missing} >&2; exit {MISSING_CWD_EXIT_CODE}; }}; "
        f"exec timeout -k {KILL_GRACE_SECONDS} {timeout:g} {shell} -c {shlex.quote(command)} ) "
        f"</dev/null >{run}/out 2>{run}/err; "
        f"echo $? >{run}/code.new && mv {run}/code.new {run}/code; "
        f"else while [ ! -f {run}/code ]; do sleep 0.2; done; fi; "
        f"cat {run}/out; exec 1>&-; cat {run}/err >&2; exit $(cat {run}/code)"
    )


#: Deployment states an instance can be re-attached in: running, or asleep (an
#: executor request wakes it; the marker check then tells a deep sleep that
#: lost the disk).
ATTACHABLE_STATUSES = frozenset({"HEALTHY", "DEGRADED", "SLEEPING"})


def instance_name(session_id: str) -> str:
    """The name of a session's instance (and of its app)."""
    return f"runner-{session_id.removeprefix('sess_')[:20]}"


def koyeb_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("koyeb") is not None


class MistralSandbox(SandboxEnvironment):
    """A cloud container per session, deleted at close (and by the platform at its TTL)."""

    backend = "mistral"
    options = frozenset(
        {
            "image",
            "readiness_timeout_seconds",
            "network",
            "setup_script",
            "setup_script_timeout_seconds",
            "instance_type",
            "region",
            "idle_timeout_seconds",
        }
    )

    @classmethod
    def from_options(cls, spec: Mapping[str, Any], common: Mapping[str, Any]) -> MistralSandbox:
        """The YAML keys; ``shell`` does not apply (the platform's image decides)."""
        if "shell" in spec:
            raise OptionError("shell", "'shell' does not apply to sandbox: mistral", at_key=True)
        network_spec = spec.get("network", "none")
        if isinstance(network_spec, dict):
            network = Network.allow(network_spec["allow"])
        else:
            network = Network.all() if network_spec == "all" else Network.none()
        options = {k: v for k, v in common.items() if k != "shell" and v is not None}
        options.update({key: spec[key] for key in cls.options - {"network"} if key in spec})
        try:
            return cls(network=network, **options)
        except (TypeError, ValueError) as exc:
            where = "region" if "region" in str(exc) else "network"
            raise OptionError(where if where in spec else "sandbox", str(exc)) from exc

    def __init__(
        self,
        *,
        image: str | None = None,
        instance_type: str = "medium",
        region: str = BLOCKING_REGION,
        idle_timeout_seconds: float = 0,
        ttl_seconds: float = 86400,
        default_exec_timeout_seconds: float = 30,
        network: Network | None = None,
        setup_script: str | None = None,
        setup_script_timeout_seconds: float = 300,
        readiness_timeout_seconds: float = 300,
        env: Mapping[str, str] | None = None,
        hooks: Sequence[SandboxHook] = (),
    ) -> None:
        super().__init__(
            hooks=hooks,
            default_exec_timeout_seconds=default_exec_timeout_seconds,
            ttl_seconds=ttl_seconds,
        )
        self.network = network or Network.none()
        if not isinstance(self.network, Network):
            raise TypeError(f"network= takes a Network, got {network!r}")
        if region != BLOCKING_REGION and self.network.mode != "all":
            raise ValueError(
                f"MistralSandbox: only {BLOCKING_REGION} can block traffic; region {region!r} "
                f"runs only with network=Network.all(), not {self.network}"
            )
        if self.network.mode == "allow":
            for host in self.network.hosts:
                try:
                    ipaddress.ip_network(host, strict=False)
                except ValueError:
                    raise ValueError(
                        f"MistralSandbox: Network.allow() takes IP addresses or CIDR ranges "
                        f"here, not host names ({host!r})"
                    ) from None
        if idle_timeout_seconds < 0:
            raise ValueError("idle_timeout_seconds must be 0 (never sleep) or positive")
        self.image = image
        self.instance_type = instance_type
        self.region = region
        self.idle_timeout_seconds = idle_timeout_seconds
        self.setup_script = setup_script
        self.setup_script_timeout_seconds = check_timeout(
            setup_script_timeout_seconds, name="setup_script_timeout_seconds"
        )
        self.readiness_timeout_seconds = check_timeout(
            readiness_timeout_seconds, name="readiness_timeout_seconds"
        )
        self.env = check_env(env)
        if EXECUTOR_SECRET_VARIABLE in self.env:
            raise ValueError(
                f"MistralSandbox: env name {EXECUTOR_SECRET_VARIABLE} is the platform's "
                f"(the executor's secret); choose another name"
            )

    def check_available(self) -> None:
        if not koyeb_available():
            raise MissingExtraError("koyeb", feature="MistralSandbox")
        if not os.environ.get(TOKEN_VARIABLE):
            raise SandboxUnavailableError(
                f"MistralSandbox needs an API token in {TOKEN_VARIABLE}; set it and try again"
            )

    def create_options(self, *, session_id: str, expires_at: float | None) -> dict[str, Any]:
        """The keyword arguments of the SDK's ``AsyncSandbox.create`` for one session."""
        options: dict[str, Any] = {
            "name": instance_name(session_id),
            "instance_type": self.instance_type,
            "region": self.region,
            "api_token": os.environ.get(TOKEN_VARIABLE),
            "timeout": int(self.readiness_timeout_seconds or 300),
            "idle_timeout": int(self.idle_timeout_seconds),
            "delete_after_delay": int(self.ttl_seconds or 0),
            "env": dict(self.env) or None,
            "wait_ready": True,
            "cleanup_on_failure": True,
        }
        if self.image:
            options["image"] = self.image
        if self.network.mode == "none":
            options["block_network"] = True
        elif self.network.mode == "allow":
            options["outbound_allowlist"] = list(self.network.hosts)
        return options

    async def create(self, *, session_id: str, expires_at: float | None) -> MistralCloudSandbox:
        self.check_available()
        from koyeb.sandbox import AsyncSandbox

        _forget_clients_of_other_loops()
        options = self.create_options(session_id=session_id, expires_at=expires_at)
        try:
            # Shielded: a cancelled creation would otherwise lose the handle
            # of a sandbox the platform is already running.
            with anyio.CancelScope(shield=True):
                remote = await AsyncSandbox.create(**options)
        except Exception as exc:  # the SDK's API, readiness and transport errors
            raise creation_error(exc, region=self.region) from exc
        sandbox = MistralCloudSandbox(
            remote=remote,
            session_id=session_id,
            default_exec_timeout_seconds=self.default_exec_timeout_seconds,
        )
        try:
            await sandbox.prepare()
            if self.setup_script:
                await run_setup_script(
                    sandbox,
                    self.setup_script,
                    timeout=self.setup_script_timeout_seconds or 300,
                    where=f"in {self.region}",
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await sandbox.delete()
            raise
        return sandbox

    async def reattach(self, record: Mapping[str, Any], *, session_id: str) -> MistralCloudSandbox:
        """The sandbox of session ``session_id`` again, from what
        ``record()`` gave at its creation (``runner serve`` after a restart).

        No setup script and no ``prepare``: they ran once, at creation.  The
        instance must still exist, be that session's (its name and app), have
        a deployment that runs or sleeps, and still hold the marker file (an
        instance that woke from a deep sleep without its disk is refused).
        Any failure is a ``SandboxUnavailableError`` saying why."""
        self.check_available()
        _forget_clients_of_other_loops()
        instance = str(record.get("instance_id") or "")
        remote = await _find_instance(instance)
        if remote is None:
            raise SandboxUnavailableError(f"cloud instance {instance} no longer exists")
        try:
            if remote.name != instance_name(session_id) or remote.app_id != record.get("app_id"):
                raise SandboxUnavailableError(
                    f"cloud instance {instance} is not the sandbox of session {session_id}"
                )
            status = await _deployment_status(remote)
            if status not in ATTACHABLE_STATUSES:
                raise SandboxUnavailableError(
                    f"cloud instance {instance} is not running (deployment {status})"
                )
            sandbox = MistralCloudSandbox(
                remote=remote,
                session_id=session_id,
                default_exec_timeout_seconds=self.default_exec_timeout_seconds,
            )
            sandbox.shell = str(record.get("shell") or "sh")
            sandbox._marker = record.get("marker") or None
            if sandbox._marker is None:
                raise SandboxUnavailableError(
                    f"cloud instance {instance} was recorded without its marker file"
                )
            try:
                result = await sandbox._run("true", timeout=60, cwd="/")
            except SandboxUnavailableError as exc:
                raise SandboxUnavailableError(f"cloud instance {instance}: {exc}") from exc
            if result["code"] != 0:
                raise SandboxUnavailableError(
                    f"cloud instance {instance} does not run commands "
                    f"(exit {result['code']}: {_one_line(result['stderr'])})"
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _close_clients(remote)
            raise
        return sandbox

    async def discard(self, record: Mapping[str, Any], *, session_id: str) -> bool:
        """Delete the instance ``record`` names if it still exists and is session
        ``session_id``'s (never another's); returns whether one was deleted."""
        self.check_available()
        _forget_clients_of_other_loops()
        remote = await _find_instance(str(record.get("instance_id") or ""))
        if remote is None:
            return False
        if remote.name != instance_name(session_id) or remote.app_id != record.get("app_id"):
            await _close_clients(remote)
            return False
        sandbox = MistralCloudSandbox(
            remote=remote, session_id=session_id, default_exec_timeout_seconds=30
        )
        await sandbox.delete()
        return True

    async def discard_unrecorded(self, session_id: str) -> list[str]:
        """Delete every instance named as session ``session_id``'s (an instance
        made before the server could record it: a kill during the creation);
        returns their ids.  Found by name through the API: the platform has
        no labels."""
        self.check_available()
        from koyeb.sandbox import AsyncSandbox

        _forget_clients_of_other_loops()
        name = instance_name(session_id)
        try:
            handles = await AsyncSandbox.list(name=name)
            deleted = []
            for handle in handles:
                if handle.name == name:
                    with anyio.CancelScope(shield=True):
                        await handle.delete()
                    deleted.append(handle.service_id)
        except Exception as exc:
            if api_status(exc) == 404:  # deleted meanwhile
                return []
            raise SandboxUnavailableError(
                f"the cloud instances named {name} could not be listed or deleted "
                f"({api_error_summary(exc)}); the platform deletes them at their TTL"
            ) from exc
        return deleted

    def __repr__(self) -> str:
        hooks = ", ".join(type(h).__name__ for h in self.hooks)
        return (
            f"MistralSandbox(region={self.region!r}, instance_type={self.instance_type!r}, "
            f"network={self.network}, hooks=[{hooks}])"
        )


def creation_error(exc: Exception, *, region: str) -> SandboxUnavailableError:
    """What a failed ``AsyncSandbox.create`` means, in one line."""
    from koyeb.sandbox.errors import SandboxError

    summary = api_error_summary(exc)
    if api_status(exc) in (401, 403):
        return SandboxUnavailableError(
            f"the cloud sandbox API refused the token in {TOKEN_VARIABLE} ({summary})"
        )
    if isinstance(exc, SandboxError):
        return SandboxUnavailableError(
            f"the cloud sandbox could not be created in {region} ({summary}); it was deleted"
        )
    return SandboxUnavailableError(f"the cloud sandbox API failed ({summary})")


def _api_exception(exc: BaseException) -> BaseException | None:
    """The generated client's ``ApiException`` in ``exc`` or its cause (the SDK wraps some)."""
    for candidate in (exc, exc.__cause__):
        if candidate is not None and hasattr(candidate, "status") and hasattr(candidate, "reason"):
            return candidate
    return None


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of a control-plane error, if it was one."""
    api_exception = _api_exception(exc)
    return getattr(api_exception, "status", None) if api_exception else None


def _api_failure(exc: BaseException) -> type[SandboxUnavailableError]:
    """Which error a failed control-plane call is: no answer, a timeout, 429 or
    5xx may pass (``SandboxUnreachableError``: worth trying again); any other
    answer (401, 403, ...) will not."""
    status = api_status(exc)
    if status is None or status == 429 or status >= 500:
        return SandboxUnreachableError
    return SandboxUnavailableError


def api_error_summary(exc: BaseException) -> str:
    """One line for an SDK error: the generated client's own text dumps the
    response headers and body over several lines."""
    api_exception: Any = _api_exception(exc)
    if api_exception is None:
        return f"{type(exc).__name__}: {exc}"
    data = getattr(api_exception, "data", None)
    message = getattr(data, "message", None)
    summary = f"{type(api_exception).__name__}: {api_exception.status} {api_exception.reason}"
    summary = f"{summary}: {message}" if message else summary
    # ErrorWithFields (a 400): which field was refused and why, e.g. an
    # unknown region or instance type.
    fields = [
        f"{getattr(item, 'var_field', None) or '?'}: {getattr(item, 'description', None) or '?'}"
        for item in getattr(data, "fields", None) or ()
    ]
    return f"{summary} ({'; '.join(fields)})" if fields else summary


async def _find_instance(instance_id: str) -> Any:
    """The SDK's handle of the instance ``instance_id``, or None if the platform
    has no such instance (any other failure is a ``SandboxUnavailableError``)."""
    from koyeb.sandbox import AsyncSandbox

    if not instance_id:
        return None
    try:
        return await AsyncSandbox.get_from_id(instance_id)
    except Exception as exc:  # the SDK's SandboxError family, httpx
        if api_status(exc) == 404:
            return None
        raise _api_failure(exc)(
            f"cloud instance {instance_id} cannot be reached ({api_error_summary(exc)})"
        ) from exc


async def _deployment_status(remote: Any) -> str:
    """What the instance's deployment reports now (``HEALTHY``, ``SLEEPING``...)."""
    from koyeb.sandbox.clients import get_async_api_clients
    from koyeb.sandbox.control_plane import AsyncControlPlane

    deployment_id = getattr(remote, "_deployment_id", None)
    if not deployment_id:
        return "NONE"
    control_plane = AsyncControlPlane(get_async_api_clients(remote.api_token, remote.host))
    try:
        deployment = await control_plane.get_deployment(deployment_id)
    except Exception as exc:
        if api_status(exc) == 404:
            return "DELETED"
        raise _api_failure(exc)(
            f"cloud instance {remote.service_id} cannot be reached ({api_error_summary(exc)})"
        ) from exc
    status = deployment.status
    return str(getattr(status, "value", status))


def _forget_clients_of_other_loops() -> None:
    """koyeb-sdk caches its async HTTP clients module-wide, bound to the event
    loop that made them; a later ``anyio.run`` would reuse a closed loop's
    client.  Dropping the cache makes the SDK build fresh ones (private API,
    so looked up defensively)."""
    try:
        from koyeb.sandbox import clients
    except ImportError:
        return
    cache = getattr(clients, "_async_api_clients_cache", None)
    if isinstance(cache, dict):
        cache.clear()


class MistralCloudSandbox(Sandbox):
    """One session's live cloud sandbox."""

    def __init__(
        self, *, remote: Any, session_id: str, default_exec_timeout_seconds: float
    ) -> None:
        self.remote = remote
        self.session_id = session_id
        self.workspace = WORKSPACE
        self.default_exec_timeout_seconds = default_exec_timeout_seconds
        self.shell = "sh"
        self._deleted = False
        self._delete_lock = anyio.Lock()
        #: Runs whose records the next command removes (their results arrived).
        self._finished_runs: list[str] = []
        #: A file only this instance's first start has (see ``wrap_command``).
        self._marker: str | None = None

    def record(self) -> dict[str, Any]:
        """What a server stores to find this instance again (``MistralSandbox.reattach``):
        ids, name, marker file and shell; no token, no executor secret."""
        return {
            "instance_id": self.remote.service_id,
            "app_id": self.remote.app_id,
            "instance_name": self.remote.name,
            "marker": self._marker,
            "shell": self.shell,
        }

    async def prepare(self) -> None:
        """Make the workspace and the marker file, and find the shell (bash if present)."""
        marker = f"{RUNS_DIR}/instance-{secrets.token_hex(8)}"
        result = await self._run(
            f"mkdir -p {WORKSPACE} && : > {marker} && {{ command -v bash || true; }}",
            timeout=60,
            cwd="/",
        )
        if result["code"] != 0:
            raise SandboxUnavailableError(
                f"the cloud sandbox cannot create {WORKSPACE}: {result['stderr'].strip()}"
            )
        if result["stdout"].strip():
            self.shell = "bash"
        self._marker = marker

    async def _run(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str,
        env: Mapping[str, str] | None = None,
        cwd_label: str | None = None,
    ) -> dict[str, Any]:
        """Run ``command`` at most once (see ``wrap_command``); SDK errors become ours."""
        run_id = secrets.token_hex(8)
        wrapped = wrap_command(
            command,
            run_id=run_id,
            shell=self.shell,
            timeout=timeout,
            cwd=cwd,
            cwd_label=cwd_label,
            forget=self._finished_runs,
            marker=self._marker,
        )
        try:
            result = await self.remote.exec(
                wrapped,
                cwd="/",
                env=dict(env) if env else None,
                timeout=int(timeout + CLIENT_SLACK_SECONDS),
                stream=False,
            )
        except Exception as exc:  # the SDK's SandboxError family, httpx, JSON
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status < 500:
                what = "did not run the command"  # refused: it never started
            else:  # a 5xx, a dropped connection or a timeout: maybe after it ran
                what = (
                    "did not run the command or its answer was lost (it may have run, "
                    "once: a repeated request never runs it again)"
                )
            raise SandboxUnavailableError(
                f"the cloud sandbox {what} ({type(exc).__name__}: {_one_line(exc)})"
            ) from exc
        if result.exit_code == RESTARTED_EXIT_CODE and result.stderr.strip() == RESTARTED_MESSAGE:
            raise SandboxUnavailableError(
                "the cloud sandbox restarted and lost its files (a deep sleep after "
                "idle_timeout_seconds, or a platform restart): the command was not run; "
                "start a new session"
            )
        self._finished_runs = [run_id]
        return {"code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(WORKSPACE, path))

    async def execute(
        self,
        command: str,
        *,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> SandboxExecutionResult:
        timeout = check_timeout(timeout_seconds, name="timeout_seconds")
        timeout = timeout or self.default_exec_timeout_seconds
        started = time.perf_counter()
        result = await self._run(
            command,
            timeout=timeout,
            cwd=self._path(cwd) if cwd else WORKSPACE,
            env=check_env(env),
            cwd_label=cwd,
        )
        duration = time.perf_counter() - started
        timed_out = result["code"] in (TIMEOUT_EXIT_CODE, 128 + 9) and duration >= timeout
        return SandboxExecutionResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else result["code"],
            stdout=result["stdout"],
            stderr=result["stderr"],
            timed_out=timed_out,
            duration_seconds=duration,
        )

    async def read_file(self, path: str) -> bytes:
        target = shlex.quote(self._path(path))
        result = await self._run(
            f"if [ -d {target} ]; then echo directory; exit 3; fi; base64 < {target}",
            timeout=120,
            cwd=WORKSPACE,
        )
        if result["code"] == 3 and result["stdout"].strip() == "directory":
            raise IsADirectoryError(21, "Is a directory", path)
        if result["code"] != 0:
            raise FileNotFoundError(2, "No such file in the sandbox", path)
        return base64.b64decode(result["stdout"])

    async def read_file_limited(self, path: str, limit: int) -> bytes:
        """At most ``limit`` bytes: ``head -c LIMIT+1`` in the instance, so no
        more than that comes back, whatever the file is."""
        target = shlex.quote(self._path(path))
        result = await self._run(
            f"if [ -d {target} ]; then echo directory; exit 3; fi; "
            f"{{ head -c {int(limit) + 1} | base64; }} < {target}",
            timeout=120,
            cwd=WORKSPACE,
        )
        if result["code"] == 3 and result["stdout"].strip() == "directory":
            raise IsADirectoryError(21, "Is a directory", path)
        if result["code"] != 0:
            raise FileNotFoundError(2, "No such file in the sandbox", path)
        data = base64.b64decode(result["stdout"])
        if len(data) > limit:
            raise FileTooLargeError(path, None, limit, READ_LIMIT)
        return data

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        target = self._path(path)
        made = await self._run(
            f"mkdir -p {shlex.quote(posixpath.dirname(target))}", timeout=60, cwd=WORKSPACE
        )
        if made["code"] != 0:
            raise OSError(f"cannot write {path} in the sandbox: {made['stderr'].strip()}")
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            await self._write_text(target, text, path)
            return
        # Binary: the filesystem API carries text only, so send base64 text
        # and decode it in place.
        staging = f"{target}.runner-upload.b64"
        await self._write_text(staging, base64.b64encode(payload).decode("ascii"), path)
        result = await self._run(
            f"base64 -d {shlex.quote(staging)} > {shlex.quote(target)}; status=$?; "
            f"rm -f {shlex.quote(staging)}; exit $status",
            timeout=120,
            cwd=WORKSPACE,
        )
        if result["code"] != 0:
            raise OSError(f"cannot write {path} in the sandbox: {result['stderr'].strip()}")

    async def _write_text(self, target: str, text: str, path: str) -> None:
        """The SDK's file write; what the instance refused is an OSError, the rest ours."""
        from koyeb.sandbox.filesystem import SandboxFilesystemError

        try:
            await self.remote.filesystem.write_file(target, text)
        except SandboxFilesystemError as exc:
            if exc.__cause__ is None:  # the executor answered with an error
                raise OSError(f"cannot write {path} in the sandbox: {exc}") from exc
            raise SandboxUnavailableError(
                f"the cloud sandbox did not take {path} ({type(exc.__cause__).__name__}: {exc})"
            ) from exc
        except Exception as exc:
            raise SandboxUnavailableError(
                f"the cloud sandbox did not take {path} ({type(exc).__name__}: {exc})"
            ) from exc

    async def delete(self) -> None:
        """Delete the instance; one the platform already removed (its TTL) counts as deleted."""
        async with self._delete_lock:
            if self._deleted:
                return
            with anyio.CancelScope(shield=True):
                try:
                    await self.remote.delete()
                except Exception as exc:
                    if getattr(exc, "status", None) != 404:
                        raise SandboxUnavailableError(
                            f"the cloud sandbox could not be deleted ({type(exc).__name__}: "
                            f"{exc}); the platform deletes it at its TTL"
                        ) from exc
                finally:
                    await _close_clients(self.remote)
            self._deleted = True


async def _close_clients(remote: Any) -> None:
    """Close the SDK's executor HTTP clients (what its ``__aexit__`` does, minus
    the swallowing of a failed delete)."""
    async_client = getattr(remote, "_async_client", None)
    if async_client is not None:
        with contextlib.suppress(Exception):
            await async_client.close()
    client = getattr(remote, "_client", None)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An error's text on one line, cut to ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."
