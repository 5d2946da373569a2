"""The lease keeper: one thread per worker that renews the leases of its running calls and
sweeps for calls whose worker died.

Why leases and not Celery's redelivery: on Redis the visibility timeout is the only backstop,
it must sit above the longest run (hours), and a redelivered message cannot tell a dead
worker from a slow one. A lease renewed every sixth of its length says exactly that: a call
whose lease expired has no live worker, and any worker's sweep re-enqueues it as the next
attempt (bounded by the call's attempt limit), while a redelivery of a call with a live lease
is dropped as a duplicate. The sweep itself (``sweeper.py``) also recovers messages a dead
worker took off the queue before claiming them, and reaps lost commands' cgroups. It runs
every quarter lease (jittered, so a fleet's sweeps spread out): with a claim deadline of half a
lease, a message taken by a dead worker is running again within three quarters of a lease.

Beside it runs the self-fence (``fencing.py``): a run whose renewal Redis has not confirmed for
most of a lease (this worker cut off from Redis) is stopped before its lease can end, so the
fleet's re-run never overlaps it. A full Redis (``maxmemory``) is not a lost one: renewals still
land, a refused sweep is retried next pass, and the condition is logged once and shown as
``toolhub_worker_redis_full`` (``toolhub/distributed/redis_full.py``).
"""

from __future__ import annotations

import logging
import random
import threading
import time

from redis.exceptions import RedisError

from toolhub.core.tool import LEASE_LOST
from toolhub.distributed.redis_full import FullRedis, is_full
from toolhub.distributed.script_replies import RenewReply
from toolhub.logs import call_context
from workers.calls.runtime import WorkerRuntime

from .fencing import SelfFence, confirmed, gave_up
from .metrics import metrics
from .sweeper import reap_leftovers, reserved_unstarted, sweep
from .unacked import clean_unacked

logger = logging.getLogger("toolhub.worker.leases")


class LeaseKeeper(threading.Thread):
    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(name="toolhub-leases", daemon=True)
        self.runtime = runtime
        self.stop_event = threading.Event()
        self._reaper: threading.Thread | None = None
        self.full = FullRedis(logger, "lease keeper")
        self.fence = SelfFence(
            runtime.running,
            runtime.settings.lease_seconds,
            on_fence=lambda _: metrics.leases_fenced.inc(),
        )

    def run(self) -> None:
        lease = self.runtime.settings.lease_seconds
        next_sweep = 0.0
        self.fence.start()
        try:
            while True:
                try:
                    self.renew()
                    if time.monotonic() >= next_sweep:
                        metrics.redis_full.set(self.full.probe(self.runtime.store.client))
                        metrics.recovered.inc(sweep(self.runtime))
                        self._reap()
                        next_sweep = time.monotonic() + lease / 4 * random.uniform(0.5, 1.0)
                        metrics.unacked_removed.inc(clean_unacked(self.runtime))
                except RedisError as exc:
                    if is_full(exc):  # a live Redis out of memory: the next pass retries
                        self.full.refused(exc)
                        metrics.redis_full.set(1)
                        metrics.redis_full_refusals.inc()
                    else:
                        logger.warning("lease keeper: Redis unreachable: %s", exc)
                except Exception:
                    logger.exception("lease keeper failed; continuing")
                if self.stop_event.wait(lease / 6):
                    return
        finally:
            self.fence.stop()

    def _reap(self) -> None:
        """Start reaping leftover command cgroups unless the last pass is still at it."""
        if self._reaper is not None and self._reaper.is_alive():
            return
        self._reaper = threading.Thread(
            target=reap_leftovers, args=(self.runtime,), name="toolhub-cgroup-reap", daemon=True
        )
        self._reaper.start()

    def renew(self) -> None:
        """Renew every claimed run's lease but those that gave their call up (fenced, lost,
        or stuck in a pool thread that does not come back)."""
        claimed = [
            r
            for r in self.runtime.running()
            if r.attempt > 0 and not gave_up(r) and not self.runtime.stuck(r)
        ]
        sent = time.monotonic()
        codes = self.runtime.records.renew([(r.call_id, r.attempt) for r in claimed])
        for running, code in zip(claimed, codes, strict=True):
            if code in (RenewReply.RENEWED, RenewReply.CANCEL_REQUESTED):
                confirmed(running, sent)
            if code is RenewReply.LOST:
                with call_context(running.call_id):
                    logger.warning("call %s: lease lost; stopping this attempt", running.call_id)
                running.token.cancel(LEASE_LOST)
            elif code is RenewReply.CANCEL_REQUESTED:
                running.token.cancel("cancelled")
        self.runtime.recovery.touch_reserved(reserved_unstarted(self.runtime))

    def stop(self) -> None:
        self.stop_event.set()
        self.fence.stop()
