"""Safe YAML loading that remembers where every value came from.

PyYAML's ``safe_load`` is safe but forgets positions, accepts duplicate keys
(the last wins, silently), expands aliases (the "billion laughs" bomb), and
follows YAML 1.1, where ``no``, ``on`` and ``0755`` are not strings.  This
loader composes the node tree with PyYAML's safe machinery and builds the
Python data itself, so that:

- every mapping value and sequence item has a 1-based (line, column);
- a duplicate key at any depth is an error naming both lines;
- anchors, aliases and tags other than the standard ones are errors;
- documents above ``MAX_BYTES`` are refused before parsing, files other than
  regular files (FIFOs, devices) before reading;
- scalars resolve by the YAML 1.2 core schema: only ``true``/``false`` are
  booleans, ``yes``/``no``/``on``/``off`` stay strings, and a number with a
  leading zero (``0755``) stays a string.

The common YAML mistakes get a hint that names the fix (``_syntax_hint``):
a tab in the indentation, a value starting with ``{{`` left unquoted (YAML
reads it as a mapping), and ``: `` inside an unquoted value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from .errors import ConfigError, ConfigProblem, JsonPath
from .host_paths import read_regular_file

MAX_BYTES = 1_000_000
#: Far deeper than any real config; keeps hostile files away from Python's recursion limit.
MAX_DEPTH = 64

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|(?:0|[1-9][0-9]*)(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


class _Resolver(BaseResolver):
    """YAML 1.2 core schema resolution (BaseResolver has no implicit resolvers)."""


for _tag, _regexp, _first in (
    ("tag:yaml.org,2002:bool", _BOOL, list("tTfF")),
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", _INT, list("-+0123456789")),
    ("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789")),
):
    _Resolver.add_implicit_resolver(_tag, _regexp, _first)


class _Loader(Reader, Scanner, Parser, Composer, _Resolver):
    """Composes nodes only; construction is ours.  Aliases and anchors are refused."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _Resolver.__init__(self)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise _Refused("aliases (*name) are not allowed; repeat the value instead", event)
        if getattr(event, "anchor", None) is not None:
            raise _Refused("anchors (&name) are not allowed; repeat the value instead", event)
        return super().compose_node(parent, index)


try:  # libyaml's C parser composes nodes ~10x faster; the pure-Python one is the fallback
    from yaml._yaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CParser = None


if _CParser is not None:

    class _CLoader(_CParser, _Resolver):  # type: ignore[misc, valid-type]
        """Composes nodes in C; anchors and aliases are refused by a first pass."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _Resolver.__init__(self)


def _refuse_anchors(text: str) -> None:
    """Raise ``_Refused`` at the first anchor or alias (events only, in C)."""
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, AliasEvent):
            raise _Refused("aliases (*name) are not allowed; repeat the value instead", event)
        if getattr(event, "anchor", None) is not None:
            raise _Refused("anchors (&name) are not allowed; repeat the value instead", event)


class _Refused(Exception):
    def __init__(self, message: str, event: Any) -> None:
        super().__init__(message)
        self.mark = event.start_mark


@dataclass
class Document:
    """Loaded YAML data plus where each part of it came from."""

    file: str
    data: Any
    text: str
    positions: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    nodes: dict[JsonPath, Node] = field(default_factory=dict)

    def position(self, path: JsonPath) -> tuple[int, int]:
        """The closest known (line, column) for a path (its value, else its parent)."""
        for length in range(len(path), -1, -1):
            found = self.positions.get(tuple(path[:length]))
            if found:
                return found
        return (1, 1)

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> ConfigProblem:
        where = self.key_positions.get(tuple(path)) if at_key else None
        line, column = where or self.position(path)
        return ConfigProblem(self.file, line, column, message, tuple(path))


def _position(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    def __init__(self, document: Document) -> None:
        self.document = document
        self.problems: list[ConfigProblem] = []

    def problem(self, node: Node, path: JsonPath, message: str) -> None:
        line, column = _position(node)
        self.problems.append(ConfigProblem(self.document.file, line, column, message, path))

    def build(self, node: Node, path: JsonPath) -> Any:
        if len(path) > MAX_DEPTH:
            self.problem(node, path, f"nesting deeper than {MAX_DEPTH} levels")
            return None
        self.document.positions[path] = _position(node)
        self.document.nodes[path] = node
        if node.tag not in _STANDARD_TAGS:
            self.problem(node, path, f"tag {node.tag!r} is not allowed")
            return None
        if isinstance(node, MappingNode):
            return self.mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, ScalarNode)
        return self.scalar(node, path)

    def mapping(self, node: MappingNode, path: JsonPath) -> dict[str, Any]:
        result: dict[str, Any] = {}
        first_seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            plain = isinstance(key_node, ScalarNode) and not key_node.style  # C: "", Python: None
            if key_node.tag == "tag:yaml.org,2002:merge" or (plain and key_node.value == "<<"):
                self.problem(key_node, path, "merge keys (<<) are not allowed")
                continue
            if not isinstance(key_node, ScalarNode):
                template = _template_value(self.document.text, node, path)
                if template is not None:
                    self.problem(node, path, template)
                else:
                    self.problem(key_node, path, "mapping keys must be plain strings")
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in first_seen:
                self.problem(
                    key_node,
                    (*path, key),
                    f"duplicate key {key!r} (lines {first_seen[key]} and {line}); "
                    "each key may appear once",
                )
                continue
            first_seen[key] = line
            self.document.key_positions[(*path, key)] = _position(key_node)
            result[key] = self.build(value_node, (*path, key))
        return result

    def scalar(self, node: ScalarNode, path: JsonPath) -> Any:
        value = node.value
        tag = node.tag
        try:
            if tag == "tag:yaml.org,2002:bool":
                return value.lower() == "true"
            if tag == "tag:yaml.org,2002:null":
                return None
            if tag == "tag:yaml.org,2002:int":
                return int(value, 0) if value[:2] in ("0o", "0x") else int(value)
            if tag == "tag:yaml.org,2002:float":
                return float(value.lower().replace(".inf", "inf").replace(".nan", "nan"))
        except ValueError:
            self.problem(node, path, f"{value!r} is not a valid {tag.rsplit(':', 1)[-1]}")
            return None
        return value


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _line(text: str, index: int) -> str:
    lines = _lines(text)
    return lines[index].rstrip("\r") if 0 <= index < len(lines) else ""


def _quoted(value: str) -> str:
    """``value`` as a YAML quoted scalar: double quotes unless it holds ``"`` or ``\\``."""
    if '"' not in value and "\\" not in value:
        return f'"{value}"'
    return "'" + value.replace("'", "''") + "'"


