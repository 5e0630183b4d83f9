"""The leaf layer: what every other layer uses and that imports none of them.

Errors, the event bus and secret redaction, the clock, network settings,
terminal-safe text, snapshot keys, and the hook contract (``SandboxHook``)
that both the sandboxes and the engine speak.
"""
