"""sandbox-runner: run AI-agent sessions in sandboxes, with lifecycle hooks.

The public names mirror the seed documents, so their examples port by
changing one import (``from mistralai import agents`` becomes
``import runner as agents``).
"""

from __future__ import annotations

from . import pattern
from ._agent import Agent
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
from .sandboxes.none import NoSandbox

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
    "Completed",
    "DangerousLocalSandbox",
    "Depends",
    "Failed",
    "LocalDockerSandbox",
    "MissingExtraError",
    "Model",
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
