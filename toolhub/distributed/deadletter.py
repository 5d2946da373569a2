"""The dead-letter list: queue items a worker refused to run, kept for an operator to look at.

A worker that takes an item it cannot or must not run (undecodable, not a toolhub message, not
signed with the fleet key) neither crashes nor drops it silently: the raw bytes go to
``<prefix>deadletter`` (``toolhub:deadletter``), newest first, with when, why and from which
queue. The list is bounded (``MAX_ENTRIES``, ``LTRIM`` in the same transaction), and so is
each entry (``MAX_RAW_BYTES`` of the item, its full size and SHA-256 beside them), so a flood
of garbage costs Redis a few megabytes at most, never its memory.

Read it with ``redis-cli LRANGE toolhub:deadletter 0 9``: each entry is one JSON object,
``{"at", "reason", "why", "queue", "worker", "call_id", "size", "sha256", "truncated",
"raw_b64"}``. Entries hold the items as they were on the queue (arguments included), so they
stay in Redis, inside the same trust boundary as the queues; logs only say that and why.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time

from redis import Redis

from .keys import Keys

#: Entries kept; older ones are trimmed away as new ones arrive.
MAX_ENTRIES = 1000
#: Bytes of each refused item kept in its entry.
MAX_RAW_BYTES = 64 * 1024


class DeadLetters:
    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.key = keys.deadletter

    def put(
        self,
        raw: bytes,
        *,
        reason: str,
        why: str,
        queue: str,
        worker: str,
        call_id: str | None = None,
    ) -> None:
        """Add one refused item (one round trip); raises ``RedisError`` when Redis is away."""
        entry = {
            "at": round(time.time(), 6),
            "reason": reason,
            "why": why,
            "queue": queue,
            "worker": worker,
            "call_id": call_id,
            "size": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "truncated": len(raw) > MAX_RAW_BYTES,
            "raw_b64": base64.b64encode(raw[:MAX_RAW_BYTES]).decode(),
        }
        pipe = self.client.pipeline(transaction=True)
        pipe.lpush(self.key, json.dumps(entry))
        pipe.ltrim(self.key, 0, MAX_ENTRIES - 1)
        pipe.execute()
