"""``NoSandbox``: the default environment, which has no sandbox at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .base import OptionError, Sandbox, SandboxEnvironment

if TYPE_CHECKING:
    from ..core.hooks import SandboxHook


class NoSandbox(SandboxEnvironment):
    """No sandbox: nothing is ever created and hooks never run (as the seeds say).

    Hooks are accepted so that swapping the environment of an agent is a
    one-word change, but they are inert here.
    """

    creates_sandbox = False
    backend = "none"

    def __init__(self, *, hooks: Sequence[SandboxHook] = ()) -> None:
        super().__init__(hooks=hooks)

    @classmethod
    def from_options(cls, spec: Mapping[str, Any], common: Mapping[str, Any]) -> NoSandbox:
        if spec.get("hooks"):
            raise OptionError(
                "hooks", "hooks never run with sandbox: none; choose sandbox: local or docker"
            )
        return cls()

    async def create(self, *, session_id: str, expires_at: float | None) -> Sandbox:
        raise RuntimeError("NoSandbox never creates a sandbox")
