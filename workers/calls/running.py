"""One run of a call in this process: its id, its cancel token, the attempt it claimed and
when Redis last confirmed its lease (``workers/lifecycle/fencing.py``).

Its own module, apart from ``runtime.py``, because the background holder keeps runs too and
must not import what a worker runtime needs (Celery, the tool catalog): a background command
that finds no holder waits for the spawn of one, import time included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from toolhub.core import CancelToken


@dataclass(slots=True)
class Running:
    call_id: str
    token: CancelToken
    attempt: int = 0
    #: Monotonic time at or before which Redis last confirmed this run's lease: its creation
    #: (before the claim was sent), then each confirmed renewal's sending.
    leased_at: float = field(default_factory=time.monotonic)
