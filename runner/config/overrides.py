"""``--sandbox`` and ``--image``: run one file on another backend without editing it.

A CI job runs the file on Docker, a laptop on the local sandbox.  Switching
backends keeps the hooks and the options every backend takes, and leaves out
the options of the old backend that the new one has no use for (a Docker
``memory`` means nothing to the local sandbox); they are named in the notes,
so the switch is never silent.  Hooks marked ``cache: true`` run on a
backend that cannot snapshot (the local sandbox) as ``--no-cache`` runs them:
their ``on_create`` in every session, with a note saying so.
"""

from __future__ import annotations

import copy
from typing import Any

from ..sandboxes.base import COMMON_OPTIONS
from ..sandboxes.registry import BACKENDS, backend_class


class OverrideError(ValueError):
    """An override that cannot apply (``--image`` for a backend without images)."""


def apply_overrides(
    data: Any, *, sandbox: str | None = None, image: str | None = None
) -> tuple[Any, list[str]]:
    """A copy of the document's data with the overrides applied, and notes on what changed."""
    if (sandbox is None and image is None) or not isinstance(data, dict):
        return data, []
    data = copy.deepcopy(data)
    agent = data.setdefault("agent", {})
    if not isinstance(agent, dict):
        return data, []  # the schema check reports it
    environment = agent.get("environment")
    if not isinstance(environment, dict):
        environment = {"sandbox": "none"}
    notes: list[str] = []
    backend = environment.get("sandbox", "none")
    if sandbox is not None and sandbox != backend:
        allowed = COMMON_OPTIONS | backend_class(sandbox).options
        if sandbox == "none":
            allowed = allowed - {"hooks"}  # hooks never run without a sandbox
        dropped = sorted(key for key in environment if key not in allowed and key != "sandbox")
        environment = {k: v for k, v in environment.items() if k in allowed}
        environment["sandbox"] = backend = sandbox
        if dropped:
            notes.append(f"--sandbox {sandbox}: ignoring {', '.join(dropped)} of the file")
        if not backend_class(sandbox).can_snapshot:
            notes += _uncache(environment, sandbox)
    if image is not None:
        if backend not in BACKENDS or "image" not in backend_class(backend).options:
            raise OverrideError(f"--image applies to sandbox docker or mistral, not {backend}")
        environment["image"] = image
    agent["environment"] = environment
    return data, notes


def _uncache(environment: dict[str, Any], sandbox: str) -> list[str]:
    """Drop ``cache: true`` from the hooks (a backend that cannot snapshot), and say so."""
    hooks = environment.get("hooks")
    if not isinstance(hooks, list):
        return []
    cached = []
    for index, hook in enumerate(hooks):
        if isinstance(hook, dict) and hook.get("cache") is True:
            cached.append(str(hook.get("name") or hook.get("uses") or hook.get("python") or index))
            hooks[index] = {k: v for k, v in hook.items() if k != "cache"}
    if not cached:
        return []
    return [
        f"--sandbox {sandbox} cannot snapshot: cached hook {', '.join(cached)} (cache: true) "
        "runs its on_create in every session, as with --no-cache"
    ]
