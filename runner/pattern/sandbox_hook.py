"""Built-in sandbox hooks."""

from __future__ import annotations

import shlex

from ..core.hooks import SandboxCallbackContext, SandboxHook


class GitIdentity(SandboxHook):
    """Set the sandbox's global git ``user.name`` and ``user.email`` in ``on_create``.

    Commits the agent makes in the sandbox then carry this identity.  The
    values are shell-quoted, so any name is safe.  Fails the session if git
    is missing or refuses the setting.
    """

    def __init__(self, name: str, email: str) -> None:
        for field, value in (("name", name), ("email", email)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"GitIdentity: {field} must be a non-empty string")
            if "\n" in value or "\0" in value:
                raise ValueError(f"GitIdentity: {field} must be one line")
        self.git_name = name
        self.git_email = email

    @property
    def display_name(self) -> str:
        return self.name or "git-identity"

    def command(self) -> str:
        """The one command ``on_create`` runs (``runner render`` shows it too)."""
        return (
            f"git config --global user.name {shlex.quote(self.git_name)} && "
            f"git config --global user.email {shlex.quote(self.git_email)}"
        )

    # The ignore: a hook's on_create declares only the inputs it reads (here none).
    async def on_create(self, ctx: SandboxCallbackContext) -> None:  # type: ignore[override]
        result = await ctx.sandbox.execute(self.command())
        if result.exit_code != 0:
            raise RuntimeError(
                f"git-identity: git config failed with exit {result.exit_code}: "
                f"{result.stderr.strip()}"
            )

    def __repr__(self) -> str:
        return f"GitIdentity(name={self.git_name!r}, email={self.git_email!r})"
