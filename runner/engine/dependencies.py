"""``Depends()``: how a hook method asks for session inputs.

A hook method declares ``*, repo: Annotated[RepositoryContext, Depends()]``.
We read those declarations once, when an agent is built, so a wrong signature
is an :class:`SdkError` before any session exists, and every input a session
needs is known (and validated) before its sandbox is created.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import SdkError, SessionInputError
from .inputs import SessionInput


class Depends:
    """Marker for ``Annotated[SomeSessionInput, Depends()]`` keyword parameters."""

    def __repr__(self) -> str:
        return "Depends()"


@dataclass(frozen=True)
class Dependency:
    """One keyword parameter of one hook method that receives a session input."""

    consumer: str  # e.g. "sandbox hook RecordRepository.on_create"
    parameter: str
    input_class: type[SessionInput]

    @property
    def input_id(self) -> str:
        return self.input_class.input_id


def _depends_marker(annotation: Any) -> tuple[Any, bool]:
    """Split ``Annotated[T, Depends()]`` into ``(T, True)``; anything else into ``(a, False)``."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        if any(isinstance(m, Depends) or m is Depends for m in metadata):
            return base, True
    return annotation, False


def method_dependencies(method: Callable[..., Any], *, consumer: str) -> list[Dependency]:
    """The dependencies of one bound hook method (the first parameter is ``ctx``)."""
    signature = inspect.signature(method)
    try:
        hints = typing.get_type_hints(method, include_extras=True)
    except NameError as exc:
        raise SdkError(
            f"{consumer}: cannot resolve an annotation: {exc}; define the class at "
            "module level (string annotations are resolved in the module's namespace)"
        ) from exc
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise SdkError(f"{consumer}: the first parameter must be the context, e.g. (self, ctx)")
    dependencies: list[Dependency] = []
    for parameter in parameters[1:]:
        annotation = hints.get(parameter.name, parameter.annotation)
        base, is_dependency = _depends_marker(annotation)
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if not is_dependency:
            if parameter.default is inspect.Parameter.empty:
                raise SdkError(
                    f"{consumer}: parameter {parameter.name!r} has no default and is not "
                    "a dependency; declare it as "
                    f"*, {parameter.name}: Annotated[YourInput, Depends()]"
                )
            continue
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise SdkError(
                f"{consumer}: Depends() parameter {parameter.name!r} must be keyword-only; "
                f"put it after a bare '*': (self, ctx, *, {parameter.name}: ...)"
            )
        if not (isinstance(base, type) and issubclass(base, SessionInput)):
            raise SdkError(
                f"{consumer}: Depends() parameter {parameter.name!r} is annotated with "
                f"{base!r}, which is not a SessionInput subclass"
            )
        dependencies.append(Dependency(consumer, parameter.name, base))
    return dependencies


def check_unique_input_ids(dependencies: Iterable[Dependency]) -> dict[str, type[SessionInput]]:
    """Map each ``input_id`` to its class; two Python classes for one id is an SdkError.

    A class declared by schema (an input of a YAML file) may share its id with
    one Python class: a Python hook can then ``Depends`` on a YAML-declared
    input with its own class, and the value is validated against both.
    """
    seen: dict[str, Dependency] = {}
    for dependency in dependencies:
        first = seen.setdefault(dependency.input_id, dependency)
        if first.input_class.__from_schema__ and not dependency.input_class.__from_schema__:
            seen[dependency.input_id] = dependency  # prefer the Python class as the canonical one
            continue
        if first.input_class.__from_schema__ or dependency.input_class.__from_schema__:
            continue  # a declared (YAML) schema may share its id with one Python class
        if first.input_class is not dependency.input_class:
            raise SdkError(
                f"two SessionInput classes share input_id {dependency.input_id!r}: "
                f"{_qualified(first.input_class)} (used by {first.consumer}) and "
                f"{_qualified(dependency.input_class)} (used by {dependency.consumer})"
            )
    return {input_id: dep.input_class for input_id, dep in seen.items()}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve_inputs(
    session_inputs: Mapping[str, Any] | None,
    dependencies: Iterable[Dependency],
) -> dict[str, SessionInput]:
    """Validate the caller's inputs against what the hooks need.

    Returns the validated instances by ``input_id``.  Inputs nobody consumes
    are kept (a later turn or tool may use them) but must still be instances
    whose ``input_id`` matches their key.
    """
    given = dict(session_inputs or {})
    for key in given:
        if not isinstance(key, str):
            raise SessionInputError(f"session input keys must be input_id strings, got {key!r}")
    resolved: dict[str, SessionInput] = {}
    for dependency in dependencies:
        input_id = dependency.input_id
        if input_id in resolved:
            # Another class already took this id: the value must satisfy this one too.
            dependency.input_class.from_value(resolved[input_id], consumer=dependency.consumer)
            continue
        if input_id not in given:
            provided = dependency.input_class.__provide__()
            if provided is not None:
                given[input_id] = provided
        if input_id not in given and dependency.input_class.__optional__:
            resolved[input_id] = dependency.input_class.from_value({}, consumer=dependency.consumer)
            continue
        if input_id not in given:
            raise SessionInputError(
                f"{dependency.consumer} needs session input {input_id!r} "
                f"({dependency.input_class.__qualname__}), which was not given; "
                + _how_to_pass(dependency.input_class),
                input_id=input_id,
            )
        value = given[input_id]
        if isinstance(value, SessionInput) and value.input_id != input_id:
            raise SessionInputError(
                f"{dependency.consumer}: session_inputs key {input_id!r} holds a "
                f"{type(value).__qualname__} whose input_id is {value.input_id!r}; "
                "the key must equal the value's input_id",
                input_id=input_id,
            )
        resolved[input_id] = dependency.input_class.from_value(value, consumer=dependency.consumer)
    for key, value in given.items():
        if key in resolved:
            continue
        if not isinstance(value, SessionInput):
            known = ", ".join(sorted(resolved)) or "none"
            raise SessionInputError(
                f"session input {key!r} is not declared by any hook (declared: {known}); "
                "check the id, or pass a SessionInput instance",
                input_id=key,
            )
        if value.input_id != key:
            raise SessionInputError(
                f"session_inputs key {key!r} holds a {type(value).__qualname__} whose "
                f"input_id is {value.input_id!r}; the key must equal the value's input_id",
                input_id=key,
            )
        resolved[key] = value
    return resolved


def _how_to_pass(input_class: type[SessionInput]) -> str:
    """The advice of a "not given" error, for whoever can give the input.

    Only inputs declared in a YAML file can be given on the command line
    (``--input`` knows declared ids only), and the CLI meets this error inside
    a run it only reports; so those get the flags first, and the Python form
    after.  Inputs of Python classes keep the Python advice alone.
    """
    input_id, name = input_class.input_id, input_class.__qualname__
    if not input_class.__from_schema__:
        return f"pass session_inputs={{{input_id!r}: {name}(...)}}"
    fields = input_class.json_schema().get("required") or ["FIELD"]
    flags = " ".join(f"--input {input_id}.{field}=VALUE" for field in fields)
    return f"pass {flags} or --inputs FILE (in Python: session_inputs={{{input_id!r}: {{...}}}})"
