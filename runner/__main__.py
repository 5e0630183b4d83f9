"""``python -m runner`` is the ``runner`` command (same name in its help and
its shell completion)."""

from .cli.main import main

main(prog_name="runner")
