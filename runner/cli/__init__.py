"""The ``runner`` command line: ``main`` (the click group and its commands),
``running`` (whole sessions as exit codes and messages) and ``info``."""

from .main import main

__all__ = ["main"]
