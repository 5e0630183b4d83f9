"""Agent files the tests write: YAML kept indented in place in the test,
dedented on its way to the file.

One writer for the many ``*_file(tmp_path, ...)`` helpers of the serve
tests, which differ only in their YAML.
"""

from __future__ import annotations

import json
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
    ``before=``: steps that run first, a ``secret_file:`` say)."""
    before = extra.pop("before", [])
    document = {
        "version": 1,
        "inputs": {"acme.x": {"as": "x", "schema": {"type": "object"}}},
        **extra.pop("top", {}),
        "agent": {
            "model": "m",
            "environment": {
                "sandbox": "local",
                **extra.pop("environment", {}),
                "hooks": [{"name": "h", "on_create": [*before, {"run": run, **extra}]}],
            },
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(json.dumps(document))
    return path
