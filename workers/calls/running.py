"""One run of a call in this process: its id, its cancel token, the attempt it claimed and
when Redis last confirmed its lease (``workers/lifecycle/fencing.py``).

Its own module, apart from ``runtime.py``, because the background holder keeps runs too and
must not import what a worker runtime needs (Celery, the tool catalog): a background command
that finds no holder waits for the spawn of one, import time included.

A run also knows when it is stuck: asked to stop (cancelled, timed out, its lease lost, handed
back) and still not back after a grace period, or running past the longest run its kind may
have. Its pool thread is then held by something that will not end (a command nobody reads, a
tool that ignores its token); the lease keeper stops renewing its lease
(``WorkerRuntime.stuck``), so the fleet's sweep re-runs or fails the call as its policy says
instead of the call hanging while this worker renews it forever.
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
    #: The longest this run may legitimately take, in seconds (None: no bound).
    limit_s: float | None = None
    #: When it started here and when it was asked to stop (``time.monotonic``).
    started: float = field(default_factory=time.monotonic)
    stopping_since: float | None = None
    #: The worker logged it stuck once.
    reported_stuck: bool = False

    def __post_init__(self) -> None:
        self.token.on_cancel(self._stopping)

    def _stopping(self) -> None:
        if self.stopping_since is None:
            self.stopping_since = time.monotonic()

    def stuck(self, grace_s: float, now: float | None = None) -> bool:
        """Asked to stop more than ``grace_s`` ago, or running past ``limit_s`` plus it."""
        now = time.monotonic() if now is None else now
        if self.stopping_since is not None and now - self.stopping_since > grace_s:
            return True
        return self.limit_s is not None and now - self.started > self.limit_s + grace_s
