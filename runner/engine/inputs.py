"""Session inputs: typed values a session is started with.

A :class:`SessionInput` subclass declares its fields with annotations, the way
a dataclass does.  From those annotations we derive a JSON Schema once, at
class creation, and validate every instance with ``jsonschema``: the same
engine that validates inputs declared in YAML, so Python and YAML inputs obey
one set of rules.
"""

from __future__ import annotations

import copy
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, Union

from ..core.errors import SdkError, SessionInputError
from ..core.redaction import secret_text_forms

_MISSING = object()

_SCALARS: dict[type, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
}


def annotation_schema(annotation: Any, *, where: str) -> dict[str, Any]:
    """The JSON Schema of one field annotation; an unsupported type is an SdkError."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return annotation_schema(args[0], where=where)
    if annotation in _SCALARS:
        return dict(_SCALARS[annotation])
    if annotation is type(None):
        return {"type": "null"}
    if annotation is Any:
        return {}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [annotation_schema(arg, where=where) for arg in args]}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            args = args[:1]
        if origin is tuple and args and args[-1] is not Ellipsis and len(args) > 1:
            return {
                "type": "array",
                "prefixItems": [annotation_schema(a, where=where) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = annotation_schema(args[0], where=where)
        return schema
    if origin is dict or annotation is dict:
        schema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise SdkError(f"{where}: dict keys must be str, got {args[0]!r}")
            schema["additionalProperties"] = annotation_schema(args[1], where=where)
        return schema
    raise SdkError(
        f"{where}: unsupported type {annotation!r}; use str, int, float, bool, "
        "list, dict[str, ...], Literal, Optional or a union of those"
    )


def _validate(
    schema: dict[str, Any],
    value: Any,
    *,
    input_id: str,
    consumer: str | None,
    secret: bool = False,
) -> None:
    """Raise SessionInputError with the best jsonschema error, or return.

    For a secret input the message names the rule that failed, never the value.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    errors = list(Draft202012Validator(schema).iter_errors(value))
    # A misspelt field is the likeliest mistake, and the error that says so
    # (not "'repository' is a required property") is the one to report.
    misspelt = next((e for e in errors if _unknown_field(e)), None)
    error = misspelt or best_match(errors)
    if error is None:
        return
    location = ".".join(str(p) for p in error.absolute_path)
    field = f" field {location!r}" if location else ""
    who = f"{consumer}: " if consumer else ""
    reason = (
        f"it fails the schema's {error.validator!r} rule (the value is secret and not shown)"
        if secret
        else (_unknown_field(error) or error.message)
    )
    raise SessionInputError(
        f"{who}session input {input_id!r}{field} is invalid: {reason}",
        input_id=input_id,
    )


def _unknown_field(error: Any) -> str | None:
    """``unknown field 'repo'; did you mean 'repository'?`` for an error a misspelt key caused.

    Two errors show one: ``additionalProperties: false`` refusing a key, and a
    missing required field with an undeclared key close to its name (schemas
    that allow extra keys).  None for every other error.
    """
    instance, schema = error.instance, error.schema
    if not isinstance(instance, Mapping) or not isinstance(schema, Mapping):
        return None
    declared = [str(k) for k in schema.get("properties") or {}]
    if error.validator == "additionalProperties" and error.validator_value is False:
        candidates = declared  # with no close name, jsonschema's message names the keys
    elif error.validator == "required":
        candidates = [f for f in error.validator_value if f not in instance]
    else:
        return None
    patterns = schema.get("patternProperties") or {}
    undeclared = [
        str(k)
        for k in instance
        if k not in declared and not any(re.search(p, str(k)) for p in patterns)
    ]
    for key in undeclared:
        if close := closest(key, candidates):
            others = ", ".join(repr(k) for k in undeclared if k != key)
            more = f" (also unknown: {others})" if others else ""
            return f"unknown field {key!r}; did you mean {close!r}?{more}"
    return None


