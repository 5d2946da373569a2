"""Every reach into another library's internals, one module per library, each with the
library's plain public path beside it.

toolhub patches or reads private parts of a few libraries where the public API cannot do what
a call needs (for example screening a poisoned message before kombu delivers it). Those reaches
break silently when the library changes, so they live here and nowhere else: each module names
the version it was written against (pinned as an upper bound in pyproject), and each can be
switched off. ``TOOLHUB_PLAIN_LIBRARIES`` names the libraries whose plain path to take
(``kombu,redis``), or ``all``; the test suite runs both paths.
"""

from __future__ import annotations

import os

__all__ = ["plain"]


def plain(library: str) -> bool:
    """Whether ``library``'s fence is off: take its plain public path instead of the reach."""
    names = {
        name.strip().lower()
        for name in os.environ.get("TOOLHUB_PLAIN_LIBRARIES", "").split(",")
        if name.strip()
    }
    return "all" in names or library.lower() in names
