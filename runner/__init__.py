"""sandbox-runner: run AI-agent sessions in sandboxes, with lifecycle hooks.

The public names mirror the seed documents, so their examples port by
changing one import (``from mistralai import agents`` becomes
``import runner as agents``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # explicit re-exports (`X as X`) for type checkers
    from . import pattern as pattern
    from ._agent import Agent as Agent
    from ._cache import SnapshotError as SnapshotError
    from ._cache import SnapshotWarning as SnapshotWarning
    from ._chat_completions import ChatCompletionsModel as ChatCompletionsModel
    from ._chat_completions import MissingCredentialsError as MissingCredentialsError
    from ._chat_completions import ModelError as ModelError
    from ._dependencies import Depends as Depends
    from ._errors import AgentsError as AgentsError
    from ._errors import MissingExtraError as MissingExtraError
    from ._errors import SandboxSetupError as SandboxSetupError
    from ._errors import SandboxUnavailableError as SandboxUnavailableError
    from ._errors import SdkError as SdkError
    from ._errors import SessionIdempotencyConflictError as SessionIdempotencyConflictError
    from ._errors import SessionInputError as SessionInputError
    from ._errors import SessionTerminatedError as SessionTerminatedError
    from ._events import listen as listen
    from ._hooks import SandboxCallbackContext as SandboxCallbackContext
    from ._hooks import SandboxHook as SandboxHook
    from ._inputs import SessionInput as SessionInput
    from ._model import Completed as Completed
    from ._model import Failed as Failed
    from ._model import Model as Model
    from ._model import ModelReply as ModelReply
    from ._model import ToolCall as ToolCall
    from ._model import ToolCallRecord as ToolCallRecord
    from ._model import TurnResult as TurnResult
    from ._network import Network as Network
    from ._runtime import local_runtime as local_runtime
    from ._session import Session as Session
    from ._time import now as now
    from ._time import sleep as sleep
    from .sandboxes.base import Sandbox as Sandbox
    from .sandboxes.base import SandboxEnvironment as SandboxEnvironment
    from .sandboxes.base import SandboxExecutionResult as SandboxExecutionResult
    from .sandboxes.docker import LocalDockerSandbox as LocalDockerSandbox
    from .sandboxes.local import DangerousLocalSandbox as DangerousLocalSandbox
    from .sandboxes.mistral import MistralSandbox as MistralSandbox
    from .sandboxes.none import NoSandbox as NoSandbox

# Public name -> the module that defines it: the one table of exports.
# Imported on first use, so that `runner --help` pays only for what it
# prints (PEP 562 module __getattr__); the TYPE_CHECKING block above repeats
# it for type checkers, and a test keeps the two equal.
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


#: The one export list: the lazy table's names, ``load`` and ``pattern``
#: (tests/test_exported_members.py checks the typing block against it).
__all__ = sorted([*_LAZY, "load", "pattern"])
