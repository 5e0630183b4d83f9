"""A template's values on their way into the text, and the template errors.

``Fields`` wraps an input's mapping so templates read ``x.field``;
``shell_word`` quotes a value as one single-quoted word; a ``run`` render
prints a *sentinel* per value (``_RenderedValues``) that the shell checker
judges before the quoted values are put in.  Split from ``templates``
(issue 27), which re-exports every name here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from jinja2 import pass_context

from ..core.errors import AgentsError

#: Names every template may use besides the declared input aliases.
BUILTIN_NAMES = frozenset({"inputs", "session"})


class TemplateValueError(AgentsError):
    """A value cannot be inserted into a template (NUL, or a list in a command)."""


class Fields(Mapping[str, Any]):
    """Read-only view of an input value: ``repo.revision`` and ``repo["revision"]``.

    A plain dict would expose its methods (``repo.items``) where a field of
    that name was meant.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    def __getitem__(self, key: str) -> Any:
        return wrap(self._data[key])

    def __getattr__(self, name: str) -> Any:
        try:
            return wrap(self._data[name])
        except KeyError:
            raise AttributeError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


def wrap(value: Any) -> Any:
    if isinstance(value, Mapping) and not isinstance(value, Fields):
        return Fields(value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = str(value)
    elif isinstance(value, str):
        # str.__str__ turns a Markup (|safe, |tojson) into a plain str: Markup's
        # own methods would HTML-escape the quoting added below.
        text = str.__str__(value)
    else:
        raise TemplateValueError(
            f"a {type(value).__name__} value cannot be inserted as one shell word; "
            "loop over it ({% for item in ... %}{{ item }} {% endfor %}) or pick a field"
        )
    if "\0" in text:
        raise TemplateValueError("a value contains a NUL character, which no command can take")
    return text


def shell_word(value: Any) -> str:
    """``value`` as one single-quoted shell word, always quoted.

    Unlike ``shlex.quote``, a plain value is quoted too, so every value is
    the same kind of token the checker saw as its sentinel (``'…'``): bash
    reads it as literal text wherever the checker allowed it.
    """
    return "'" + _scalar_text(value).replace("'", "'\"'\"'") + "'"


class _RenderedValues:
    """The values one render of a ``run`` template printed, behind sentinels.

    Each ``{{ }}`` prints a sentinel ``'RV<nonce>x<i>'`` (a single-quoted word
    no template or value can contain: the nonce is random per render); the
    checker judges the text with sentinels, then ``substitute`` puts the
    quoted values in, in one pass.
    """

    __slots__ = ("nonce", "quoted", "texts")

    def __init__(self) -> None:
        self.nonce = os.urandom(8).hex()
        self.quoted: list[str] = []
        #: each value's text as bash will see it (quotes removed)
        self.texts: list[str] = []

    def add(self, value: Any) -> str:
        self.quoted.append(shell_word(value))
        self.texts.append(_scalar_text(value))
        return self.sentinel(len(self.quoted) - 1)

    def sentinel(self, index: int) -> str:
        return f"'RV{self.nonce}x{index}'"

    @property
    def sentinels(self) -> list[str]:
        return [self.sentinel(i) for i in range(len(self.quoted))]

    def _pattern(self) -> Any:
        import re

        return re.compile(rf"'RV{self.nonce}x([0-9]+)'")

    def all_present(self, text: str) -> bool:
        """Is every sentinel still in ``text``?  One scan, not one per value."""
        found = {int(index) for index in self._pattern().findall(text)}
        return len(found) == len(self.quoted)

    def substitute(self, text: str) -> str:
        return self._pattern().sub(lambda m: self.quoted[int(m.group(1))], text)

    def literal(self, word: str) -> str:
        """``unquoted``, with each value's pattern and quote characters made
        inert (a NUL): a value is one quoted word, so its ``*`` or ``{a,b}``
        is text, not a glob or a brace, when a path check reads the word."""
        pieces = self._pattern().split(word)
        return "".join(
            literal_text(self.texts[int(piece)]) if odd else piece.replace("'", "").replace('"', "")
            for odd, piece in ((i % 2 == 1, p) for i, p in enumerate(pieces))
        )

    def unquoted(self, word: str) -> str:
        """The text bash makes of ``word`` (a word of the checked script):
        each sentinel replaced by its value's text, quotes removed elsewhere."""
        pieces = self._pattern().split(word)
        return "".join(
            self.texts[int(piece)] if odd else piece.replace("'", "").replace('"', "")
            for odd, piece in ((i % 2 == 1, p) for i, p in enumerate(pieces))
        )


_RENDERING: ContextVar[_RenderedValues | None] = ContextVar("runner_rendering", default=None)


@pass_context
def _sentinel_word(context: Any, value: Any) -> str:
    # pass_context keeps Jinja from finalizing constants at compile time,
    # so every value, constant or not, passes here at render time.
    values = _RENDERING.get()
    if values is None:  # rendered outside Template.render: never print a raw value
        raise TemplateSecurityError("run templates render only through Template.render")
    return values.add(value)


def _text(value: Any) -> str:
    if isinstance(value, Fields):
        value = dict(value)
    text = value if isinstance(value, str) else str(value)
    if "\0" in text:
        raise TemplateValueError("a value contains a NUL character")
    return text


class TemplateSecurityError(AgentsError):
    """A template reached for something the sandbox forbids."""


class UnsafeTemplateError(TemplateSecurityError):
    """A rendered ``run`` command puts a value where bash would not read it as data.

    Raised before the command runs; the message names each position and its
    fix, never a value.
    """


class OptionLikeValueError(UnsafeTemplateError):
    """A word read from a ``no_leading_option`` input would reach its program
    starting with ``-``, ``+`` or ``@``, once the template's filters ran.  Raised before
    the step runs; the message names the input, never the value."""


class TemplateProblem(NamedTuple):
    """A problem found in a template, at an offset of its source."""

    offset: int
    message: str


def literal_text(text: str) -> str:
    """A value's text with the characters a path check would read as a
    pattern, an expansion or a quote made inert (a NUL, which no path holds)."""
    import re

    return re.sub(r"[*?\[\]{}$\\'\"]", "\0", text)
