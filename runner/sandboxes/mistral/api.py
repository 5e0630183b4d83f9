"""The koyeb-sdk's control plane, as the Mistral backend uses it: errors and look-ups.

An SDK or API failure becomes one line (``api_error_summary``: the generated
client's own text dumps headers and body over several lines) and the right
error (``api_failure``: worth trying again or not); ``find_instance`` and
``deployment_status`` are the look-ups re-attaching needs; the SDK's HTTP
clients are dropped between event loops and closed after a delete.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ...core.errors import SandboxUnavailableError, SandboxUnreachableError

TOKEN_VARIABLE = "KOYEB_API_TOKEN"


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


def api_failure(exc: BaseException) -> type[SandboxUnavailableError]:
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


async def find_instance(instance_id: str) -> Any:
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
        raise api_failure(exc)(
            f"cloud instance {instance_id} cannot be reached ({api_error_summary(exc)})"
        ) from exc


async def deployment_status(remote: Any) -> str:
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
        raise api_failure(exc)(
            f"cloud instance {remote.service_id} cannot be reached ({api_error_summary(exc)})"
        ) from exc
    status = deployment.status
    return str(getattr(status, "value", status))


def forget_clients_of_other_loops() -> None:
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


async def close_clients(remote: Any) -> None:
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


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An error's text on one line, cut to ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."
