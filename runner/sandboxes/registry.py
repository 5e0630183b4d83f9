"""The backends by the name ``sandbox:`` gives them: one line each.

serve and config know backends only through this table and the contract in
``base`` (``from_options``, ``record``/``reattach``/``discard``, ``recover``);
a backend's module is imported when its name is first used, so that
``runner validate`` of a local file never loads Docker's client.  Adding a
backend is its own module (or folder) and one line here.
"""

from __future__ import annotations

import importlib

from .base import SandboxEnvironment

#: name -> "module:class", the module relative to ``runner.sandboxes``.
BACKENDS: dict[str, str] = {
    "none": ".none:NoSandbox",
    "local": ".local:DangerousLocalSandbox",
    "docker": ".docker.environment:LocalDockerSandbox",
    "mistral": ".mistral.environment:MistralSandbox",
}


def backend_class(name: str) -> type[SandboxEnvironment]:
    """The environment class registered as ``name``; KeyError for an unknown one."""
    module, _, attribute = BACKENDS[name].partition(":")
    cls: type[SandboxEnvironment] = getattr(importlib.import_module(module, __package__), attribute)
    return cls


def register(name: str, target: str) -> None:
    """Add a backend (``"package.module:Class"``, absolute) under ``name``."""
    BACKENDS[name] = target
