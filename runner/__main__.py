"""``python -m runner`` is the ``runner`` command."""

from .cli.main import main

main()
