"""``runner completion``: click's shell completion script."""

from __future__ import annotations

import click

#: Shown under --help (``\b``: click keeps these lines as they are).
EXAMPLES = """Examples:

\b
  runner completion bash > ~/.local/share/bash-completion/completions/runner
  runner completion fish > ~/.config/fish/completions/runner.fish
"""


@click.command(epilog=EXAMPLES)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (click's), for commands,
    options, file names and choices.

    \b
    Examples:
      runner completion bash > ~/.local/share/bash-completion/completions/runner
      runner completion zsh > "${fpath[1]}/_runner"
      runner completion fish > ~/.config/fish/completions/runner.fish
    """
    from click.shell_completion import get_completion_class

    from .main import main

    completer = get_completion_class(shell)
    assert completer is not None  # the choice lists only shells click knows
    click.echo(completer(main, {}, "runner", "_RUNNER_COMPLETE").source())