#: A key (after an optional ``- ``) and the ``:`` that ends it, at the start of a line.
_KEY = re.compile(r"^(\s*(?:-\s+)*)([^\s:#'\"{\[][^:#]*?)\s*:(?:\s|$)")
#: A ``{{`` where a plain scalar would start: at the line's start, after ``- ``, ``: ``,
#: or inside a flow collection after ``[``, ``{`` or ``,``.
_TEMPLATE_START = re.compile(r"(?:^\s*|(?<=[:\-])\s+|(?<=[\[,])\s*)\{\{")

TEMPLATE_HINT = "YAML: quote a value that starts with {{ (YAML reads {{ x }} as a mapping)"


def _template_fix(prefix: str, value: str, where: JsonPath = ()) -> str:
    """``write KEY: "VALUE"`` for a ``{{`` value, as the line would read quoted."""
    key = _KEY.match(prefix + " ")
    if prefix.rstrip().endswith(":") and key is not None:
        return f"write {key.group(2)}: {_quoted(value)}"
    if prefix.strip().endswith("-") or (where and isinstance(where[-1], int)):
        return f"write - {_quoted(value)}"
    if where and isinstance(where[-1], str):
        return f"write {where[-1]}: {_quoted(value)}"
    return 'write it in quotes, e.g. env: {N: "{{ x }}"}'


def _template_value(text: str, node: MappingNode, path: JsonPath) -> str | None:
    """The hint when a mapping ``node`` is really an unquoted ``{{ ... }}`` value."""
    start, end = node.start_mark, node.end_mark
    line = _line(text, start.line)
    if not line[start.column :].startswith("{{"):
        return None
    fix = 'write it in quotes, e.g. env: {N: "{{ x }}"}'
    if end.line == start.line:
        fix = _template_fix("", line[start.column : end.column], path)
    return f"{TEMPLATE_HINT}; {fix}"


def _template_on_line(text: str, index: int) -> tuple[int, int, str] | None:
    """An unquoted ``{{`` value on line ``index``: its (line, column) and the hint."""
    line = _line(text, index)
    for match in _TEMPLATE_START.finditer(line):
        column = match.end() - 2
        before = line[:column]
        if before.count('"') % 2 or before.count("'") % 2:
            continue  # inside a quoted scalar: a template in quotes is fine
        flow = any(c in before for c in "[{")
        value = line[column:]
        comment = value.find(" #")
        value = (value[:comment] if comment >= 0 else value).rstrip()
        fix = (
            'write it in quotes, e.g. env: {N: "{{ x }}"}'
            if flow
            else _template_fix(before.rstrip(), value)
        )
        return index + 1, column + 1, f"{TEMPLATE_HINT}; {fix}"
    return None


