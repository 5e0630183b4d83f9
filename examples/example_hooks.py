"""Python hooks used by examples/python-hooks.yaml (``python: example_hooks:...``).

The config file's folder is on the import path while the file compiles, so a
module next to it imports by name.  ``WriteReport`` depends on the input that
the YAML declares (``acme.repository``) with its own SessionInput class: the
value is validated against both the YAML schema and this class.
"""

from __future__ import annotations

import json
from typing import Annotated

import runner as agents


class RepositoryContext(agents.SessionInput):
    input_id = "acme.repository"

    repository: str
    revision: str = "main"


class WriteReport(agents.SandboxHook):
    """Writes REPORT.json from the session input and what the workspace holds."""

    def __init__(self, title: str) -> None:
        self.title = title

    async def on_destroy(
        self,
        ctx: agents.SandboxCallbackContext,
        *,
        repo: Annotated[RepositoryContext, agents.Depends()],
    ) -> None:
        listing = await ctx.sandbox.execute("ls -1")
        report = {
            "title": self.title,
            "repository": f"{repo.repository}@{repo.revision}",
            "files": listing.stdout.split(),
            "closed_at": agents.now().isoformat(),
        }
        await ctx.sandbox.write_file("REPORT.json", json.dumps(report, indent=2) + "\n")
