"""One run of a call in this process: its id, its cancel token and the attempt it claimed.

Its own module, apart from ``runtime.py``, because the background holder keeps runs too and
must not import what a worker runtime needs (Celery, the tool catalog): a background command
that finds no holder waits for the spawn of one, import time included.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolhub.core import CancelToken


@dataclass(slots=True)
class Running:
    call_id: str
    token: CancelToken
    attempt: int = 0
