"""Why a store cannot be used: the server says so and does not start.

Apart from the store so that the writer (which the store imports) can raise
them too.
"""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be used; the message says why (the server does not start)."""


class StoreInUseError(StoreError):
    """Another server holds the SQLite file: two would resume the same sessions."""
