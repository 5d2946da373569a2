"""Who the container belongs to: the session id and its private directory (logs, state).

Reminders get only the container, not a call context; this is how they know which session's
background tasks are theirs to report. ``remove_scratch`` clears what a deleted session
leaves behind.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: str
    session_dir: Path


#: The parts of a session's directory that are scratch: command logs and the private tmp.
SCRATCH_DIRS = ("terminal", "tmp")


def remove_scratch(session_dir: Path) -> None:
    """Remove a session's command logs and tmp (when it is deleted): they count against
    its tenant's disk and no one reads them once the session is gone. Its state stays."""
    for name in SCRATCH_DIRS:
        shutil.rmtree(session_dir / name, ignore_errors=True)
