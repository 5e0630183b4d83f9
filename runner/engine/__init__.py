"""The engine: agents, sessions, their runtime, the hook lifecycle, session
inputs and dependency injection.

It drives a model (``runner.models``) and a sandbox (``runner.sandboxes``)
through a session; it knows no YAML (``runner.config``) and no HTTP
(``runner.serve``).
"""
