"""Hypothesis strategies that write runner YAML files: valid-ish, then broken.

:func:`from_schema` walks ``schemas/runner.schema.json`` itself (``$ref``,
``if``/``then``/``else``, ``oneOf``/``anyOf``/``allOf``, ``enum``, types,
bounds, patterns) and draws a value that mostly fits it; optional keys come
and go, and strings are drawn from words a user writes, Jinja placeholders
among them.  (hypothesis-jsonschema did not finish resolving this schema's
nested conditionals in five minutes, so the walk is here, and it is meant to
be *valid-ish*: the mutations below break it anyway.)

:func:`yaml_files` then breaks the drawn document the ways a user or an
attacker does: a wrong type at any path, an unknown or misspelled key,
broken Jinja, bad indentation or a tab, huge values (long strings, deep
nesting, a long number, many keys, an alias bomb), and raw oddities (empty
file, a Python tag, bytes that are not UTF-8, a duplicate key).
"""

from __future__ import annotations

import json
import string
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

SCHEMA_PATH = Path(__file__).parents[2] / "schemas" / "runner.schema.json"

#: What a user types in a string field: plain words, shell, paths, Jinja.
WORDS = st.sampled_from(
    [
        "demo",
        "echo hi",
        "make test",
        "NOTES.md",
        "out/report.txt",
        "git-identity",
        "local",
        "docker",
        "none",
        "{{ task.title }}",
        "echo {{ task.title }}",
        "{{ repo.url }}",
        "b@example.com",
        "C",
        "demo.task",
        "TOKEN",
        "python:3.12",
        "",
    ]
)
#: Jinja a user or an attacker writes wrong.
BROKEN_JINJA = st.sampled_from(
    [
        "{{ task.title",
        "{{ }}",
        "{% if %}",
        "{% for x in %}{{ x }}",
        "{{ task.title | nosuchfilter }}",
        "{{ nosuch.input }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ task.title }}}}",
        "{# unclosed comment",
        "{{ task['title'] | attr('__class__') }}",
        "{% raw %}{{ x }}",
        '"{{ task.title }}"',
        "echo '{{ task.title }}'",
    ]
)


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = {**schema()["$defs"][name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def from_schema(node: dict[str, Any] | bool | None = None, depth: int = 0) -> st.SearchStrategy:
    """A value that mostly fits ``node`` (the whole schema when None)."""
    if node is None:
        node = schema()
    if node is True or node == {}:
        return _any_value(depth)
    if node is False:
        return st.none()
    node = _resolve(node)
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "if" in node and ("then" in node or "else" in node):
        base = {k: v for k, v in node.items() if k not in ("if", "then", "else")}
        branches = [node.get("then"), node.get("else")]
        return st.one_of(
            [from_schema({**base, **_resolve(b)}, depth) for b in branches if isinstance(b, dict)]
        )
    for key in ("oneOf", "anyOf"):
        if key in node:
            return st.one_of([from_schema(option, depth) for option in node[key]])
    if "allOf" in node:
        merged = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            merged.update(_resolve(part))
        return from_schema(merged, depth)
    kind = node.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**node, "type": k}, depth) for k in kind])
    if kind == "object" or "properties" in node:
        return _object(node, depth)
    if kind == "array":
        items = node.get("items", {})
        low = node.get("minItems", 0)
        return st.lists(from_schema(items, depth + 1), min_size=low, max_size=max(low, 3))
    if kind == "string":
        if "pattern" in node:
            return st.one_of(st.from_regex(node["pattern"], fullmatch=True), WORDS)
        return st.one_of(WORDS, st.text(string.printable, max_size=20))
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        high = node.get("maximum", low + 1000)
        value = st.integers(int(low), int(high))
        return value if kind == "integer" else st.one_of(value, st.floats(low, high))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return _any_value(depth)


def _object(node: dict[str, Any], depth: int) -> st.SearchStrategy:
    properties = node.get("properties", {})
    required = [k for k in node.get("required", []) if k in properties]
    if depth > 6:  # deep enough: the required keys only
        optional: dict[str, Any] = {}
    else:
        optional = {k: v for k, v in properties.items() if k not in required}
    extra = node.get("additionalProperties")
    strategy = st.fixed_dictionaries(
        {k: from_schema(properties[k], depth + 1) for k in required},
        optional={k: from_schema(v, depth + 1) for k, v in optional.items()},
    )
    if isinstance(extra, dict) and not properties:  # a map: inputs, secrets, env
        keys = st.one_of(
            WORDS.filter(bool), st.from_regex(r"[a-z][a-z0-9_.]{0,12}", fullmatch=True)
        )
        strategy = st.dictionaries(keys, from_schema(extra, depth + 1), max_size=3)
    return strategy


def _any_value(depth: int) -> st.SearchStrategy:
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), WORDS)
    if depth > 4:
        return leaves
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(WORDS.filter(bool), inner, max_size=3)
        ),
        max_leaves=6,
    )


# -- mutations --------------------------------------------------------------


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into ``value`` (the root is ``()``)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], tuple(rest), new)}
    copy = list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


