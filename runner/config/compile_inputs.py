"""The ``secrets:`` and ``inputs:`` sections, compiled to SessionInput classes.

A part of the YAML compiler (``compiler``); ``CompilerBase`` says why parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..engine.inputs import SessionInput
from .compile_base import CompilerBase, DeclaredInput
from .errors import JsonPath
from .host_paths import check_relative
from .tools import ARGUMENTS_NAME


class InputsCompiler(CompilerBase):
    """``secrets:`` and ``inputs:``."""

    def compile_secrets(self) -> None:
        from .secrets import secrets_input_class

        for name, spec in self.secret_specs.items():
            if "from_file" in spec:
                reason = check_relative(spec["from_file"])
                if reason:
                    self.problem(("secrets", name, "from_file"), reason)
        if self.secret_specs:
            self.secrets_class = secrets_input_class(self.secret_specs, self.paths.config_dir)

    def compile_inputs(self) -> None:
        from jsonschema import Draft202012Validator, SchemaError

        aliases: dict[str, str] = {}
        for input_id, spec in (self.data.get("inputs") or {}).items():
            path: JsonPath = ("inputs", input_id)
            if input_id.startswith("runner."):
                self.problem(path, "input ids starting with 'runner.' are reserved", at_key=True)
                continue
            schema = spec["schema"]
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                where = (*path, "schema", *exc.absolute_path)
                self.problem(where, f"not a valid JSON Schema: {exc.message}")
                continue
            if schema.get("type") != "object":
                self.problem((*path, "schema"), "an input's schema must have type: object")
                continue
            remote = _remote_ref(schema)
            if remote is not None:
                self.problem(
                    (*path, "schema", *remote),
                    "$ref must point inside the schema (#/...): schemas are never fetched",
                )
                continue
            if "no_leading_dash" in spec and "no_leading_option" in spec:
                self.problem(
                    (*path, "no_leading_dash"),
                    "give only no_leading_option: no_leading_dash is its old name",
                    at_key=True,
                )
                continue
            alias = spec.get("as")
            if alias in ("inputs", "session", ARGUMENTS_NAME):
                self.problem((*path, "as"), f"{alias!r} is reserved; pick another name")
                continue
            if alias and alias in aliases:
                self.problem(
                    (*path, "as"), f"alias {alias!r} is already used by input {aliases[alias]!r}"
                )
                continue
            if alias:
                aliases[alias] = input_id
            required = spec.get("required", True)
            if not required:
                from jsonschema.exceptions import best_match

                error = best_match(Draft202012Validator(schema).iter_errors(_defaults(schema)))
                if error is not None:
                    self.problem(
                        (*path, "required"),
                        "an optional input's schema must accept {} once defaults are applied "
                        f"({error.message})",
                    )
                    continue
            properties = schema.get("properties")
            self.inputs[input_id] = DeclaredInput(
                input_id=input_id,
                input_class=SessionInput.from_json_schema(
                    input_id,
                    schema,
                    optional=not required,
                    secret=bool(spec.get("secret", False)),
                    # no_leading_dash is the old name of no_leading_option
                    no_leading_dash=bool(
                        spec.get("no_leading_option", spec.get("no_leading_dash", False))
                    ),
                ),
                alias=alias,
                required=required,
                fields=frozenset(properties) if isinstance(properties, dict) else None,
                many=_lists_and_mappings(properties),
            )

    # --- templates ----------------------------------------------------------


def _lists_and_mappings(properties: Any) -> frozenset[str]:
    """The properties whose schema type is only ``array`` or ``object``."""
    if not isinstance(properties, dict):
        return frozenset()
    many = set()
    for name, schema in properties.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if kinds and kinds <= {"array", "object"}:
            many.add(name)
    return frozenset(many)


def _remote_ref(schema: Any, path: JsonPath = ()) -> JsonPath | None:
    """Where ``schema`` has a ``$ref`` to another document, which would fail only at run time."""
    if isinstance(schema, dict):
        reference = schema.get("$ref")
        if isinstance(reference, str) and not reference.startswith("#"):
            return (*path, "$ref")
        items: Iterable[tuple[Any, Any]] = schema.items()
    elif isinstance(schema, list):
        items = enumerate(schema)
    else:
        return None
    for key, value in items:
        found = _remote_ref(value, (*path, key))
        if found is not None:
            return found
    return None


def _defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    from ..engine.inputs import _with_defaults

    return _with_defaults(schema, {})
