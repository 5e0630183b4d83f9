"""Agent files the tests write: YAML kept indented in place in the test,
dedented on its way to the file.

One writer for the many ``*_file(tmp_path, ...)`` helpers of the serve
tests, which differ only in their YAML.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any


def agent_yaml(folder: Path, name: str, text: str, tail: str = "") -> Path:
    """Write ``text`` dedented, then ``tail`` as it is (lines built in code,
    already indented for where they go), to ``folder / name``; its path."""
    path = folder / name
    path.write_text(textwrap.dedent(text) + tail)
    return path


def one_step_agent(tmp_path: Path, run: str, **extra: Any) -> Path:
    """``tmp_path/agent.yaml``: input ``acme.x`` as ``x``, one local hook
    whose ``on_create`` is one ``run`` step (``extra``: the step's keys;
    ``top=`` and ``environment=``: keys of the document and environment;
    ``before=``: steps that run first, a ``secret_file:`` say; ``after=``:
    the hook's ``on_destroy`` steps)."""
    before = extra.pop("before", [])
    after = extra.pop("after", None)
    document = {
        "version": 1,
        "inputs": {"acme.x": {"as": "x", "schema": {"type": "object"}}},
        **extra.pop("top", {}),
        "agent": {
            "model": "m",
            "environment": {
                "sandbox": "local",
                **extra.pop("environment", {}),
                "hooks": [
                    {
                        "name": "h",
                        "on_create": [*before, {"run": run, **extra}],
                        **({"on_destroy": after} if after else {}),
                    }
                ],
            },
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(json.dumps(document))
    return path


def run_with_values(
    tmp_path: Path, path: Path, values: dict[str, Any], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``runner run path`` (the installed CLI) with ``values`` as its inputs,
    its output folder ``tmp_path``."""
    from conftest import RUNNER_CLI

    inputs = tmp_path / "values.json"
    inputs.write_text(json.dumps(values))
    return subprocess.run(
        [*RUNNER_CLI, "run", str(path), "--inputs", str(inputs), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
