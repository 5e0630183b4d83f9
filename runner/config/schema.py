"""The JSON Schema of the YAML format, and its errors mapped to file positions."""

from __future__ import annotations

import difflib
import functools
import json
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
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(schema_text()))


def _allowed_keys(schema: dict[str, Any]) -> list[str]:
    return sorted((schema.get("properties") or {}).keys())


def _message(error: Any, document: Document) -> tuple[tuple, str, bool]:
    """(path, message, at_key) for one jsonschema error, worded for YAML authors."""
    path = tuple(error.absolute_path)
    custom = error.schema.get("x-error") if isinstance(error.schema, dict) else None
    if custom:
        return path, custom, False
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = _allowed_keys(error.schema)
        unexpected = [k for k in error.instance if k not in allowed]
        if unexpected:
            key = unexpected[0]
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
            return (*path, key), f"unknown key {key!r}{hint}", True
    if error.validator == "enum":
        options = [str(o) for o in error.validator_value]
        close = difflib.get_close_matches(str(error.instance), options, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return path, f"{error.instance!r} is not one of: {', '.join(options)}{hint}", False
    if error.validator == "required":
        match = re.match(r"'([^']+)' is a required property", error.message)
        if match:
            return path, f"missing required key {match.group(1)!r}", False
    if error.validator == "propertyNames":
        return path, f"invalid key: {error.message}", False
    if error.validator == "type":
        return path, f"expected {error.validator_value}, got {_type_name(error.instance)}", False
    return path, error.message, False


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
    """Every schema error of ``document``, the most relevant first."""
    from jsonschema.exceptions import relevance

    errors = sorted(_validator().iter_errors(document.data), key=relevance, reverse=True)
    problems = []
    seen = set()
    for error in errors:
        path, message, at_key = _message(error, document)
        if (path, message) in seen:
            continue
        seen.add((path, message))
        problems.append(document.problem(path, message, at_key=at_key))
    return problems
