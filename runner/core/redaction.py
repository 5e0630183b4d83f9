"""Secret redaction: every form a secret may be printed in, and scrubbing.

A secret is printed in more spellings than its own: shell-quoted, JSON- and
URL-encoded, with bash's backslashes, as ANSI-C, without its newline, and
as tools print bytes that are not UTF-8.  The event bus (``core.events``)
scrubs every form of every registered secret from what it passes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

MASK = "***"


def secret_text_forms(text: str) -> set[str]:
    """Every form of ``text`` and of ``text`` without its leading and trailing
    whitespace (a tool that trims a secret's newline, ``tr -d '\\n'`` or
    ``head -c``, prints that), and of each of its lines, each as
    :func:`secret_forms` and, for text that
    holds bytes that are not UTF-8, as tools print those bytes.  Empty for a
    text shorter than 3 characters."""
    found: set[str] = set()
    # each line of a multi-line secret (a PEM key) too: output is scrubbed a
    # line at a time, and no one line is the whole secret (review 21's H7)
    lines = {line.strip() for line in text.splitlines()} if "\n" in text.strip() else set()
    for each in {text, text.strip(), *lines}:
        if len(each) >= 3:
            found.update(secret_forms(each))
            found.update(_undecodable_forms(each))
    return found


def _undecodable_forms(text: str) -> set[str]:
    """The forms tools print of a text whose bytes are not UTF-8 (surrogate-escaped,
    as Python reads such an environment variable or file): ``$'...'`` and base64
    of the original bytes (:func:`secret_forms` takes the surrogates' own code
    points there).  Empty for any other text."""
    if not _has_escaped_bytes(text):
        return set()
    import base64

    raw = _original_bytes(text)
    b64 = base64.b64encode(raw).decode("ascii")
    return {
        *(
            "".join(
                f"\\{ord(c) - 0xDC00:03o}" if "\udc80" <= c <= "\udcff" else _ansi_c(c, utf8=utf8)
                for c in text
            )
            for utf8 in (True, False)
        ),
        b64,
        b64.rstrip("="),
        raw.hex(),
        raw.hex().upper(),
        base64.b32encode(raw).decode("ascii"),
        base64.b32encode(raw).decode("ascii").rstrip("="),
        base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="),
    }


def secret_bytes_forms(forms: Iterable[str]) -> list[bytes]:
    """The bytes of each of ``forms`` that is not UTF-8 (it holds surrogate-escaped
    bytes), longest first: command output must be scrubbed of those before it is
    decoded, since decoding turns them into U+FFFD and the text forms no longer
    match.  A UTF-8 form decodes unchanged and is scrubbed as text."""
    found = {_original_bytes(form) for form in forms if _has_escaped_bytes(form)}
    return sorted(found, key=len, reverse=True)


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _has_escaped_bytes(text: str) -> bool:
    """Does ``text`` hold bytes that were not UTF-8 (as surrogateescape decodes them)?"""
    return not text.isascii() and _ESCAPED_BYTE.search(text) is not None


#: What bash's ``printf %q`` puts a backslash before (its ``bstab`` table).
_BASH_BACKSLASHED = frozenset(" \t\n!\"$&'()*,;<>?[\\]^`{|}")
_ANSI_C_ESCAPES = {
    **{c: "\\" + e for c, e in zip("\a\b\t\n\v\f\r\x1b", "abtnvfrE", strict=True)},
    "\\": "\\\\",
    "'": "\\'",
}
#: Unicode categories glibc's iswprint refuses in a UTF-8 locale.
_UNPRINTABLE = ("Cc", "Cs", "Cn", "Zl", "Zp")


def secret_forms(text: str) -> set[str]:
    """``text`` as shells and common tools print it, each without its quotes.

    A secret must not leak through the way a tool escapes it: bash's ``set -x``
    (``'it'\\''s'`` or ``$'a\\tb'``), ``printf %q`` (``a\\ b``), ``declare -p``
    (``"a\\$b"``), JSON, Python's ``repr``, ``shlex.quote``, URL encoding (as
    Python, jq's ``@uri``, JavaScript and HTML forms write it) and base64.
    Each is computed character by character, so it also matches the secret
    inside a longer quoted word.  ``$'...'`` comes in two spellings:
    non-ASCII characters kept (a UTF-8 locale) or as octal bytes (the C locale).
    """
    from urllib.parse import quote, quote_plus

    raw = text.encode("utf-8", errors="surrogatepass")
    original = _original_bytes(text)
    url_encoded = quote(original, safe="")
    # printf %q also escapes "~" after ":" or "="; a leading "#" or "~" gets a
    # backslash too, which leaves this form a substring of the printed word.
    backslashed = "".join("\\" + c if c in _BASH_BACKSLASHED else c for c in text)
    return (
        _encoded_forms(original, raw)
        # echo "$S" | base64 encodes the newline too, which changes the last
        # characters (review 26's B2b: the last line came out unmasked)
        | _encoded_forms(original + b"\n", raw + b"\n")
        | {
            text,
            text.replace("'", "'\"'\"'"),  # shlex.quote and run templates, inside the quotes
            text.replace("'", "'\\''"),  # bash's single quoting (set -x, ${x@Q})
            "".join("\\" + c if c in '\\"$`' else c for c in text),  # declare -p
            backslashed.replace(":~", ":\\~").replace("=~", "=\\~"),  # printf %q
            _ansi_c(text, utf8=True),
            _ansi_c(text, utf8=False),
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
            repr(text + '"')[1:-2],  # repr in '...', as Python picks when a '"' is near
            repr(text + "'")[1:-2],  # repr in "...", as Python picks when a "'" is near
            url_encoded,
            # jq's @uri and JavaScript's encodeURIComponent keep !'()* (the tenth
            # review); forms send + for a space; some encoders write %2f
            quote(original, safe="!'()*"),
            quote_plus(original, safe=""),
            re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), url_encoded),
        }
    )


def _encoded_forms(original: bytes, raw: bytes) -> set[str]:
    """The secret's bytes (``original``; ``raw`` for base64, as Python holds
    the text) in base64 (padded, unpadded, URL-safe), hex (either case, as
    ``xxd -p``, ``od`` and ``hexdump`` print it) and base32 (the twelfth
    review), whole and wrapped as the tools print them."""
    import base64

    b64 = base64.b64encode(raw).decode("ascii")
    b64url = base64.urlsafe_b64encode(raw).decode("ascii")
    b32 = base64.b32encode(original).decode("ascii")
    hex_lower = original.hex()
    whole = {b64, b64.rstrip("="), b64url.rstrip("="), hex_lower, hex_lower.upper()}
    whole |= {b32, b32.rstrip("=")}
    return whole | _wrapped_forms(
        # GNU base64, base32 and basenc wrap at 76 columns, openssl base64 at
        # 64 (the eleventh review), xxd -p at 60, -u in upper case (review
        # 25's B2 and 26's B2b: a long secret's wrapped base32 or hex was not
        # masked)
        (b64, (76, 64)),
        (b32, (76,)),
        (b64url, (76,)),
        (hex_lower.upper(), (76, 60)),  # basenc --base16, xxd -p -u
        (hex_lower, (60,)),  # xxd -p
    )


#: A wrapped encoding's last line shorter than this is no form of its own:
#: as short a form would mask the same few characters anywhere in output
#: (a hex line of "3d"), and it holds at most a few bytes of the secret.
MIN_WRAPPED_LINE = 8


def _wrapped_forms(*encodings: tuple[str, tuple[int, ...]]) -> set[str]:
    """Each encoded text as a tool prints it wrapped at each of its widths:
    the lines joined by newlines, and each line, as output is shown line by
    line (or with its newlines escaped)."""
    forms: set[str] = set()
    for encoded, widths in encodings:
        for width in widths:
            if len(encoded) <= width:
                continue
            lines = [encoded[i : i + width] for i in range(0, len(encoded), width)]
            forms.add("\n".join(lines))
            forms |= {line for line in lines if len(line) >= MIN_WRAPPED_LINE}
    return forms


def _original_bytes(text: str) -> bytes:
    """The bytes ``text`` was decoded from: an environment variable that is not
    UTF-8 reaches Python with its bytes as lone surrogates (surrogateescape),
    and tools print those bytes, not the surrogates."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no byte decodes to
        return text.encode("utf-8", errors="surrogatepass")


