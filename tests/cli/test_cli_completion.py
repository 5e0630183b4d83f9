"""``runner completion SHELL`` prints a completion script that really completes."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import RUNNER_CLI


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script_for_the_shell(shell: str) -> None:
    done = subprocess.run(
        [*RUNNER_CLI, "completion", shell], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "_RUNNER_COMPLETE" in done.stdout


def test_the_bash_script_completes_commands_and_options() -> None:
    """What bash's completion function asks the CLI, answered as click does."""
    env = {
        **os.environ,
        "_RUNNER_COMPLETE": "bash_complete",
        "COMP_WORDS": "runner ser",
        "COMP_CWORD": "1",
    }
    done = subprocess.run([*RUNNER_CLI], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,serve" in done.stdout.splitlines(), done.stdout
    env.update(COMP_WORDS="runner serve --drain", COMP_CWORD="2")
    done = subprocess.run([*RUNNER_CLI], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,--drain-timeout" in done.stdout.splitlines(), done.stdout


def test_every_command_shows_examples_that_use_only_its_options() -> None:
    """``--help`` ends with examples (issue 31); each runs the command it is
    under and names only options the command has, so they cannot drift."""
    import shlex

    from runner.cli.main import main

    for name, command in main.commands.items():
        assert command.epilog and command.epilog.startswith("Examples:"), name
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        examples = [line for line in command.epilog.splitlines() if line.startswith("  ")]
        assert examples, name
        for line in examples:
            words = shlex.split(line.split(" # ")[0].split(" > ")[0].split(" | ")[0])
            at = words.index("runner")
            assert words[at + 1] == name, line
            for word in words[at + 2 :]:
                if word.startswith("-"):
                    assert word.split("=")[0] in options, f"{name}: {word} in {line!r}"
