"""Where ``runner serve`` keeps its journal: ``base`` (the tables, the
queries and SQLite) and ``postgres`` (the same on PostgreSQL, with claims)."""
