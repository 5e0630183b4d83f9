"""The exceptions a user of the runner can catch.

Every error the runner raises on purpose derives from :class:`AgentsError`, so
one ``except`` catches them all; the subclasses say what went wrong in terms a
caller can act on.
"""

from __future__ import annotations


class AgentsError(Exception):
    """Base class of every error the runner raises on purpose."""


class SdkError(AgentsError):
    """The program's own declarations are wrong (a hook signature, an input class).

    Raised when an agent is built, before any session or sandbox exists.
    """


class SessionInputError(AgentsError):
    """A session input is missing, of the wrong kind, or fails its schema.

    The message names the consumer (``sandbox hook X.on_create``) and the
    ``input_id``; the check runs before any sandbox is created.
    """

    def __init__(self, message: str, *, input_id: str | None = None) -> None:
        super().__init__(message)
        self.input_id = input_id


class SessionTerminatedError(AgentsError):
    """The session is closed (cancelled, expired or finished) and cannot run."""


class SessionIdempotencyConflictError(AgentsError):
    """An idempotency key was reused with different session inputs."""


class MissingExtraError(AgentsError):
    """A backend needs an optional dependency that is not installed."""

    def __init__(self, extra: str, *, feature: str) -> None:
        super().__init__(
            f"{feature} needs the '{extra}' extra: pip install 'sandbox-runner[{extra}]'"
        )
        self.extra = extra


class SandboxUnavailableError(AgentsError):
    """The sandbox backend cannot be reached or cannot create a sandbox here.

    Examples: the Docker daemon is down, or the image is missing and cannot be
    pulled.  The message says what to do about it.
    """


class SandboxUnreachableError(SandboxUnavailableError):
    """The backend did not answer (the Docker engine is down, the cloud API
    timed out or answered 5xx): the sandbox may well still be there.  Worth
    trying again later, unlike a sandbox that is gone."""


class SandboxSetupError(AgentsError):
    """The sandbox's ``setup_script`` failed; the sandbox has been deleted."""

    def __init__(self, message: str, *, exit_code: int, stderr: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr
