"""The seed document's SeedWorkspace example, on the zero-setup local sandbox.

Run it with ``python examples/seed_workspace.py``: a session starts, its hook
writes NOTES.md into a fresh workspace, and when the session closes the hook
copies the file out to ./saved-notes.md.  Swap the environment for
``agents.LocalDockerSandbox(hooks=[SeedWorkspace()])`` to run it in Docker.
"""

from __future__ import annotations

from pathlib import Path

import anyio

import runner as agents


class SeedWorkspace(agents.SandboxHook):
    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        result = await ctx.sandbox.execute("echo 'Run the tests with pytest.' > NOTES.md")
        if result.exit_code != 0:
            raise RuntimeError(f"seeding failed: {result.stderr}")

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        report = await ctx.sandbox.read_file("NOTES.md")
        Path("saved-notes.md").write_bytes(report)


agent = agents.Agent(
    model="mistral-large-4",
    environment=agents.DangerousLocalSandbox(hooks=[SeedWorkspace()]),
)


async def main() -> None:
    async with agents.local_runtime():
        session = await agent.start_session()
        print(f"session {session.id} started; workspace seeded")
    print("session closed; NOTES.md copied to", Path("saved-notes.md").resolve())


if __name__ == "__main__":
    anyio.run(main)
