"""Session input values from the command line: ``--input`` and ``--inputs``.

- ``--inputs FILE`` (YAML or JSON): a mapping from input_id to that input's value.
  A file named ``*.json``, or whose text starts with ``{`` or ``[``, is read
  with a JSON parser: the YAML loader refuses valid JSON (``"\\ud83d\\ude0d"``
  surrogate pairs, DEL and C1 characters), and CI tools write JSON.
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

from ..core.errors import SessionInputError
from ..engine.inputs import closest
from .compiler import DeclaredInput
from .errors import ConfigError
from .host_paths import read_regular_file
from .yaml_loader import MAX_BYTES, MAX_DEPTH, load_file, load_text


def _load_value_file(path: str, *, what: str) -> Any:
    """A value file: JSON by name or by its first character, else YAML.

    Read once, with the YAML loader's bounds (a regular file, ``MAX_BYTES``);
    when that read fails, ``load_file`` reads again to word the problem.  Text
    that starts like JSON but is not JSON is still tried as YAML (a flow
    mapping ``{id: {field: x}}``), unless the name says ``.json``.
    """
    try:
        text: str | None = read_regular_file(path, limit=MAX_BYTES).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        text = None
    named_json = path.lower().endswith(".json")
    try:
        if text is not None and (named_json or text.lstrip()[:1] in ("{", "[")):
            try:
                return json_value(text)
            except ValueError as exc:
                if named_json:
                    raise SessionInputError(f"{what}: {path}: {exc}") from None
        return load_file(path).data if text is None else load_text(text, file=path).data
    except ConfigError as exc:
        raise SessionInputError(f"{what}: {exc}") from None


def json_value(text: str) -> Any:
    """``text`` parsed as JSON, or ``ValueError`` saying why not (never quoting the text).

    Like the YAML loader: duplicate keys and nesting deeper than ``MAX_DEPTH``
    are refused (a deep value would otherwise reach Python's recursion limit
    later); ``NaN`` and ``Infinity`` are not JSON.
    """
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_not_json)
    except RecursionError:
        raise ValueError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    if _deeper_than(value, MAX_DEPTH):
        raise ValueError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise ValueError(f"invalid JSON: duplicate key {key!r}")
        value[key] = item
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"invalid JSON: {constant} is not a JSON number")


def _deeper_than(value: Any, limit: int) -> bool:
    if limit < 0:
        return True
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    return any(_deeper_than(child, limit - 1) for child in children)


def _unknown(kind: str, name: str, known: Sequence[str]) -> str:
    close = closest(name, known)
    hint = (
        f"did you mean {close!r}?" if close else f"declared: {', '.join(sorted(known)) or 'none'}"
    )
    return f"{kind} {name!r}; {hint}"


def _parse_field_value(declared: DeclaredInput, field: str, text: str) -> Any:
    properties = declared.input_class.json_schema().get("properties") or {}
    schema = properties.get(field.split(".")[0]) or {}
    if schema.get("type") == "string":
        return text
    try:
        return json_value(text)
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
                    f"--inputs {file}: {_unknown('unknown input', input_id, list(declared))}"
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
                    values[input_id] = json_value(text)
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
