"""The marker a reader sees where older output of a call was trimmed to bound memory.

Threat: a call that prints without end makes whatever holds its events (Redis' stream, the
gateway's log of the call) grow without end. Both keep a bounded window and put this marker
where they cut, so the model and the client read that output is missing, how much, and where
the full output is (the command's log file; ``task_output`` for a background task).
"""

from __future__ import annotations

from .stream import Progress

#: The ``subkind`` of the marker (a ``custom`` progress item; docs/interfaces.md).
TRIMMED = "output_trimmed"

__all__ = ["TRIMMED", "trimmed_marker"]


def trimmed_marker(nbytes: int, *, by: str) -> Progress:
    """The marker for ``nbytes`` of earlier output trimmed by ``by`` (what kept the window)."""
    text = (
        f"[{nbytes} bytes of earlier output trimmed ({by}); full output: the command's log "
        "file, or task_output for a background task]"
    )
    return Progress.custom(TRIMMED, {"bytes": nbytes, "by": by, "text": text})
