"""Claims that survive a failover: a worker waits for its claim to reach a replica before the
call's side effects start.

Redis replicates asynchronously. A claim the primary acknowledged can be missing on the replica
Sentinel promotes when the primary dies a moment later: the call's message is back in its queue
on the new primary, another worker claims it as the same attempt, and two copies run with no
record saying so. So in a Sentinel fleet a worker, after its claim and before running anything,
writes one small marker and sends ``WAIT`` on the same connection: every write before the
marker (the claim among them) is then on ``replicas`` replicas, and the replica Sentinel
promotes (the most up to date) holds the claim. A claim still unconfirmed after ``timeout_ms``
(the replica down or far behind) runs anyway, as a fleet without replicas would: the worker
counts it (``toolhub_worker_claims_unreplicated_total``) and logs it, once a minute at most.
"""

from __future__ import annotations

import logging
import threading
import time

from redis import Redis
from redis.exceptions import RedisError

__all__ = ["ClaimReplication"]

logger = logging.getLogger("toolhub.worker")

#: How long the marker lives: it only carries the write ``WAIT`` counts.
MARKER_MS = 60_000
WARN_EVERY_S = 60.0


class ClaimReplication:
    """``confirm()`` after each claim: True when the claim is on ``replicas`` replicas (always,
    when ``replicas`` is 0: a fleet without Sentinel)."""

    def __init__(self, client: Redis, key: str, replicas: int, timeout_ms: int) -> None:
        self.client = client
        self.key = key
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self._warned_at = 0.0
        self._lock = threading.Lock()

    def confirm(self, owner: str) -> bool:
        if self.replicas <= 0:
            return True
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.key, owner, px=MARKER_MS)
        pipe.wait(self.replicas, self.timeout_ms)
        try:
            acked = int(pipe.execute()[1])
        except RedisError as exc:
            self._warn(f"could not confirm it ({exc})")
            return False
        if acked >= self.replicas:
            return True
        self._warn(f"{acked} of {self.replicas} replica(s) confirmed it in {self.timeout_ms} ms")
        return False

    def _warn(self, why: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._warned_at < WARN_EVERY_S:
                return
            self._warned_at = now
        logger.warning(
            "a claim ran before reaching a replica: %s; a failover now could run its call twice",
            why,
        )
