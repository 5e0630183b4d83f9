"""The ``runner`` command line: a thin shell over the library.

One module per command (``run``, ``validate``, ...; ``common`` holds what
they share).  Commands parse arguments, call library functions, and turn results and typed
errors into output and an exit code:

    0  ok
    1  the run failed (a hook, the setup script or a turn failed)
    2  usage or configuration error (bad file, bad input, backend unavailable
       or its extra missing)
    130 interrupted (Ctrl-C or SIGTERM): the session is closed first, so the
        hooks whose on_create had completed get on_destroy (none, if none
        had; a second signal stops them) and the sandbox is deleted; the
        closing message says which on_destroy hooks ran and whether the
        sandbox was deleted, from what actually happened

With ``run --json``, stdout is one JSON event per line (the schema is
``runner schema --events``) and always ends with one ``result`` event that
carries the exit code and why, even for a usage error or an interrupt.

Heavy packages (docker, jinja2, jsonschema) are imported inside the commands
that need them, so ``runner --help`` stays fast and ``runner validate`` never
imports docker.
"""

from __future__ import annotations

import click

from .. import __version__
from .completion import completion
from .gc import gc
from .info import info
from .init import init
from .render import render
from .run import run
from .schema import schema
from .serve import serve
from .validate import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runner")
def main() -> None:
    """Run AI-agent sessions in sandboxes, with lifecycle hooks declared in YAML or Python."""


for command in (validate, render, run, schema, info, init, serve, gc, completion):
    main.add_command(command)
