"""The JSON Schema of the YAML format, and its errors mapped to file positions."""

from __future__ import annotations

import functools
import json
import math
import re
from importlib import resources
from typing import Any

from .errors import ConfigProblem
from .yaml_loader import Document


@functools.cache
def schema_text() -> str:
    """The schema as shipped inside the package (``runner schema`` prints it)."""
    return resources.files("runner").joinpath("schemas/runner.schema.json").read_text("utf-8")


@functools.cache
def _schema() -> dict[str, Any]:
    return json.loads(schema_text())


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_finite_number(checker: Any, instance: Any) -> bool:
    return _is_integer(checker, instance) or (
        isinstance(instance, float) and math.isfinite(instance)
    )


@functools.cache
def _validator() -> Any:
    """The schema's validator, with one rule for numbers in every field.

    An ``integer`` field takes an integer literal only: ``pids_limit: 100.0``
    is refused (and told to write ``100``), never converted, so a value is
    exactly what the file says and no float reaches code that wants an int
    (plain JSON Schema counts 100.0 as an integer).  A ``number`` field takes
    finite numbers only: ``.inf``, ``.nan`` and ``1e400`` mean nothing as a
    timeout or a size.
    """
    from jsonschema import Draft202012Validator, validators

    type_checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_finite_number}
    )
    strict = validators.extend(Draft202012Validator, type_checker=type_checker)
    return strict(_schema())


def _allowed_keys(schema: dict[str, Any]) -> list[str]:
    return sorted((schema.get("properties") or {}).keys())


def _shapes(schemas: list[Any]) -> list[dict[str, Any]]:
    """``schemas`` and every branch they may take (``$ref``, ``then``/``else``, ``*Of``)."""
    found: list[dict[str, Any]] = []
    pending = list(schemas)
    while pending:
        schema = pending.pop()
        if not isinstance(schema, dict) or any(schema is seen for seen in found):
            continue
        found.append(schema)
        if "$ref" in schema:
            pending.append(_schema()["$defs"][schema["$ref"].rsplit("/", 1)[-1]])
        pending += [schema.get("then"), schema.get("else")]
        for combined in ("allOf", "anyOf", "oneOf"):
            pending += schema.get(combined) or []
    return found


@functools.cache
def _keys_at(path: tuple) -> tuple[str, ...]:
    """Every key some branch of the schema allows at instance ``path``.

    At a hook or a step the kind decides which keys apply, so a misspelled
    key (``rn:``) fails the kind dispatch, not a key check; suggestions come
    from the keys of every kind.
    """
    level = _shapes([_schema()])
    for part in path:
        children = []
        for schema in level:
            if isinstance(part, int):
                children.append(schema.get("items"))
            elif part in (schema.get("properties") or {}):
                children.append(schema["properties"][part])
            else:
                children.append(schema.get("additionalProperties"))
        level = _shapes(children)
    return tuple(sorted({key for schema in level for key in schema.get("properties") or {}}))


def _unknown_keys(error: Any) -> list[tuple[tuple, str, bool]]:
    """An "unknown key" problem for each key of ``error.instance`` no schema branch allows.

    Checked for a key error and for a custom-worded one (a failed hook or
    step kind), before the custom wording: a misspelled key is the likelier
    cause, and naming it with the closest valid key is the useful answer.
    """
    path = tuple(error.absolute_path)
    everywhere = _keys_at(path)
    if error.validator == "additionalProperties":
        allowed = _allowed_keys(error.schema)
    else:
        allowed = list(everywhere)
    problems = []
    for key in error.instance:
        if key in allowed:
            continue
        if key in everywhere:  # valid in another kind of hook or step: `run` with `write`
            message = (
                f"unknown key {key!r} here (it belongs to another kind of hook or step); "
                f"allowed: {', '.join(allowed)}"
            )
        else:
            close = _close(key, allowed) or _close(key, everywhere)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            message = f"unknown key {key!r}; {hint}"
        problems.append(((*path, key), message, True))
    return problems


def _close(word: str, options: Any) -> list[str]:
    """The option ``word`` most likely misspells (difflib is imported only for errors)."""
    import difflib

    return difflib.get_close_matches(word, list(options), n=1)


def _messages(error: Any) -> list[tuple[tuple, str, bool]]:
    """(path, message, at_key) for one jsonschema error, worded for YAML authors."""
    path = tuple(error.absolute_path)
    custom = error.schema.get("x-error") if isinstance(error.schema, dict) else None
    key_error = error.validator == "additionalProperties"
    # A mapping where no branch takes keys (``version: {x: 1}``) is a wrong
    # type, not a misspelled key: the custom wording explains it.
    if isinstance(error.instance, dict) and (key_error or (custom and _keys_at(path))):
        unknown = _unknown_keys(error)
        if unknown:
            return unknown
    return [_message(error, path, custom)]


def _message(error: Any, path: tuple, custom: str | None) -> tuple[tuple, str, bool]:
    if custom:
        return path, custom, False
    if error.validator == "enum":
        options = [str(o) for o in error.validator_value]
        close = _close(str(error.instance), options)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return path, f"{error.instance!r} is not one of: {', '.join(options)}{hint}", False
    if error.validator == "required":
        match = re.match(r"'([^']+)' is a required property", error.message)
        if match:
            return path, f"missing required key {match.group(1)!r}", False
    if error.validator == "propertyNames":
        return path, f"invalid key: {error.message}", False
    if error.validator == "type":
        got = _type_name(error.instance)
        if isinstance(error.instance, float) and not math.isfinite(error.instance):
            return path, f"expected a finite {error.validator_value}, got {got}", False
        if error.validator_value == "integer" and isinstance(error.instance, float):
            hint = f"; write {int(error.instance)}" if error.instance.is_integer() else ""
            return path, f"expected an integer, got {got}{hint}", False
        if error.validator_value == "boolean" and str(error.instance).lower() in _YAML11_BOOLS:
            word = _YAML11_BOOLS[str(error.instance).lower()]
            return (
                path,
                f"expected boolean, got the string {error.instance!r}: YAML 1.2 reads "
                f"yes/no/on/off as strings; write {word}",
                False,
            )
        return path, f"expected {error.validator_value}, got {got}", False
    return path, error.message, False


#: YAML 1.1's other spellings of true and false: strings in YAML 1.2, which the loader reads.
_YAML11_BOOLS = {
    **dict.fromkeys(("yes", "y", "on"), "true"),
    **dict.fromkeys(("no", "n", "off"), "false"),
}


def _type_name(value: Any) -> str:
    if value is None:
        return "null (an empty value)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def schema_problems(document: Document) -> list[ConfigProblem]:
    """Every schema error of ``document``, the most relevant first.

    Most relevant: nearest the top of the document (a wrong key high up
    explains the errors below it), then in file order (jsonschema's own
    ``relevance`` puts later siblings first); at one place, an unknown key
    first (a misspelled ``verion`` explains the missing ``version``), and a
    specific rule before a failed ``anyOf``/``oneOf``.
    """
    from jsonschema.exceptions import WEAK_MATCHES

    def rank(error: Any) -> tuple[int, tuple[int, int], bool, bool]:
        path = tuple(error.absolute_path)
        unknown_key = error.validator == "additionalProperties"
        return len(path), document.position(path), not unknown_key, error.validator in WEAK_MATCHES

    errors = sorted(_validator().iter_errors(document.data), key=rank)
    problems = []
    seen = set()
    for error in errors:
        for path, message, at_key in _messages(error):
            if (path, message) in seen:
                continue
            seen.add((path, message))
            problems.append(document.problem(path, message, at_key=at_key))
    return problems
