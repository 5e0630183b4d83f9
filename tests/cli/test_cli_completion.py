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
