"""Agent files the tests write: YAML kept indented in place in the test,
dedented on its way to the file.

One writer for the many ``*_file(tmp_path, ...)`` helpers of the serve
tests, which differ only in their YAML.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def agent_yaml(folder: Path, name: str, text: str, tail: str = "") -> Path:
    """Write ``text`` dedented, then ``tail`` as it is (lines built in code,
    already indented for where they go), to ``folder / name``; its path."""
    path = folder / name
    path.write_text(textwrap.dedent(text) + tail)
    return path
