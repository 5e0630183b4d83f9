"""Ready-made building blocks (``runner.pattern.sandbox_hook.GitIdentity``)."""

from . import sandbox_hook

__all__ = ["sandbox_hook"]
