"""Sandbox hooks: user code at the two points of a sandbox's life.

A hook is a plain object with two async methods.  The runner calls them; it
never copies or rebuilds hook objects, and it hands each point a fresh
context, so a hook should keep no state between ``on_create`` and
``on_destroy`` (derive it from constructor arguments or read it back from the
workspace), exactly as the seed documents say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a hook is given a sandbox; sandboxes hold hooks (base imports us)
    from ..sandboxes.base import Sandbox


@dataclass(frozen=True)
class SandboxCallbackContext:
    """What a hook point receives: the live sandbox and the session's id."""

    sandbox: Sandbox
    session_id: str


class SandboxHook:
    """Subclass and override ``on_create`` and/or ``on_destroy``; both default to no-ops.

    Either method may declare keyword-only session inputs with
    ``Annotated[SomeInput, Depends()]``.
    """

    #: The name progress output and error messages use; defaults to the class name.
    name: str | None = None

    async def on_create(self, ctx: SandboxCallbackContext, **inputs: Any) -> None:
        """Runs once the sandbox is ready, before the agent starts."""

    async def on_destroy(self, ctx: SandboxCallbackContext, **inputs: Any) -> None:
        """Runs once when the session closes, before the sandbox is deleted."""

    @property
    def display_name(self) -> str:
        return self.name or type(self).__name__