def _at(value: Any, path: tuple) -> Any:
    for part in path:
        value = value[part]
    return value


WRONG_TYPES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just([]),
    st.just({}),
    st.just(["a", 1]),
    st.just({"x": 1}),
    WORDS,
)


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    """A schema-drawn document with zero to three structural mutations."""
    document = draw(from_schema())
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        target = _at(document, path)
        how = draw(st.sampled_from(["type", "key", "jinja", "huge", "drop"]))
        if how == "type":
            document = _replace(document, path, draw(WRONG_TYPES))
        elif how == "key" and isinstance(target, dict):
            known = list(target) or ["name"]
            key = draw(
                st.one_of(
                    st.sampled_from(known).map(lambda k: str(k)[:-1] + "x" if k else "x"),
                    st.sampled_from(["nmae", "on_craete", "runn", "__proto__", "1", "true"]),
                    st.text(string.ascii_letters, min_size=1, max_size=8),
                )
            )
            document = _replace(document, path, {**target, key: draw(WORDS)})
        elif how == "jinja" and isinstance(target, str):
            document = _replace(document, path, draw(BROKEN_JINJA))
        elif how == "huge":
            document = _replace(document, path, draw(HUGE))
        elif how == "drop" and isinstance(target, dict) and target:
            gone = draw(st.sampled_from(list(target)))
            document = _replace(document, path, {k: v for k, v in target.items() if k != gone})
    return document


HUGE = st.one_of(
    st.integers(10_000, 200_000).map(lambda n: "x" * n),
    st.integers(10_000, 200_000).map(lambda n: "echo " + "{{ task.title }} " * (n // 20)),
    st.just(10**400),
    st.just(1e308 * 10),
    st.integers(50, 400).map(lambda n: _nested(n)),
    st.integers(1_000, 5_000).map(lambda n: {f"k{i}": i for i in range(n)}),
    st.integers(1_000, 5_000).map(lambda n: ["echo"] * n),
)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


def dump(document: Any) -> str:
    """YAML as a user writes it (block style, keys in order)."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)


ODDITIES = st.sampled_from(
    [
        "",
        "\n",
        "---\n...\n",
        "[]",
        "just a string",
        "version: 1\nversion: 1\nagent: {model: m}\n",
        "version: 1\nagent: !!python/object/apply:os.system ['echo hi']\n",
        "version: 1\nagent:\n\tmodel: m\n",
        "version: 1\nagent:\n  model: m\n environment: {}\n",
        'version: 1\nagent: {model: "m}\n',
        "version: 1\nagent:\n  model: m\n  environment:\n    hooks:\n      - run: echo a: b\n",
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e]\n"
        "g: [*f, *f, *f, *f, *f, *f, *f, *f]\n",
        "version: 1\nagent: {model: m, name: *undefined}\n",
        "version: 1\nagent: {model: m}\n" + "x: [" * 500,
        "\ufeffversion: 1\nagent: {model: m}\n",
        "version: 1\nagent: {model: m\x00}\n",
        "version: 1\nagent: {model: m\x1b[2J}\n",
        "%YAML 1.1\n---\nversion: 1\nagent: {model: m}\n",
        "version: 1\n---\nversion: 1\n",
    ]
)


@st.composite
def text_mutations(draw: st.DrawFn, text: str) -> str:
    """Break the YAML text itself: indentation, a tab, a cut, a stray character."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(0, 2))):
        index = draw(st.integers(0, max(0, len(lines) - 1)))
        how = draw(st.sampled_from(["indent", "dedent", "tab", "cut", "char", "quote"]))
        line = lines[index]
        if how == "indent":
            lines[index] = " " * draw(st.integers(1, 3)) + line
        elif how == "dedent":
            lines[index] = line[draw(st.integers(1, 3)) :]
        elif how == "tab":
            lines[index] = "\t" + line.lstrip(" ")
        elif how == "cut":
            lines = lines[: index + 1]
            lines[index] = line[: draw(st.integers(0, len(line)))]
        elif how == "char":
            position = draw(st.integers(0, len(line)))
            stray = draw(
                st.sampled_from([":", "- ", "{", "[", "'", '"', "&", "*", "!", "%", "@", "`", "|"])
            )
            lines[index] = line[:position] + stray + line[position:]
        else:
            lines[index] = line.replace(": ", ': "', 1)
    return "\n".join(lines)


@st.composite
def yaml_files(draw: st.DrawFn) -> bytes:
    """The bytes of one runner YAML file: schema-drawn, maybe broken."""
    kind = draw(st.sampled_from(["document", "document", "document", "text", "oddity", "bytes"]))
    if kind == "oddity":
        return draw(ODDITIES).encode("utf-8", "surrogatepass")
    text = dump(draw(mutated_documents()))
    if kind == "text":
        text = draw(text_mutations(text))
    data = text.encode("utf-8")
    if kind == "bytes":
        position = draw(st.integers(0, len(data)))
        data = (
            data[:position]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"]))
            + data[position:]
        )
    return data
