"""Programs that run inside a sandbox container, sent to it as text.

``exec_helper.py`` (any python3, stdlib only) and ``exec_helper.sh`` (a
POSIX shell) serve the fast exec channel (``sandboxes/docker/channel``).
The library never imports them (an import-linter contract holds it); tests
import ``exec_helper.py`` to check its parts in-process.
"""
