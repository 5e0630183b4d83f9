"""Secrets declared in YAML: read from the host at session start, never templated.

All of a file's secrets form one session input, ``runner.secrets``, marked
secret: its value is read when the session starts (from environment
variables or files next to the config), before any sandbox exists, and every
string in it is scrubbed from events, errors and logs, in raw, shell-quoted,
URL-encoded and base64 form.  Steps receive secrets only as environment
variables (``secrets:`` on a ``run`` step) or files (``secret_file:``); a
template that names ``secrets`` is a validation error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.errors import SessionInputError
from ..engine.inputs import SessionInput
from .host_paths import HostPathError, read_regular_file, resolve_inside

#: A secret file larger than this is refused (a key or a token, not a disk image).
MAX_SECRET_BYTES = 1_000_000

SECRETS_INPUT_ID = "runner.secrets"


def secrets_input_class(specs: Mapping[str, Mapping[str, Any]], config_dir: Path) -> type:
    """A SessionInput class holding every declared secret, provided from the host."""
    schema = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in specs},
        "required": [name for name, spec in specs.items() if spec.get("required", True)],
        "additionalProperties": False,
    }
    base = SessionInput.from_json_schema(SECRETS_INPUT_ID, schema, name="Secrets", secret=True)

    def provide(cls: type) -> dict[str, str]:
        values: dict[str, str] = {}
        for name, spec in specs.items():
            value = _read(name, spec, config_dir)
            if value is not None:
                values[name] = value
            elif spec.get("required", True):
                source = (
                    f"environment variable {spec['from_env']}"
                    if "from_env" in spec
                    else f"file {spec['from_file']}"
                )
                raise SessionInputError(
                    f"secret {name!r} is required but the {source} is not set",
                    input_id=SECRETS_INPUT_ID,
                )
        return values

    return type("Secrets", (base,), {"__provide__": classmethod(provide)})


def _read(name: str, spec: Mapping[str, Any], config_dir: Path) -> str | None:
    if "from_env" in spec:
        return os.environ.get(spec["from_env"]) or None
    try:
        path = resolve_inside(config_dir, spec["from_file"], what=f"secret {name!r}")
        # Bytes that are not UTF-8 (a binary key) are kept, surrogate-escaped as
        # in an environment variable: steps get the original bytes back.
        text = read_regular_file(path, limit=MAX_SECRET_BYTES).decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return None
    except (HostPathError, OSError) as exc:
        raise SessionInputError(
            f"secret {name!r}: cannot read {spec['from_file']}: {exc}",
            input_id=SECRETS_INPUT_ID,
        ) from None
    return text[:-1] if text.endswith("\n") else text
