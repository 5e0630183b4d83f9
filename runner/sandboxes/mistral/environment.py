"""``MistralSandbox``: a cloud sandbox's options, and its instances made, found again, deleted.

``MistralSandbox`` checks its options at construction (a region that cannot
block traffic, host names where the platform takes addresses, the executor's
secret as an ``env=`` name: refused before anything is created), maps them
onto the SDK's ``AsyncSandbox.create`` (the table in the package docstring)
and prepares each new instance (``MistralCloudSandbox.prepare``, then the
setup script); an instance that fails either is deleted.

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

import ipaddress
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ...core.errors import MissingExtraError, SandboxUnavailableError
from ...core.network import Network
from ..base import OptionError, SandboxEnvironment, check_env, check_timeout, run_setup_script
from .api import (
    TOKEN_VARIABLE,
    api_error_summary,
    api_status,
    close_clients,
    creation_error,
    deployment_status,
    find_instance,
    forget_clients_of_other_loops,
    one_line,
)
from .instance import EXECUTOR_SECRET_VARIABLE, MistralCloudSandbox

if TYPE_CHECKING:
    from ...core.hooks import SandboxHook

BLOCKING_REGION = "nl-north-1"

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

        forget_clients_of_other_loops()
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
        forget_clients_of_other_loops()
        instance = str(record.get("instance_id") or "")
        remote = await find_instance(instance)
        if remote is None:
            raise SandboxUnavailableError(f"cloud instance {instance} no longer exists")
        try:
            if remote.name != instance_name(session_id) or remote.app_id != record.get("app_id"):
                raise SandboxUnavailableError(
                    f"cloud instance {instance} is not the sandbox of session {session_id}"
                )
            status = await deployment_status(remote)
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
                    f"(exit {result['code']}: {one_line(result['stderr'])})"
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await close_clients(remote)
            raise
        return sandbox

    async def discard(self, record: Mapping[str, Any], *, session_id: str) -> bool:
        """Delete the instance ``record`` names if it still exists and is session
        ``session_id``'s (never another's); returns whether one was deleted."""
        self.check_available()
        forget_clients_of_other_loops()
        remote = await find_instance(str(record.get("instance_id") or ""))
        if remote is None:
            return False
        if remote.name != instance_name(session_id) or remote.app_id != record.get("app_id"):
            await close_clients(remote)
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

        forget_clients_of_other_loops()
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
