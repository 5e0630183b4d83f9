"""sandbox-runner: run AI-agent sessions in sandboxes, with lifecycle hooks.

The public names mirror the seed documents, so their examples port by
changing one import (``from mistralai import agents`` becomes
``import runner as agents``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import pattern
    from ._agent import Agent
    from ._cache import SnapshotError, SnapshotWarning
    from ._chat_completions import ChatCompletionsModel, MissingCredentialsError, ModelError
    from ._dependencies import Depends
    from ._errors import (
        AgentsError,
        MissingExtraError,
        SandboxSetupError,
        SandboxUnavailableError,
        SdkError,
        SessionIdempotencyConflictError,
        SessionInputError,
        SessionTerminatedError,
    )
    from ._events import listen
    from ._hooks import SandboxCallbackContext, SandboxHook
    from ._inputs import SessionInput
    from ._model import Completed, Failed, Model, ModelReply, ToolCall, ToolCallRecord, TurnResult
    from ._network import Network
    from ._runtime import local_runtime
    from ._session import Session
    from ._time import now, sleep
    from .sandboxes.base import Sandbox, SandboxEnvironment, SandboxExecutionResult
    from .sandboxes.docker import LocalDockerSandbox
    from .sandboxes.local import DangerousLocalSandbox
    from .sandboxes.mistral import MistralSandbox
    from .sandboxes.none import NoSandbox

# Public name -> the module that defines it.  Imported on first use, so that
# `runner --help` pays only for what it prints (PEP 562 module __getattr__).
_LAZY = {
    "Agent": "._agent",
    "SnapshotError": "._cache",
    "SnapshotWarning": "._cache",
    "ChatCompletionsModel": "._chat_completions",
    "MissingCredentialsError": "._chat_completions",
    "ModelError": "._chat_completions",
    "Depends": "._dependencies",
    "AgentsError": "._errors",
    "MissingExtraError": "._errors",
    "SandboxSetupError": "._errors",
    "SandboxUnavailableError": "._errors",
    "SdkError": "._errors",
    "SessionIdempotencyConflictError": "._errors",
    "SessionInputError": "._errors",
    "SessionTerminatedError": "._errors",
    "listen": "._events",
    "SandboxCallbackContext": "._hooks",
    "SandboxHook": "._hooks",
    "SessionInput": "._inputs",
    "Completed": "._model",
    "Failed": "._model",
    "Model": "._model",
    "ModelReply": "._model",
    "ToolCall": "._model",
    "ToolCallRecord": "._model",
    "TurnResult": "._model",
    "Network": "._network",
    "local_runtime": "._runtime",
    "Session": "._session",
    "now": "._time",
    "sleep": "._time",
    "Sandbox": ".sandboxes.base",
    "SandboxEnvironment": ".sandboxes.base",
    "SandboxExecutionResult": ".sandboxes.base",
    "LocalDockerSandbox": ".sandboxes.docker",
    "DangerousLocalSandbox": ".sandboxes.local",
    "NoSandbox": ".sandboxes.none",
    "MistralSandbox": ".sandboxes.mistral",
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


__all__ = [
    "Agent",
    "AgentsError",
    "ChatCompletionsModel",
    "Completed",
    "DangerousLocalSandbox",
    "Depends",
    "Failed",
    "LocalDockerSandbox",
    "MissingCredentialsError",
    "MissingExtraError",
    "MistralSandbox",
    "Model",
    "ModelError",
    "ModelReply",
    "Network",
    "NoSandbox",
    "Sandbox",
    "SandboxCallbackContext",
    "SandboxEnvironment",
    "SandboxExecutionResult",
    "SandboxHook",
    "SandboxSetupError",
    "SandboxUnavailableError",
    "SdkError",
    "Session",
    "SessionIdempotencyConflictError",
    "SessionInput",
    "SessionInputError",
    "SessionTerminatedError",
    "SnapshotError",
    "SnapshotWarning",
    "ToolCall",
    "ToolCallRecord",
    "TurnResult",
    "listen",
    "load",
    "local_runtime",
    "now",
    "pattern",
    "sleep",
]
