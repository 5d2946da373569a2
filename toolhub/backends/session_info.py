"""Who the container belongs to: the session id and its private directory (logs, state).

Reminders get only the container, not a call context; this is how they know which session's
background tasks are theirs to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: str
    session_dir: Path
