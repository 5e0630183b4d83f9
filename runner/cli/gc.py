"""``runner gc``: remove expired sandbox containers and old snapshots."""

from __future__ import annotations

import click

from .common import (
    fail,
)

#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner gc
"""


@click.command(epilog=EXAMPLES)
def gc() -> None:
    """Remove sandbox containers that expired or whose runner process is gone,
    and snapshots older than 7 days, beyond the 20 newest, or beyond 20 GiB.  Containers of
    `runner serve` sessions (durable) outlive their server, to be re-attached
    when it restarts: they are removed once they expire."""
    from ..core.errors import SandboxUnavailableError
    from ..sandboxes.docker.environment import DockerClient, collect_garbage
    from ..sandboxes.docker.snapshots import collect_snapshots

    try:
        client = DockerClient()._connect()
        removed = collect_garbage(client)
        snapshots = collect_snapshots(client)
    except SandboxUnavailableError as exc:
        fail(str(exc))
    for container_id in removed:
        click.echo(container_id[:12])
    for image_id in snapshots:
        click.echo(image_id.removeprefix("sha256:")[:12])
    click.echo(f"removed {len(removed)} container(s), {len(snapshots)} snapshot(s)", err=True)