def closest(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``name`` is likely a misspelling or a shortening of.

    difflib alone misses shortenings (``repo`` for ``repository``).
    """
    import difflib

    names = list(names)
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return close[0]
    return next((n for n in names if len(name) >= 3 and n.startswith(name)), None)


class SessionInput:
    """Base class of typed session inputs.

    Subclass it with an ``input_id`` class variable and annotated fields::

        class RepositoryContext(SessionInput):
            input_id = "acme.repository"
            repository: str
            revision: str = "main"

    Instances are validated against :meth:`json_schema` when constructed and
    are read-only afterwards.  Two classes may share an ``input_id`` (a module
    reloaded, a YAML file loaded twice); an *agent* whose hooks need two
    different classes with one ``input_id`` is refused when it is built.
    """

    input_id: ClassVar[str]
    #: An optional input that is not given is built from ``{}`` (its defaults).
    __optional__: ClassVar[bool] = False
    #: True for classes built by ``from_json_schema`` (inputs declared in YAML).
    __from_schema__: ClassVar[bool] = False
    #: A secret input's values never appear in messages, events or logs.
    __secret__: ClassVar[bool] = False
    #: Refuse string values starting with "-", so none can pass for an option.
    __no_leading_dash__: ClassVar[bool] = False

    @classmethod
    def __provide__(cls) -> Any:
        """The value to use when the caller gives none (None: the input is missing).

        Secrets declared in YAML override this to read the host's environment
        and files at session start, before any sandbox exists.
        """
        return None

    __schema__: ClassVar[dict[str, Any]]
    __field_names__: ClassVar[tuple[str, ...]]
    _data: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__schema__" in cls.__dict__ or cls.__from_schema__:  # schema given, not derived
            return
        input_id = cls.__dict__.get("input_id", getattr(cls, "input_id", None))
        if not isinstance(input_id, str) or not input_id.strip():
            raise SdkError(
                f"SessionInput {cls.__qualname__} needs a class variable "
                "input_id = '<namespace>.<name>' (a non-empty string)"
            )
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except NameError as exc:
            raise SdkError(
                f"SessionInput {cls.__qualname__}: cannot resolve a type: {exc}"
            ) from exc
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, annotation in hints.items():
            if name.startswith("_") or typing.get_origin(annotation) is ClassVar:
                continue
            if annotation is ClassVar or name == "input_id":
                continue
            field_schema = annotation_schema(annotation, where=f"{cls.__qualname__}.{name}")
            default = getattr(cls, name, _MISSING)
            if default is _MISSING:
                required.append(name)
            else:
                try:
                    json.dumps(default)
                except TypeError as exc:
                    raise SdkError(
                        f"{cls.__qualname__}.{name}: the default must be JSON data, got {default!r}"
                    ) from exc
                field_schema["default"] = copy.deepcopy(default)
            properties[name] = field_schema
        cls.__field_names__ = tuple(properties)
        cls.__schema__ = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": input_id,
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    @classmethod
    def from_json_schema(
        cls,
        input_id: str,
        schema: Mapping[str, Any],
        *,
        name: str | None = None,
        optional: bool = False,
        secret: bool = False,
        no_leading_dash: bool = False,
    ) -> type[SessionInput]:
        """A SessionInput class whose schema is given rather than derived.

        This is how inputs declared in YAML become classes Python hooks can
        ``Depends`` on.  ``schema`` must describe an object; its top-level
        ``properties`` become the fields, and ``default`` values (at any
        depth of nested object properties) are applied to missing fields.
        """
        properties = schema.get("properties", {})
        class_name = name or "".join(
            part.capitalize() for part in input_id.replace("-", "_").replace(".", "_").split("_")
        )
        namespace = {
            "input_id": input_id,
            "__schema__": copy.deepcopy(dict(schema)),
            "__field_names__": tuple(properties),
            "__optional__": optional,
            "__from_schema__": True,
            "__secret__": secret,
            "__no_leading_dash__": no_leading_dash,
            "__module__": __name__,
        }
        return type(class_name, (cls,), namespace)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema every value of this input must satisfy (a copy)."""
        return copy.deepcopy(cls.__schema__)

    @classmethod
    def from_value(cls, value: Any, *, consumer: str | None = None) -> SessionInput:
        """Build an instance from an instance or a mapping, validating it.

        ``consumer`` names who needs the input, so the error says so.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, SessionInput):
            if value.input_id != cls.input_id:
                raise SessionInputError(
                    f"{consumer + ': ' if consumer else ''}expected session input "
                    f"{cls.input_id!r}, got {type(value).__qualname__} with input_id "
                    f"{value.input_id!r}",
                    input_id=cls.input_id,
                )
            value = value.to_dict()
        if not isinstance(value, Mapping):
            raise SessionInputError(
                f"{consumer + ': ' if consumer else ''}session input {cls.input_id!r} must be "
                f"a {cls.__qualname__} or a mapping, got {type(value).__name__}",
                input_id=cls.input_id,
            )
        return cls._build(dict(value), consumer=consumer)

    @classmethod
    def _build(cls, data: dict[str, Any], *, consumer: str | None) -> SessionInput:
        data = _with_defaults(cls.__schema__, copy.deepcopy(data))
        _validate(
            cls.__schema__, data, input_id=cls.input_id, consumer=consumer, secret=cls.__secret__
        )
        _reject_nul(data, input_id=cls.input_id, consumer=consumer)
        if cls.__no_leading_dash__:
            _reject_leading_dash(data, input_id=cls.input_id, consumer=consumer)
        self = object.__new__(cls)
        for name in cls.__field_names__:
            object.__setattr__(self, name, data.get(name))
        object.__setattr__(self, "_data", data)
        return self

    def __init__(self, **fields: Any) -> None:
        built = type(self)._build(fields, consumer=None)
        object.__setattr__(self, "__dict__", built.__dict__)

    def to_dict(self) -> dict[str, Any]:
        """The validated value, defaults applied, as plain JSON data (a deep copy)."""
        return copy.deepcopy(self._data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__qualname__} is read-only")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionInput):
            return NotImplemented
        return self.input_id == other.input_id and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.input_id, json.dumps(self.to_dict(), sort_keys=True)))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"{type(self).__qualname__}({fields})"


def _with_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """Fill in ``default`` of missing object properties, recursively."""
    if not isinstance(value, dict):
        return value
    for name, subschema in (schema.get("properties") or {}).items():
        if not isinstance(subschema, Mapping):
            continue
        if name not in value and "default" in subschema:
            value[name] = copy.deepcopy(subschema["default"])
        if name in value:
            value[name] = _with_defaults(subschema, value[name])
    return value


def _scalar_text(value: Any) -> str | None:
    """A scalar as a template prints it (``true``, ``-5``, ``2.5``); None for the rest.

    The rules that look at values as text (no_leading_dash, secret scrubbing)
    must see numbers and booleans the way a command receives them.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def _scalars(value: Any, path: str = "") -> Iterable[tuple[str, str]]:
    """(dotted path, text) for every string, number and boolean inside ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _scalars(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _scalars(item, f"{path}.{index}" if path else str(index))
    elif (text := _scalar_text(value)) is not None:
        yield path, text


#: What a word may not start with when its input is declared ``no_leading_option``
#: (old name ``no_leading_dash``): ``-x`` and ``--opt`` are options to most
#: programs, ``+cmd`` to ``ex``, ``vim``, ``less`` and ``more`` (which run it),
#: ``@file`` a file of options to GCC, binutils (``nm @opts`` read
#: ``--plugin=./x.so`` from it: the seventeenth review) and javac.
OPTION_STARTS = ("-", "+", "@")


def _reject_leading_dash(value: Any, *, input_id: str, consumer: str | None) -> None:
    """Numbers count too: ``-5`` reaches a command as the word ``-5``.  The word
    a template prints is checked again after its filters (runner.config.templates)."""
    for path, text in _scalars(value):
        if text.startswith(OPTION_STARTS):
            who = f"{consumer}: " if consumer else ""
            raise SessionInputError(
                f"{who}session input {input_id!r} field {path!r} starts with {text[0]!r}, which "
                "this input refuses (no_leading_option): a command could read it as an option",
                input_id=input_id,
            )


def _reject_nul(value: Any, *, input_id: str, consumer: str | None) -> None:
    """No string may hold NUL: no command line or file name can carry one."""
    for path, text in _scalars(value):  # (a number's text never holds one)
        if "\0" in text:
            who = f"{consumer}: " if consumer else ""
            where = f" field {path!r}" if path else ""
            raise SessionInputError(
                f"{who}session input {input_id!r}{where} contains a NUL character",
                input_id=input_id,
            )


def secret_strings(values: Iterable[SessionInput]) -> list[str]:
    """Every scalar inside the secret inputs among ``values``, longest first, in
    each form it may be printed in (see ``core.redaction.secret_forms``).  Numbers and
    booleans count, as their text (``true``, ``8080``); a text shorter than
    3 characters is left out: scrubbing it would mangle all output."""
    found: set[str] = set()
    for value in values:
        if value.__secret__:
            for _, text in _scalars(value.to_dict()):
                found.update(secret_text_forms(text))
    return sorted(found, key=len, reverse=True)
