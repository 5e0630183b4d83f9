"""Session input values from the command line: ``--input`` and ``--inputs``.

- ``--inputs FILE`` (YAML or JSON): a mapping from input_id to that input's value.
- ``--input ID.FIELD=VALUE``: one field.  Input ids contain dots, so the text
  before ``=`` is split at the *longest declared* input_id.  VALUE is taken
  as a string when the field's schema says string; otherwise it is parsed as
  JSON (``--input ci.job.attempts=3``), falling back to the string.
- ``--input ID=@FILE``: the whole value from a YAML or JSON file.
- ``--input ID={"json": "object"}``: the whole value inline, as JSON.

Later options override earlier ones, field by field.

Errors name the target (the text before ``=``), never the value: it may be a
secret, and error messages end up in terminals and CI logs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import SessionInputError
from .compiler import DeclaredInput
from .errors import ConfigError
from .yaml_loader import load_file


def _load_value_file(path: str, *, what: str) -> Any:
    try:
        return load_file(path).data
    except ConfigError as exc:
        raise SessionInputError(f"{what}: {exc}") from None


def _parse_field_value(declared: DeclaredInput, field: str, text: str) -> Any:
    properties = declared.input_class.json_schema().get("properties") or {}
    schema = properties.get(field.split(".")[0]) or {}
    if schema.get("type") == "string":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        nested = target.setdefault(part, {})
        if not isinstance(nested, dict):
            raise SessionInputError(f"--input: {part!r} is not an object, cannot set {dotted!r}")
        target = nested
    target[parts[-1]] = value


def collect_input_values(
    declared: Mapping[str, DeclaredInput],
    *,
    assignments: Sequence[str] = (),
    files: Sequence[str] = (),
) -> dict[str, Any]:
    """The raw values by input_id (validation happens when the session starts)."""
    values: dict[str, Any] = {}
    for file in files:
        data = _load_value_file(file, what=f"--inputs {file}")
        if not isinstance(data, dict):
            raise SessionInputError(f"--inputs {file}: expected a mapping of input_id to value")
        for input_id, value in data.items():
            if input_id not in declared:
                raise SessionInputError(
                    f"--inputs {file}: unknown input {input_id!r} "
                    f"(declared: {', '.join(sorted(declared)) or 'none'})"
                )
            values[input_id] = value
    ids_longest_first = sorted(declared, key=len, reverse=True)
    for number, assignment in enumerate(assignments, start=1):
        target, equals, text = assignment.partition("=")
        if not equals:  # the whole text may be a value given without its ID
            raise SessionInputError(
                f"--input number {number} has no '=' (not shown, it may be a value): "
                "expected ID.FIELD=VALUE or ID=@FILE"
            )
        input_id = next(
            (i for i in ids_longest_first if target == i or target.startswith(i + ".")), None
        )
        if input_id is None:
            raise SessionInputError(
                f"--input: no declared input matches {target!r} "
                f"(declared: {', '.join(sorted(declared)) or 'none'})"
            )
        if target == input_id:
            if text.startswith("@"):
                values[input_id] = _load_value_file(text[1:], what=f"--input {input_id}=@")
            else:
                try:
                    values[input_id] = json.loads(text)
                except ValueError:
                    raise SessionInputError(
                        f"--input {input_id}=...: the whole value must be JSON or @FILE; "
                        f"to set one field use --input {input_id}.FIELD=VALUE"
                    ) from None
            continue
        field = target[len(input_id) + 1 :]
        current = values.setdefault(input_id, {})
        if not isinstance(current, dict):
            raise SessionInputError(f"--input {target}=...: {input_id!r} is not an object")
        _set_path(current, field, _parse_field_value(declared[input_id], field, text))
    return values
