"""``runner serve``: the sessions of YAML and Python agents over HTTP, journaled
in SQLite (one server) or PostgreSQL (several).

The pieces, one concept each:

- ``service``: loading the agents, the token, starting and stopping;
- ``asgi``: the routes served by uvicorn, with bounded requests (``http_messages``: their types);
- ``app``: the routes, the bearer token and the OpenAPI document;
- ``sessions``: starting, driving, closing and resuming sessions;
- ``journal``: finished steps recorded, and not run again;
- ``store``: the journal's tables and queries, on SQLite and PostgreSQL.

docs/serve-design.md says what is built, what is not yet, and why.
"""
