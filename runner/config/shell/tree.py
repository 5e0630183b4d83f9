"""The parse tree of one script, as bash will read it.

tree-sitter-bash parses; ``Tree`` adds what tree-sitter does not keep
cheaply (each node's parent and field, found in one walk) and ``static``,
the word bash makes of a node after quote removal when it is fixed before
the script runs.  Every pass of the checker (``checker``) reads the script
through it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import Any

#: What makes bash glob a word, make several of it (``{a,b}``, ``{1..3}``), or escape.
GLOB = re.compile(r"[*?\[]")
BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
ESCAPED_TEXT = re.compile(r"\\.", re.S)

_PARSER: Any = None


def _parser() -> Any:
    """The tree-sitter parser, built on first use (validate of a file without values skips it)."""
    global _PARSER
    if _PARSER is None:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        _PARSER = Parser(Language(tree_sitter_bash.language()))
    return _PARSER


class Tree:
    """The parse of one script, with the maps tree-sitter does not keep cheaply:
    each node's parent and field (``Node.parent`` walks down from the root)."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.root = _parser().parse(source).root_node
        self.nodes: list[Any] = []
        self.parents: dict[int, Any] = {}
        self.fields: dict[int, str | None] = {}
        cursor = self.root.walk()
        parents: list[Any] = []
        while True:
            node = cursor.node
            self.nodes.append(node)
            self.fields[node.id] = cursor.field_name
            if parents:
                self.parents[node.id] = parents[-1]
            if cursor.goto_first_child():
                parents.append(node)
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    return
                parents.pop()

    def parent(self, node: Any) -> Any:
        return self.parents.get(node.id)

    def field(self, node: Any) -> str | None:
        return self.fields.get(node.id)

    def text_bytes(self, node: Any) -> bytes:
        return self.source[node.start_byte : node.end_byte]

    def text(self, node: Any) -> str:
        return self.text_bytes(node).decode("utf-8", "replace")

    def inside(self, node: Any, kinds: Collection[str]) -> Any:
        """The nearest ancestor (or ``node``) of one of ``kinds``, else None."""
        while node is not None:
            if node.type in kinds:
                return node
            node = self.parent(node)
        return None

    def subtree(self, node: Any) -> Iterator[Any]:
        stack = [node]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(current.children)

    def static(self, node: Any) -> str | None:
        """The word bash makes of ``node`` after quote removal, when it is
        fixed before the script runs (no expansion, substitution or glob);
        else None.  ``CO''UNT`` is ``COUNT``; ``"-v"`` and ``\\-v`` are ``-v``."""
        kind = node.type
        if kind == "command_name" and node.named_child_count == 1:
            return self.static(node.named_children[0])
        if kind in ("word", "number"):
            if node.named_child_count:
                return None
            raw = self.text(node)
            if raw.startswith("~") or BRACE.search(ESCAPED_TEXT.sub("", raw)):
                return None  # tilde or brace expansion: {eval,} is eval
            text = re.sub(r"\\(.)", r"\1", raw.replace("\\\n", ""), flags=re.S)
            if GLOB.search(raw.replace("\\[", "").replace("\\*", "").replace("\\?", "")):
                return None
            return text
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "variable_name":
            return self.text(node)
        if kind == "string":
            parts = []
            for child in node.children:
                if child.type == '"':
                    continue
                if child.type != "string_content":
                    return None
                raw = self.text(child)
                parts.append(re.sub(r'\\([$`"\\\n])', r"\1", raw).replace("\\\n", ""))
            return "".join(parts)
        if kind == "concatenation":
            if BRACE.search(ESCAPED_TEXT.sub("", self.text(node))):
                return None  # brace expansion across parts: {eval,}
            pieces = [self.static(child) for child in node.children]
            if any(part is None for part in pieces):
                return None
            return "".join(pieces)  # type: ignore[arg-type]
        return None
