"""toolhub's Lua scripts (the call protocol's, and the few standalone ones of the answer box,
the unacked sweep and the remote-task ledger), one ``.lua`` file per script, read once from the
installed package (package data in pyproject), so a wheel carries them beside this module.

Each script's header comment lists its reply codes by name; ``toolhub.distributed.script_replies``
holds the same names as Python enums, and a test checks that the two agree (``reply_names``).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["reply_names", "source"]

#: A header line naming one reply: ``--   NAME = 0`` or ``--   NAME = 'text'``.
_REPLY = re.compile(r"^--\s+([A-Z_]+) = (-?\d+|'[a-z_]+')")


@functools.cache
def source(name: str) -> str:
    """The text of ``<name>.lua``."""
    return resources.files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


def reply_names(name: str) -> dict[str, int | str]:
    """The replies ``<name>.lua``'s header lists, by name."""
    names: dict[str, int | str] = {}
    for line in source(name).splitlines():
        if not line.startswith("--"):
            break
        match = _REPLY.match(line)
        if match:
            value = match.group(2)
            names[match.group(1)] = value.strip("'") if value.startswith("'") else int(value)
    return names
