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

The package, one job a module: ``environment`` (``MistralSandbox``: the
options, creating an instance, re-attaching and discarding recorded ones),
``instance`` (``MistralCloudSandbox``: one live instance, its commands and
files) and ``api`` (the SDK's errors in one line, and the control-plane
look-ups).  Every name is importable from here, as from the one module this
package was.
"""

from __future__ import annotations

from .api import TOKEN_VARIABLE, api_error_summary, api_status, creation_error
from .environment import (
    ATTACHABLE_STATUSES,
    BLOCKING_REGION,
    MistralSandbox,
    instance_name,
    koyeb_available,
)
from .instance import (
    CLIENT_SLACK_SECONDS,
    EXECUTOR_SECRET_VARIABLE,
    KILL_GRACE_SECONDS,
    MISSING_CWD_EXIT_CODE,
    RESTARTED_EXIT_CODE,
    RESTARTED_MESSAGE,
    RUNS_DIR,
    WORKSPACE,
    MistralCloudSandbox,
    wrap_command,
)

__all__ = [
    "ATTACHABLE_STATUSES",
    "BLOCKING_REGION",
    "CLIENT_SLACK_SECONDS",
    "EXECUTOR_SECRET_VARIABLE",
    "KILL_GRACE_SECONDS",
    "MISSING_CWD_EXIT_CODE",
    "RESTARTED_EXIT_CODE",
    "RESTARTED_MESSAGE",
    "RUNS_DIR",
    "TOKEN_VARIABLE",
    "WORKSPACE",
    "MistralCloudSandbox",
    "MistralSandbox",
    "api_error_summary",
    "api_status",
    "creation_error",
    "instance_name",
    "koyeb_available",
    "wrap_command",
]
