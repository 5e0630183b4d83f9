"""The ``runner`` command line: a thin shell over the library.

Commands parse arguments, call one library function, and turn its result or
its typed error into output and an exit code (0 ok, 1 run failed, 2 usage or
configuration error).  Heavy packages are imported inside the commands that
need them, so ``runner --help`` stays fast.
"""

from __future__ import annotations

import sys

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runner")
def main() -> None:
    """Run AI-agent sessions in sandboxes, with lifecycle hooks."""


@main.command()
def gc() -> None:
    """Remove sandbox containers that expired or whose runner process is gone."""
    from ._errors import SandboxUnavailableError
    from .sandboxes.docker import DockerClient, collect_garbage

    client = DockerClient()
    try:
        removed = collect_garbage(client._connect())
    except SandboxUnavailableError as exc:
        click.echo(f"runner gc: {exc}", err=True)
        sys.exit(2)
    for container_id in removed:
        click.echo(container_id[:12])
    click.echo(f"removed {len(removed)} container(s)", err=True)
