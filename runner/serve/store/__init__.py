"""Where ``runner serve`` keeps its journal.

``base`` is the store's logic (which statement runs when, and how a caller
waits for it) and what the server imports; the SQL is apart: ``schema`` (the
tables, a session row) and ``statements`` (every query and write).  The
engines: ``sqlite`` (a file, one server) and ``postgres`` (many servers,
with claims).  ``writer`` commits every write on a thread of its own;
``errors`` says why a store cannot be used."""
