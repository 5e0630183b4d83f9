"""Which hooks may be cached, and what identifies them: the backend-free half of snapshots.

A hook is *cacheable* when its ``on_create`` leaves a workspace that depends
only on the hook's definition, the inputs it reads, the image and the setup
script, so a backend that can snapshot a sandbox (Docker) may run it once and
start later sessions from the result.  Declare it:

- ``cache = True`` (class or instance attribute): the definition is the
  class's module and qualname plus the instance's attributes (``vars(hook)``,
  which holds what the constructor stored); they must be JSON values (str,
  int, float, bool, None, lists, dicts with str keys), else caching is
  refused with a ``SnapshotError`` naming the attribute.
- ``cache_key(self) -> str | None``: a key of your own (the module and
  qualname are added); it wins over ``cache`` and ``vars``.  Returning None
  means "not cacheable".

Only a *leading run* of cacheable hooks is cached: the snapshot is taken
after the last one's ``on_create`` and before the first hook that is not
cacheable, so a cacheable hook after a non-cacheable one runs every time.

Secrets never go into a snapshot.  A hook whose ``Depends`` reads a secret
input is refused; ``ctx`` gives no secret either, but what a Python hook
reads from elsewhere (the host's environment, files) cannot be checked, so
a cached hook must not fetch secrets itself.  YAML hooks with ``cache: true``
are checked when the file is compiled (no ``secrets:``, ``secret_file:``).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .errors import SdkError

#: Bumped when what goes into a key changes, so old snapshots stop matching.
KEY_FORMAT = "sandbox-runner-snapshot-v1"


class SnapshotError(SdkError):
    """A hook asked to be cached but its definition cannot be read for a key."""


class SnapshotWarning(UserWarning):
    """Hooks asked to be cached on a backend that cannot snapshot: their
    ``on_create`` runs in every session (YAML refuses this at validation)."""


_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("runner_snapshots", default=True)


@contextlib.contextmanager
def snapshots_disabled() -> Iterator[None]:
    """Neither use nor write snapshots for sessions started in this block (``--no-cache``)."""
    token = _enabled.set(False)
    try:
        yield
    finally:
        _enabled.reset(token)


def snapshots_enabled() -> bool:
    return _enabled.get()


def hook_definition(hook: Any) -> Any | None:
    """What identifies a cacheable hook's ``on_create``, or None if it is not cacheable."""
    where = f"{type(hook).__module__}.{type(hook).__qualname__}"
    yaml_definition = getattr(hook, "cache_definition", None)
    if yaml_definition is not None:  # set by the YAML compiler: the hook's normalized data
        return {"yaml": yaml_definition}
    cache_key = getattr(hook, "cache_key", None)
    if callable(cache_key):
        key = cache_key()
        if key is None:
            return None
        if not isinstance(key, str):
            raise SnapshotError(f"{where}.cache_key() must return a str or None, got {key!r}")
        return {"class": where, "cache_key": key}
    if getattr(hook, "cache", False) is not True:
        return None
    attributes = {}
    for name, value in sorted(vars(hook).items()):
        try:
            attributes[name] = json.loads(json.dumps(value, sort_keys=True, allow_nan=False))
        except (TypeError, ValueError):
            raise SnapshotError(
                f"hook {hook.display_name} ({where}) has cache = True but its attribute "
                f"{name!r} ({type(value).__name__}) is not a JSON value, so it cannot be part of "
                "a snapshot key; define cache_key(self) -> str to give the key yourself"
            ) from None
    return {"class": where, "attributes": attributes}


def cached_prefix(hooks: Sequence[Any]) -> list[Any]:
    """The definitions of the leading run of cacheable hooks (empty: nothing is cached)."""
    definitions = []
    for hook in hooks:
        definition = hook_definition(hook)
        if definition is None:
            break
        definitions.append(definition)
    return definitions


def snapshot_key(parts: Mapping[str, Any]) -> str:
    """The sha256 of ``parts`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps({"format": KEY_FORMAT, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
