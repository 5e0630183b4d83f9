"""Does bash read the script as tree-sitter parsed it?

Every later pass judges the parse tree, so a script whose parse bash would
not share is refused whole, before them: a parse error, a word with blanks
in it, ``$[``, a ``${ }`` operand holding code tree-sitter keeps as text, a
backtick or ``{name}>`` bash sees where the tree has plain text, a control
blank between words, a heredoc whose end is not certain.  Part of pass 1 of
``checker``; a class over ``CheckState`` (the module docstring of ``state``
says why classes).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from .state import CheckState

_ESCAPED = re.compile(rb"\\.", re.S)
#: Nodes inside which bash keeps every byte as it is (quotes, comments, heredocs).
_QUOTING_NODES = frozenset(
    {"raw_string", "string", "string_content", "heredoc_body", "heredoc_content", "comment"}
)
_PLAIN_DELIMITER = re.compile(rb"[A-Za-z0-9_]+")
#: Leaves that are quotes themselves.
_QUOTING_LEAVES = frozenset({"raw_string", "ansi_c_string", "comment", "heredoc_content"})
#: Nodes that quote or nest their own text: their tokens are not [ ]'s.
_NESTED = frozenset(
    {"command_substitution", "process_substitution", "string", "raw_string", "expansion"}
    | {"arithmetic_expansion", "ansi_c_string", "translated_string"}
)
#: Tokens bash reads as its own operators, never as test's, inside [ ].
_SHELL_OPERATORS = frozenset(
    {
        "|",
        "||",
        "&",
        "&&",
        ";",
        "<",
        ">",
        "<<",
        ">>",
        "<<<",
        "<&",
        ">&",
        "&>",
        "&>>",
        "|&",
        ">|",
        "<>",
    }
    | {"<<-", "(", ")"}
)
#: In a leaf tree-sitter keeps whole (a ``${ }`` operand, an ``=~`` pattern):
#: a quote, or a backslash before a quote, a backslash, ``}``, ``$``, a
#: backtick or the leaf's end, each of which bash reads as quoting.
_QUOTE_IN_LEAF = re.compile(r"""["'`]|\\(["'\\}$`]|$)""")
_QUOTED_DELIMITER = re.compile(rb"(['\"])([A-Za-z0-9_]+)\1")

#: Nodes that are one word to bash (whose children are its parts).
_WORD_PARTS = frozenset(
    {"concatenation", "string", "translated_string", "raw_string", "expansion"}
    | {"simple_expansion", "command_substitution", "arithmetic_expansion", "comment"}
)
#: Nodes that may each be a word of their own.
_WORDS = frozenset(
    {"word", "raw_string", "string", "concatenation", "simple_expansion", "expansion"}
    | {"number", "heredoc_start", "command_substitution", "extglob_pattern", "regex"}
    | {"translated_string"}
)

#: What bash runs or evaluates where tree-sitter keeps plain text (the
#: eleventh review): a backtick in an unquoted heredoc body, and a
#: ``{name}`` or ``{name[subscript]}`` word right before a redirect (bash
#: assigns a descriptor to the variable, evaluating the subscript).
_HIDDEN = re.compile(rb"`|\{[A-Za-z_][A-Za-z0-9_]*(\[[^{}\n]*\])?\}[<>]")


class AgreementCheck(CheckState):
    """Refuse a script whose parse bash would not share."""

    def misparsed(self, node: Any) -> bool:
        """A node bash would not read the way the parser did: an error, a
        missing token, a word holding unescaped blanks (tree-sitter lexes
        ``a<newline>\\eval`` as one word), or ``$'...'``, which sh (dash)
        does not read as a quote at all; ``$((`` that the parser read as a
        command substitution of a subshell (bash: arithmetic)."""
        if node.type == "ERROR" or node.is_missing or node.type == "ansi_c_string":
            return True
        if node.type == "command_substitution" and self.tree.text_bytes(node).startswith(b"$(("):
            return True  # bash reads $(( as arithmetic (tree-sitter, in a heredoc, as $( ( ) ))
        if node.type == "comment":
            # bash has no comments in arithmetic: it reads the quote after
            # the # (review 39's F2: "(( 1 #'")
            return not self.starts_a_word(node.start_byte) or self.in_arithmetic(node)
        if node.type == "subshell" and self.source[node.start_byte : node.start_byte + 2] == b"((":
            return True  # ! (( n > 1 )): tree-sitter reads two subshells, bash arithmetic
        if node.type in ("file_redirect", "herestring_redirect"):
            # tree-sitter files the words after `>/dev/null` as more destinations;
            # bash gives them to the command as arguments
            targets = [c for c in node.children if self.tree.field(c) == "destination"]
            return len(targets) > 1
        if node.type in ("simple_expansion", "expansion"):
            # $<newline>eval is $eval to tree-sitter, a lone $ to bash (review 42)
            return self.source[node.start_byte + 1 : node.start_byte + 2] in (b" ", b"\t", b"\n")
        if node.type == "test_command" and self.bracket_glued(node):
            return True  # [[-n x || sh ]]: bash's command [[-n, not a test (review 50)
        if (
            node.type == "test_command"
            and self.source[node.start_byte : node.start_byte + 2] != b"[["
        ):
            # [ is a command to bash: | && < << ... in it are the shell's, not
            # test operators (review 42: "[ a | sh ]", "[ a << x ]"), and a
            # line ends it ("[ a = b -o<newline>eval = {{ x }} ]": review 50)
            stack = list(node.children)
            leaves = []
            while stack:
                part = stack.pop()
                if not part.is_named and self.text(part) in _SHELL_OPERATORS:
                    return True
                if part.type in _NESTED or not part.children:
                    leaves.append(part)
                else:  # $( ... ) is judged as a script of its own
                    stack.extend(part.children)
            leaves.sort(key=lambda leaf: leaf.start_byte)
            return any(
                b"\n" in self.source[a.end_byte : b.start_byte]
                for a, b in itertools.pairwise(leaves)
            )
        if not node.is_named and node.type in ("<", ">"):
            # [[ -n x<(sh) ]]: bash substitutes a process where tree-sitter
            # reads a comparison and a group (review 50)
            return self.source[node.end_byte : node.end_byte + 1] == b"("
        if node.type == "heredoc_redirect":
            # 2>/dev/null <<E sh f: bash runs sh f; tree-sitter files the
            # words under the heredoc (review 50)
            return any(c.type in _WORDS and c.type != "heredoc_start" for c in node.children)
        if node.type == "regex":
            # outside [[ ]], tree-sitter reads a "pattern" after == or =~ over
            # blanks, ; | && << and lines up to a ]; bash has no pattern there
            # and runs them (review 48's F1: echo == x;cat<<true;: ])
            # (${x//pat/rep} and ${x%pat} hold patterns too: judged elsewhere)
            home = self.tree.inside(node, ("test_command", "command", "expansion"))
            if home is not None and home.type == "expansion":
                return False
            return home is None or self.source[home.start_byte : home.start_byte + 2] != b"[["
        if node.type == "extglob_pattern" and b"(" in self.tree.text_bytes(node):
            # [[ x == +(...) ]]: bash reads the pattern to its matching ), quotes,
            # # and $( ) in it included, extglob on or off (review 44)
            return True
        if node.type == "array":
            # in a=( ... ), bash reads a word that starts with [ up to its
            # matching ], across blanks, ) and ; as one arithmetic key:
            # a=( [ ); echo {{ x }}; a=( ]=1 ) (review 41's F1)
            return any(_opens_a_key(self.text(element)) for element in node.named_children)
        if node.type in ("word", "number"):
            unescaped = _ESCAPED.sub(b"", self.tree.text_bytes(node))
            return any(blank in unescaped for blank in (b" ", b"\t", b"\n"))
        if node.type not in _WORD_PARTS:
            # two words with nothing between them are one word to bash
            # (tree-sitter splits /[\p]roc after the `[`: the fourteenth
            # review; <<"E"x the same way, where bash's delimiter is Ex and
            # the body runs on past the line tree-sitter ends it at: review
            # 48's F2; for-lists, arrays, declare, unset and redirect targets)
            return any(
                a.end_byte == b.start_byte
                for a, b in itertools.pairwise(node.children)
                if a.type in _WORDS and b.type in _WORDS
            )
        return False

    def bracket_glued(self, test: Any) -> bool:
        """Is the opening ``[``/``[[`` of ``test`` glued to the next word, or
        its closing ``]``/``]]`` to the word before (bash reads one word)?"""
        first, last = test.children[0], test.children[-1]
        after = self.source[first.end_byte : first.end_byte + 1]
        before = self.source[last.start_byte - 1 : last.start_byte]
        return after not in (b" ", b"\t", b"\n") or (
            last.type in ("]", "]]") and before not in (b" ", b"\t", b"\n")
        )

    def stray_quote(self) -> Any:
        """A leaf outside quotes, comments and heredoc bodies that holds a
        quote or a backtick bash would read as one (escapes removed): the
        parser kept as text what bash reads as quoting, so the two disagree
        on where every later quote opens and closes (reviews 39 and 41
        found such leaves one corner at a time; this refuses the shape).
        The first, or None."""
        tree = self.tree
        for node in tree.nodes:
            if node.child_count or node.type in _QUOTING_LEAVES:
                continue
            if node.type in ("heredoc_start", "heredoc_end", "`"):
                continue  # a delimiter (unclear_heredoc judges it), a backtick (refused as such)
            text = _ESCAPED.sub(b"", tree.text_bytes(node))
            if not any(q in text for q in (b"'", b'"', b"`")):
                continue
            parent = tree.parent(node)
            while parent is not None and parent.type not in _QUOTING_NODES | _QUOTING_LEAVES:
                if parent.type in _NESTED - {"string", "raw_string"}:
                    parent = None  # ${ }, $( ): bash reads their text afresh, quotes and all
                    break
                parent = tree.parent(parent)
            if parent is None:
                return node
        return None

    def in_arithmetic(self, node: Any) -> bool:
        """Is ``node`` inside ``(( ))``, ``$(( ))``, a ``for (( ))`` or a subscript?"""
        parent = self.tree.parent(node)
        while parent is not None:
            if parent.type in ("arithmetic_expansion", "subscript", "c_style_for_statement"):
                return True
            if (
                parent.type == "compound_statement"
                and self.source[parent.start_byte : parent.start_byte + 2] == b"(("
            ):
                return True
            parent = self.tree.parent(parent)
        return False

    def unparsed_expansion(self) -> Any:
        """Text tree-sitter keeps as a leaf where bash expands: a ``${x%PAT}``
        or ``=~`` pattern (``regex``) or a ``${x:-WORD}`` operand holding
        ``$( )``, backticks, ``$[``, ``${`` or ``<(``; single quotes inside a
        ``${ }`` (in ``"${x:-'$(cmd)'}"`` bash does not read them as quotes);
        and ``$[`` (old arithmetic) wherever bash reads it.  The first such
        node, or None."""
        tree = self.tree
        for node in tree.nodes:
            kind = node.type
            if kind not in ("regex", "raw_string", "word"):
                continue
            if kind != "regex" and tree.inside(node, ("expansion",)) is None:
                continue
            text = self.text(node)
            markers = ("$", "`") if kind == "raw_string" else ("$(", "`", "$[", "${", "<(", ">(")
            if any(marker in text for marker in markers):
                return node
            escaped_slash = (
                text.endswith("\\") and self.source[node.end_byte : node.end_byte + 1] == b"/"
            )
            if escaped_slash:
                # ${name//\//-}: tree-sitter ends the pattern at the escaped
                # slash, bash does not; no quote is involved, the idiom stays
                text = text[:-1]
            if kind != "raw_string" and _QUOTE_IN_LEAF.search(text):
                # "${x%a"}" }: a quote or an escape tree-sitter keeps as text in
                # a ${ } operand or an =~ pattern opens or ends one for bash
                # (review 39's F1)
                return node
        for match in _HIDDEN.finditer(self.source):  # bash reads these, tree-sitter does not
            node = tree.root.descendant_for_byte_range(match.start(), match.end() - 1)
            escaped = _escaped(self.source, match.start())
            parsed = node.type == "`"  # a `...` tree-sitter read: judged (and refused) as such
            if not escaped and not parsed and not self.literal_here(node):
                return node
        for match in re.finditer(rb"\$\[", self.source):
            node = tree.root.descendant_for_byte_range(match.start(), match.end())
            parsed = tree.inside(node, ("arithmetic_expansion",)) is not None or (
                node.type == "arithmetic_expansion"
            )
            if not parsed and not self.literal_here(node):  # parsed: the arithmetic pass judges it
                return node
        return None

    def literal_here(self, node: Any) -> bool:
        """Does bash keep the text of ``node`` as it is: a single-quoted word
        (not inside a ``${ }``), a comment, or a quoted heredoc's body?"""
        tree = self.tree
        if tree.inside(node, ("expansion",)) is not None:
            return False
        while node is not None:
            if node.type in ("raw_string", "comment"):
                return True
            if node.type == "heredoc_body":
                start = next(
                    (c for c in tree.parent(node).children if c.type == "heredoc_start"), None
                )
                return start is not None and any(q in self.text(start) for q in "'\"\\")
            node = tree.parent(node)
        return False

    def control_blank(self) -> Any:
        """A vertical tab, form feed or carriage return outside quotes: tree-sitter
        skips it as a blank, bash keeps it in a word (``<<<\\v {{ x }}`` makes
        the value another argument).  The node around the first one, or None."""
        for match in re.finditer(rb"[\r\v\f]", self.source):
            node = self.tree.root.descendant_for_byte_range(match.start(), match.end())
            while node is not None and node.type not in _QUOTING_NODES:
                node = self.tree.parent(node)
            if node is None:
                return self.tree.root.descendant_for_byte_range(match.start(), match.end())
        return None

    def escaped_blank(self) -> Any:
        r"""A backslash before a blank that bash and tree-sitter read apart
        (review 37): tree-sitter skips ``\<newline>``, ``\<space>`` and
        ``\<tab>`` between tokens as a blank, while bash deletes a
        ``\<newline>`` and joins the text around it (``x=1\<nl>echo eval``
        assigns ``1echo`` and runs ``eval``; ``"$\<nl>(cmd)"`` is a command
        substitution) and keeps ``\<space>`` inside the word.  Kept: any of
        them in single quotes, a comment or a quoted heredoc; ``\<space>`` and
        ``\<tab>`` inside a word or double quotes, where both keep them; and
        a ``\<newline>`` right after an unescaped blank (``docker run \``),
        where the joined text is two words to both.  The node around the
        first other one, or None."""
        source = self.source
        for match in re.finditer(rb"\\[ \t\n]", source):
            at = match.start()
            if _escaped(source, at):
                continue  # an escaped backslash, then a blank
            node = self.tree.root.descendant_for_byte_range(at, at + 1)
            if self.literal_here(node) or node.type == "heredoc_start":
                continue  # a delimiter: unclear_heredoc refuses any but a plain one
            if source[at + 1 : at + 2] == b"\n":
                if at == 0 or (source[at - 1 : at] in b" \t\n" and not _escaped(source, at - 1)):
                    continue
                return node
            around = self.tree.root.descendant_for_byte_range(at, at + 2)
            if around.type not in ("word", "string_content", "string"):
                return around
        return None

    def starts_a_word(self, at: int) -> bool:
        r"""Does bash start a word at byte ``at`` (so that a ``#`` there opens a
        comment)?  Only after a metacharacter that is not escaped: tree-sitter
        also takes a form feed, a vertical tab, ``]#``, ``)#`` and ``\<newline>#``
        for a comment start; bash reads them as part of the word before."""
        if at == 0:
            return True
        before = self.source[at - 1 : at]
        if before not in (b" ", b"\t", b"\n", b";", b"&", b"|", b"(", b"<", b">"):  # not ")#"
            return False
        return not _escaped(self.source, at - 1)

    # -- pass 1: the subset ----------------------------------------------------

    def unclear_heredoc(self) -> Any:
        """A heredoc whose end bash might place elsewhere than the parser did.

        tree-sitter and bash disagree on some heredocs (a delimiter line with
        trailing spaces, a line joined by a trailing backslash); a value the
        parser saw after the heredoc could be inside its body for bash, where
        quotes do not protect it.  So every heredoc must end provably: a
        plain delimiter, its end line exactly the delimiter, no earlier body
        line equal to it, and (unquoted) no body line ending in a backslash.
        """
        lines = self.source.split(b"\n")
        for node in self.tree.nodes:
            if node.type != "heredoc_redirect":
                continue
            kinds = {c.type: c for c in node.children}
            start, end = kinds.get("heredoc_start"), kinds.get("heredoc_end")
            if start is None or end is None:
                return node
            word = self.tree.text_bytes(start)
            quoted = _QUOTED_DELIMITER.fullmatch(word)
            delimiter = quoted.group(2) if quoted else word
            if not _PLAIN_DELIMITER.fullmatch(delimiter):
                return node
            strip_tabs = "<<-" in kinds
            body = kinds.get("heredoc_body")
            first = body.start_point[0] if body is not None else end.start_point[0]
            last = end.start_point[0]
            if first > last:
                return node
            keys = [line.lstrip(b"\t") if strip_tabs else line for line in lines[first : last + 1]]
            if keys[-1] != delimiter:
                return node
            for line, line_key in zip(lines[first:last], keys, strict=False):
                if line_key == delimiter or (not quoted and line.endswith(b"\\")):
                    return node
        return None


def _escaped(source: bytes, at: int) -> bool:
    """Is the byte at ``at`` escaped: an odd run of backslashes before it?"""
    count = 0
    while at - count > 0 and source[at - count - 1] == 0x5C:
        count += 1
    return count % 2 == 1


def _opens_a_key(element: str) -> bool:
    """Does an array literal's element (as tree-sitter cut it) start a ``[``
    that bash would close only past the element's end?  A quote in it
    counts as such (bash reads the key's quotes its own way)."""
    if not element.startswith("["):
        return False
    depth = 0
    for char in element:
        if char in "'\"`\\":
            return True
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0:
            return False
    return True