def _ansi_c(text: str, *, utf8: bool) -> str:
    """The inside of bash's ``$'...'`` quoting: named escapes, else octal bytes for
    what the locale cannot print (in a UTF-8 locale, what glibc's iswprint refuses)."""
    from unicodedata import category

    out = []
    for c in text:
        printable = c.isprintable() if c.isascii() else utf8 and category(c) not in _UNPRINTABLE
        if c in _ANSI_C_ESCAPES:
            out.append(_ANSI_C_ESCAPES[c])
        elif printable:
            out.append(c)
        else:
            out.extend(f"\\{b:03o}" for b in c.encode("utf-8", errors="surrogatepass"))
    return "".join(out)


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    return masked(text, secrets, MASK)


Text = TypeVar("Text", str, bytes)


def masked(text: Text, forms: Iterable[Text], mask: Text) -> Text:
    """``text`` with every occurrence of every form replaced by ``mask``,
    occurrences that overlap or touch merged into one mask.

    Every occurrence is found in the original text before anything is
    replaced: replacing one form after another let a form masked first cut
    into another's occurrence, so that one no longer matched (review 49's
    S1: a caller's ``secret: true`` input, a line ending in the first
    character of a token, took that character along and the rest of the
    token printed in clear).  One ``find`` pass per form, as before."""
    spans: list[tuple[int, int]] = []
    for form in forms:
        if not form:
            continue
        start = text.find(form)
        while start != -1:
            spans.append((start, start + len(form)))
            start = text.find(form, start + 1)
    if not spans:
        return text
    spans.sort()
    pieces: list[Text] = []
    kept_to = 0
    first, last = spans[0]
    for start, end in spans[1:]:
        if start <= last:
            last = max(last, end)
            continue
        pieces += [text[kept_to:first], mask]
        kept_to, first, last = last, start, end
    pieces += [text[kept_to:first], mask, text[last:]]
    return text[:0].join(pieces)