def _syntax_hint(text: str, exc: yaml.MarkedYAMLError) -> tuple[int, int, str] | None:
    """(line, column, message) naming the fix, for the YAML mistakes people make most."""
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return None
    problem = exc.problem or ""
    line = _line(text, mark.line)
    found = line[mark.column : mark.column + 1]
    if found == "\t" or "tab" in problem:
        indent = len(line) - len(line.lstrip(" \t"))
        column = line.find("\t", 0, indent) if "\t" in line[:indent] else mark.column
        return (
            mark.line + 1,
            column + 1,
            "YAML: a tab character; YAML indents with spaces only, replace the tab with spaces",
        )
    for index in dict.fromkeys(
        m.line for m in (exc.context_mark, exc.problem_mark) if m is not None
    ):
        template = _template_on_line(text, index)
        if template is not None:
            return template
    if problem.startswith("mapping values are not allowed"):
        key = _KEY.match(line)
        if key is not None and key.end() <= mark.column:
            fix = (
                f"write {key.group(2)}: | and the value on the next line, indented "
                "further (or quote the whole value)"
            )
        else:
            fix = "write the value as a block scalar (key: | and the value on the next line)"
        return (
            mark.line + 1,
            mark.column + 1,
            f'YAML: ": " inside an unquoted value starts a new key; {fix}',
        )
    if found in ("@", "`") and "cannot start any token" in problem:
        return (
            mark.line + 1,
            mark.column + 1,
            f"YAML: a value cannot start with {found} unquoted; quote the whole value",
        )
    return None


def _inside(text: str, line: int, column: int) -> tuple[int, int]:
    """``(line, column)`` moved to the end of the text when it is past it:
    libyaml puts the end of a file without a final newline on the line after
    its last, which an editor cannot jump to (found by tests/cli/test_validate_fuzz.py)."""
    lines = text.split("\n")
    if line > len(lines):
        return len(lines), len(lines[-1]) + 1
    return line, column


def load_text(text: str, *, file: str) -> Document:
    """Parse one YAML document; raise ``ConfigError`` listing every problem found."""
    if len(text.encode("utf-8", errors="replace")) > MAX_BYTES:
        raise ConfigError([ConfigProblem(file, 1, 1, f"file is larger than {MAX_BYTES} bytes")])
    document = Document(file=file, data=None, text=text)
    loader: Any = None
    try:
        if _CParser is not None:
            _refuse_anchors(text)
            loader = _CLoader(text)
        else:
            loader = _Loader(text)
        root = loader.get_single_node()
    except _Refused as exc:
        raise ConfigError(
            [ConfigProblem(file, exc.mark.line + 1, exc.mark.column + 1, str(exc))]
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = _inside(text, mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = f"YAML syntax: {' '.join(p for p in (exc.context, exc.problem) if p) or exc}"
        hint = _syntax_hint(text, exc)
        if hint is not None:
            line, column, message = hint
        raise ConfigError([ConfigProblem(file, line, column, message)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem(file, 1, 1, f"YAML: {exc}")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        document.data = None
        return document
    builder = _Builder(document)
    document.data = builder.build(root, ())
    if builder.problems:
        raise ConfigError(builder.problems)
    return document


def load_file(path: str | Path) -> Document:
    """Read and parse ``path``; a missing or unreadable file is a ``ConfigError`` too.

    Only regular files, and at most ``MAX_BYTES`` of them: ``/dev/zero`` or a
    FIFO (``--input id=@/dev/zero``) would otherwise be read until memory runs
    out, or wait forever for a writer.  ``O_NONBLOCK`` lets the open return at
    once even for a FIFO, so the type check comes before any read.
    """
    file = str(path)

    def problem(message: str) -> ConfigError:
        return ConfigError([ConfigProblem(file, 1, 1, message)])

    try:
        data = read_regular_file(path, limit=MAX_BYTES)
    except FileNotFoundError:
        raise problem("no such file") from None
    except OSError as exc:
        reason = exc.strerror or str(exc).removeprefix(f"{path}: ")
        if reason.startswith("larger than"):
            reason = f"file is larger than {MAX_BYTES} bytes"
        raise problem(reason if exc.strerror is None else f"cannot read: {reason}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise problem(f"not UTF-8 text: {exc}") from None
    return load_text(text, file=file)
