"""Might a path a script writes to, or moves into, be one of the system's own?

Writing ``/etc/ld.so.preload`` loads a library into every later program,
``/etc/nsswitch.conf`` and an NSS module in ``/usr/lib`` do the same, and
``/proc/sys/kernel/core_pattern`` runs a program: a script with values may
write none of them (the sixteenth review).  Reviews spelled them with
``//``, through ``cd /etc`` and a relative name, through a variable
(``d=/etc``), an expansion beside text (``/e${x}tc``), a glob (``/e?c``),
and ``..`` climbing out of the working directory.  Plain functions over
text, as bash would expand it; ``beside`` judges the commands.
"""

from __future__ import annotations

import posixpath

from .proc_paths import EXPANSION, component_may_be, is_descriptor, through_dev_links

#: The top-level directories where the system finds code (``lib*`` as a
#: pattern: ``lib32``, ``lib64``, ``libx32``).
SYSTEM_DIRECTORIES = ("etc", "usr", "lib", "bin", "sbin", "boot", "proc", "sys")


def _first_component_may_be_system(first: str) -> bool:
    if first.lower().startswith("lib"):
        return True
    return any(component_may_be(name, first) for name in SYSTEM_DIRECTORIES) or (
        # a pattern that may match a lib* directory: l*, li?64
        component_may_be("lib64", first) or component_may_be("lib32", first)
    )


def names_system_path(text: str) -> bool:
    """Might ``text`` (a word, quotes removed, variables the script set
    already substituted) name a path under the system's directories, or
    ``/`` itself?  An expansion left in it may be any text: beside other
    text in the first component it completes any name (``/e${x}tc``), and
    as the whole first component it may be any directory (``/$d/x``)."""
    text = through_dev_links(text)  # /dev/fd/../root/etc is /etc (review 40's F2)
    if not text.startswith("/"):
        return False
    if "$" not in text and "*" not in text and "?" not in text and "[" not in text:
        text = posixpath.normpath(text)
        if is_descriptor(text):
            return False  # > /dev/stderr, /dev/fd/3: a descriptor the script holds
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts:
        return True  # "/": every relative name after it is a system path
    first = EXPANSION.sub("*", parts[0])
    if first == "..":
        return True  # /.. is /
    return _first_component_may_be_system(first)


def destination_path(word: str) -> str:
    """The path in a destination word: after an option's ``=``
    (``--target-directory=/etc``, ``--target=/etc``, ``of=/etc/x``) or
    ``-t`` (``-t/etc``)."""
    if word.startswith("--") and "=" in word:
        return word.split("=", 1)[1]
    if word.startswith("-t") and len(word) > 2:
        return word[2:]
    if word.startswith("of="):
        return word[3:]
    return word


#: Environment variables that name where programs write their files
#: (``mktemp``, caches, configs): a templated value in one is a destination
#: (the nineteenth review's ``TMPDIR: /etc/profile.d``).
DESTINATION_ENV = frozenset(
    {"TMPDIR", "TMP", "TEMP", "TEMPDIR", "HOME", "XDG_RUNTIME_DIR"}
    | {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_BIN_HOME"}
)


def names_program_directory(path: str, search_path: str, home: str) -> bool:
    """Might ``path`` (absolute, as the render made it) land where a later
    bare command name is looked up (a directory on ``search_path``, the
    runner's ``PATH``: ``~/.cargo/bin/wc`` ran as ``wc``, the nineteenth
    review) or among the dot-files of ``home`` that programs load
    (``~/.bashrc``, ``~/.local/lib/.../site-packages``, ``~/.config``)?"""
    if not path.startswith("/"):
        return False
    path = posixpath.normpath(through_dev_links(path))
    for directory in search_path.split(":"):
        if directory.startswith("/") and _inside(path, posixpath.normpath(directory)):
            return True
    if home.startswith("/") and posixpath.normpath(home) != "/":
        home = posixpath.normpath(home)
        if _inside(path, home):
            rest = path[len(home) :].lstrip("/")
            return rest == "" or rest.startswith(".")
    return False


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def program_search_path() -> str:
    """Where a later bare command name or the runner's own next start finds
    code: the runner's ``PATH``, then its Python prefix and site-packages
    (a venv's ``lib/.../site-packages/x.pth`` runs in every later
    ``runner``: the twentieth review's V1)."""
    import os
    import site
    import sys

    found = {sys.prefix, sys.exec_prefix, *site.getsitepackages()}
    python = sorted(d for d in found if d.startswith("/") and d.strip("/"))
    return ":".join([os.environ.get("PATH", ""), *python])


def runner_home() -> str:
    """The runner's ``HOME``, whose dot-files programs load."""
    import os

    return os.environ.get("HOME", os.path.expanduser("~"))


def names_program_place(text: str) -> bool:
    """Might ``text`` (a path as a script spells it; ``~`` is the runner's
    ``HOME``) be in a directory where programs or their start-up files are
    found (``names_program_directory`` with the runner's own)?"""
    home = runner_home()
    for spelled in ("~", "$HOME", "${HOME}"):
        if text == spelled or text.startswith(spelled + "/"):
            text = home + text[len(spelled) :]
            break
    else:
        if text.startswith("~"):  # ~root/.cargo/bin (review 24's K1)
            import contextlib
            import pwd

            user, _, rest = text[1:].partition("/")
            with contextlib.suppress(KeyError):  # no such user: bash keeps ~name
                text = pwd.getpwnam(user).pw_dir + ("/" + rest if rest else "")
    return names_program_directory(text, program_search_path(), home)
