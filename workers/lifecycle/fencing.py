"""Self-fencing: a run whose lease this process cannot renew is stopped before the lease could
have ended on Redis, so no lost attempt ever runs beside its re-run.

Threat: a worker (or holder) cut off from Redis (a partition, a frozen proxy, a host whose
network hangs) keeps its commands running while the rest of the fleet sees the lease lapse and
re-runs the call, or fails it as "may have partly run" while it still runs. Leases cannot stop
that alone: the process that should notice is the one that cannot hear Redis.

So each run carries ``leased_at``, the moment (this process's monotonic clock) at or before
which Redis last confirmed its lease: the registration before its claim, then the sending of
each renewal Redis answered ``renewed``. Redis then holds the lease until at least
``leased_at + lease`` (its script stamps the lease after the request left). The fence, a
thread that never touches Redis (a renewal may hang for the client's socket timeout), cancels
a run's token with ``lease_lost`` once ``fence_after(lease)`` has passed since ``leased_at``:
its command gets SIGTERM, then SIGKILL after ``KILL_GRACE_S``, and the attempt writes nothing
(the next attempt, or the sweep's ``worker_lost``, answers the call).

The margin (``fence_after``): ``KILL_GRACE_S`` plus a sixth of the lease (one renewal period of
the lease keeper: the fence's own tick and a slow scheduler), so the last process of the run is
dead a sixth of a lease before the lease can end. A fence sooner than two thirds of the lease
would fire on a healthy but busy worker (renewals come every sixth), so short leases fence at
two thirds: below 6 s the kill has a third of the lease, not the full margin.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from toolhub.backends.process import KILL_GRACE_S
from toolhub.core.tool import LEASE_LOST, REDIS_LOST
from toolhub.logs import call_context
from workers.calls.running import Running

logger = logging.getLogger("toolhub.worker.fencing")


def fence_after(lease_seconds: float) -> float:
    """Seconds without a confirmed renewal after which a run is stopped."""
    return max(lease_seconds - KILL_GRACE_S - lease_seconds / 6, lease_seconds * 2 / 3)


def gave_up(running: Running) -> bool:
    """The run gave its call up (fenced, or told its lease is lost): never renew it again, a
    renewal must not keep a lease for processes already stopped."""
    token = running.token
    return token.cancelled and token.reason in (LEASE_LOST, REDIS_LOST)


def confirmed(running: Running, sent_at: float) -> None:
    """Redis renewed ``running``'s lease by a request sent at ``sent_at`` (monotonic)."""
    if sent_at > running.leased_at:
        running.leased_at = sent_at


class SelfFence(threading.Thread):
    """Stops the claimed runs of ``runs()`` whose lease went unconfirmed too long."""

    def __init__(
        self,
        runs: Callable[[], list[Running]],
        lease_seconds: float,
        on_fence: Callable[[Running], None] | None = None,
    ) -> None:
        super().__init__(name="toolhub-fence", daemon=True)
        self.runs = runs
        self.after = fence_after(lease_seconds)
        self.tick = min(0.25, lease_seconds / 20)
        self.on_fence = on_fence
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.tick):
            try:
                self.check(time.monotonic())
            except Exception:
                logger.exception("self-fence check failed; continuing")

    def check(self, now: float) -> list[Running]:
        """Fence every overdue run; returns those fenced now."""
        fenced = []
        for running in self.runs():
            if running.attempt <= 0 or running.token.cancelled:
                continue
            silent = now - running.leased_at
            if silent < self.after:
                continue
            with call_context(running.call_id):
                logger.error(
                    "call %s: no lease renewal confirmed by Redis for %.1f s (attempt %d); "
                    "stopping its processes before the lease can end (self-fencing)",
                    running.call_id,
                    silent,
                    running.attempt,
                )
            running.token.cancel(LEASE_LOST)
            if self.on_fence is not None:
                self.on_fence(running)
            fenced.append(running)
        return fenced

    def stop(self) -> None:
        self._stop_event.set()
