"""Might a word name /proc or /dev/fd, where the script's own text can be read?

``/proc/$$/cmdline`` holds ``bash -c SCRIPT``, values and all, and
``/dev/stdin`` or ``/dev/fd/N`` may hold a value the checker did not see
written.  Reviews found them spelled as patterns, braces, relative paths
and through variables, so a word is matched as bash would expand it.  Plain
functions over text: ``receivers`` judges the commands that name them.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

from .tree import GLOB

#: Paths whose content may be a value the checker did not see written:
#: the process's own stdin and descriptors, and /proc (a command line, an
#: environment).
_PROCESS_TEXT = re.compile(r"^/dev/(stdin|fd/)|/proc/")
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")
_SEQUENCE = re.compile(r"\{[^{}]*\.\.[^{}]*\}")
#: A parameter expansion in a word's text (``${p}``, ``$p``; not ``$$``).
EXPANSION = re.compile(r"\$(?:\{[^{}]*\}|[A-Za-z_][A-Za-z0-9_]*)")


#: Files under /proc that hold no process's environment, memory or command
#: line: the ones a script with values may still read (``nproc``-like).
SYSTEM_PROC_FILES = frozenset(
    {"cpuinfo", "meminfo", "loadavg", "uptime", "version", "stat", "filesystems", "swaps"}
)


#: /dev's links into /proc (Debian's udev and Docker make the same):
#: ``/dev/fd/..`` is ``/proc/self`` to the kernel (review 40).
_DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "core": "/proc/kcore",
}
#: A descriptor, or the list of them: what /dev/fd names (not an environment).
_DESCRIPTOR = re.compile(r"/proc/[^/]+/fd(/[0-9]+)?")


def through_dev_links(text: str) -> str:
    """``text`` (a path, quotes removed) with a leading link of /dev spelled
    as the /proc path it is, so that ``..`` after it climbs where the kernel
    climbs: ``/dev/fd/../root/etc`` is ``/proc/self/root/etc`` (``/etc``),
    not ``/dev/root/etc``; a pattern that may match a link counts as one."""
    text = re.sub(r"/(\./)+", "/", re.sub(r"/{2,}", "/", text))
    parts = text.split("/")
    if len(parts) > 2 and parts[0] == "" and component_may_be("dev", parts[1]):
        for name, target in _DEV_LINKS.items():
            if component_may_be(name, parts[2]):
                return "/".join([target, *parts[3:]])
    return text


def is_descriptor(path: str) -> bool:
    """Is ``path`` (normalized, through /dev's links) one descriptor of a
    process, or their list (``/proc/self/fd/3``: ``/dev/fd/3``, ``/dev/stderr``)?"""
    return _DESCRIPTOR.fullmatch(path) is not None


def may_read_an_environment(text: str) -> bool:
    """Might ``text`` (a word, quotes removed) name a path under /proc other
    than the system-wide ``SYSTEM_PROC_FILES`` and a descriptor: a process's
    ``environ`` or ``mem`` (where a step's secrets are), a directory above
    them (for a recursive reader), a pattern?  Spelled as
    ``names_process_path`` reads it, relative too, and through /dev's links
    (``/dev/fd/../environ``: review 40's F3)."""
    text = through_dev_links(text)
    if GLOB.search(text) is None and "$" not in text and text.startswith("/"):
        text = posixpath.normpath(text)
        if is_descriptor(text):
            return False
    if text.startswith("/proc/") and text[len("/proc/") :] in SYSTEM_PROC_FILES:
        return False
    if re.match(r"/dev/(stdin|fd)(/|$)", text):
        return False  # a descriptor, as a pattern: /dev/f?/3
    return names_process_path(text)


def names_process_path(text: str, *, strict: bool = False) -> bool:
    """Might ``text`` (a word, quotes removed) name a path under /proc or
    /dev/fd?  Spelled plainly, or with a component that is ``proc`` or a
    pattern matching it, relative too (``/[p]roc/$$/cmdline``, ``/pr?c``,
    ``/{proc,x}``, ``proc/$$/cmdline`` after ``cd /``: the thirteenth
    review), whatever its case (``nocaseglob``), with ``.`` and empty
    components dropped, ``[^..]``, classes and escapes in brackets, and
    sequence braces read as bash reads them (the fourteenth review).  An
    expansion beside other text in a component may complete any name
    (``p=/pr; "${p}oc"``, the fifteenth review); in strict mode any
    component that holds an expansion may be anything."""
    text = through_dev_links(text)
    if _PROCESS_TEXT.search(text):
        return True
    parts = text.split("/")
    for index, part in enumerate(parts):
        if strict and "$" in part:
            return True
        if "$" in part and EXPANSION.sub("", part) != part:
            # p=/pr; "${p}oc": an expansion beside other text (or another
            # expansion) may complete any name, so it is read as a glob's *;
            # a whole component that is one variable ("$d/x") is judged by
            # what the script assigns it (process_path_names; the fifteenth review)
            pieces = EXPANSION.split(part)
            if len(EXPANSION.findall(part)) > 1 or any(piece for piece in pieces):
                part = EXPANSION.sub("*", part)
        if component_may_be("proc", part):
            return True
        if component_may_be("dev", part) and index + 1 < len(parts):
            after = parts[index + 1]
            if component_may_be("fd", after) or component_may_be("stdin", after):
                return True
    return False


def component_may_be(name: str, part: str, depth: int = 0) -> bool:
    """Can the path component ``part`` expand to ``name`` (braces, then globs)?"""
    part = part.lower()
    braces = _BRACES.search(part)
    if braces is not None and depth < 4:
        head, tail = part[: braces.start()], part[braces.end() :]
        return any(
            component_may_be(name, head + option + tail, depth + 1)
            for option in braces.group(1).split(",")
        )
    part = _SEQUENCE.sub("*", part)  # {p..p}: any text
    if part == name:
        return True
    if GLOB.search(part) is None:
        return False
    if "[:" in part or "[=" in part or "[." in part:
        return True  # a class: may match any letter
    pattern = part.replace("[^", "[!").replace("\\", "")
    return fnmatch.fnmatchcase(name, pattern)


#: Quotes and backslashes, removed from a word's text before it is matched
#: against ``_PROCESS_TEXT`` (``/pro''c/$$/cmdline`` is ``/proc/...`` to bash).
UNQUOTED = re.compile(r"['\"\\]")
#: Programs that print processes' command lines (``bash -c SCRIPT``, values and all).
PROCESS_LISTERS = frozenset(
    {"ps", "pgrep", "pstree", "top", "htop", "jobs", "pmap", "lsns", "systemd-cgls", "w", "pidstat"}
)
