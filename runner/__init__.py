"""sandbox-runner: run AI-agent sessions in sandboxes, with lifecycle hooks.

The public names mirror the seed documents, so their examples port by
changing one import (``from mistralai import agents`` becomes
``import runner as agents``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # explicit re-exports (`X as X`) for type checkers
    from . import pattern as pattern
    from .core.clock import now as now
    from .core.clock import sleep as sleep
    from .core.errors import AgentsError as AgentsError
    from .core.errors import MissingExtraError as MissingExtraError
    from .core.errors import SandboxSetupError as SandboxSetupError
    from .core.errors import SandboxUnavailableError as SandboxUnavailableError
    from .core.errors import SdkError as SdkError
    from .core.errors import SessionIdempotencyConflictError as SessionIdempotencyConflictError
    from .core.errors import SessionInputError as SessionInputError
    from .core.errors import SessionTerminatedError as SessionTerminatedError
    from .core.events import listen as listen
    from .core.hooks import SandboxCallbackContext as SandboxCallbackContext
    from .core.hooks import SandboxHook as SandboxHook
    from .core.network import Network as Network
    from .core.snapshot_keys import SnapshotError as SnapshotError
    from .core.snapshot_keys import SnapshotWarning as SnapshotWarning
    from .engine.agent import Agent as Agent
    from .engine.dependencies import Depends as Depends
    from .engine.inputs import SessionInput as SessionInput
    from .engine.runtime import local_runtime as local_runtime
    from .engine.session import Session as Session
    from .engine.tools import tool as tool
    from .models.chat_completions import ChatCompletionsModel as ChatCompletionsModel
    from .models.chat_completions import MissingCredentialsError as MissingCredentialsError
    from .models.chat_completions import ModelError as ModelError
    from .models.protocol import Completed as Completed
    from .models.protocol import Failed as Failed
    from .models.protocol import Model as Model
    from .models.protocol import ModelReply as ModelReply
    from .models.protocol import ToolCall as ToolCall
    from .models.protocol import ToolCallRecord as ToolCallRecord
    from .models.protocol import TurnResult as TurnResult
    from .models.tools import Tool as Tool
    from .models.tools import ToolContext as ToolContext
    from .sandboxes.base import Sandbox as Sandbox
    from .sandboxes.base import SandboxEnvironment as SandboxEnvironment
    from .sandboxes.base import SandboxExecutionResult as SandboxExecutionResult
    from .sandboxes.docker.environment import LocalDockerSandbox as LocalDockerSandbox
    from .sandboxes.local import DangerousLocalSandbox as DangerousLocalSandbox
    from .sandboxes.mistral.environment import MistralSandbox as MistralSandbox
    from .sandboxes.none import NoSandbox as NoSandbox

# Public name -> the module that defines it: the one table of exports.
# Imported on first use, so that `runner --help` pays only for what it
# prints (PEP 562 module __getattr__); the TYPE_CHECKING block above repeats
# it for type checkers, and a test keeps the two equal.
_LAZY = {
    "Agent": ".engine.agent",
    "SnapshotError": ".core.snapshot_keys",
    "SnapshotWarning": ".core.snapshot_keys",
    "ChatCompletionsModel": ".models.chat_completions",
    "MissingCredentialsError": ".models.chat_completions",
    "ModelError": ".models.chat_completions",
    "Depends": ".engine.dependencies",
    "AgentsError": ".core.errors",
    "MissingExtraError": ".core.errors",
    "SandboxSetupError": ".core.errors",
    "SandboxUnavailableError": ".core.errors",
    "SdkError": ".core.errors",
    "SessionIdempotencyConflictError": ".core.errors",
    "SessionInputError": ".core.errors",
    "SessionTerminatedError": ".core.errors",
    "listen": ".core.events",
    "SandboxCallbackContext": ".core.hooks",
    "SandboxHook": ".core.hooks",
    "SessionInput": ".engine.inputs",
    "Completed": ".models.protocol",
    "Failed": ".models.protocol",
    "Model": ".models.protocol",
    "ModelReply": ".models.protocol",
    "ToolCall": ".models.protocol",
    "ToolCallRecord": ".models.protocol",
    "TurnResult": ".models.protocol",
    "Network": ".core.network",
    "local_runtime": ".engine.runtime",
    "Session": ".engine.session",
    "tool": ".engine.tools",
    "Tool": ".models.tools",
    "ToolContext": ".models.tools",
    "now": ".core.clock",
    "sleep": ".core.clock",
    "Sandbox": ".sandboxes.base",
    "SandboxEnvironment": ".sandboxes.base",
    "SandboxExecutionResult": ".sandboxes.base",
    "LocalDockerSandbox": ".sandboxes.docker.environment",
    "DangerousLocalSandbox": ".sandboxes.local",
    "NoSandbox": ".sandboxes.none",
    "MistralSandbox": ".sandboxes.mistral.environment",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "pattern":
        return importlib.import_module(".pattern", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"


def load(path: str, *, output_dir: str | None = None) -> Agent:
    """Compile a YAML file into an ``Agent`` (see ``runner.config``).

    Imported lazily so that ``import runner`` does not load Jinja2.
    """
    from .config import load as load_config

    return load_config(path, output_dir=output_dir)


#: The one export list: the lazy table's names, ``load`` and ``pattern``
#: (tests/test_exported_members.py checks the typing block against it).
__all__ = sorted([*_LAZY, "load", "pattern"])
