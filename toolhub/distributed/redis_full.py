"""A full Redis told apart from a lost one.

With ``maxmemory`` reached under ``noeviction`` Redis answers every command that could grow
memory with ``OOM command not allowed``, inside a script as ``Error running script … -OOM``.
That is a live Redis refusing a write, not a lost host or a lost lease: the lease keepers of
workers and holders keep their runs (their renewals still land: ``lua/renew_many.lua``), retry
what was refused, and say so once (``FullRedis``) instead of a warning per tick that reads as
an outage. Operators see it as ``toolhub_worker_redis_full`` (docs/operations.md).
"""

from __future__ import annotations

import logging
import time

from redis import Redis
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

OOM_MARK = "OOM command not allowed"


def is_full(exc: RedisError) -> bool:
    """True when ``exc`` is Redis refusing a write for want of memory."""
    return isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and OOM_MARK in str(exc)
    )


#: How long Redis must look free again before a keeper says so: memory at the limit hovers
#: (a write frees a little, the next takes it), and one condition deserves one line.
SETTLE_S = 10.0


class FullRedis:
    """Whether Redis is full, as one keeper sees it (a refused write, or ``probe``); logs the
    change once each way: one line when Redis fills, one when it has taken writes again for
    ``SETTLE_S``."""

    def __init__(self, logger: logging.Logger, who: str) -> None:
        self.logger = logger
        self.who = who
        self.full = False
        self._full_since = 0.0
        self._free_since: float | None = None

    def refused(self, why: object) -> None:
        self._free_since = None
        if not self.full:
            self.full = True
            self._full_since = time.monotonic()
            self.logger.error(
                "%s: Redis is full (maxmemory reached, noeviction) and refuses writes: %s. "
                "Running calls keep their leases and keep running; what was refused is "
                "retried. Free memory or raise maxmemory.",
                self.who,
                why,
            )

    def accepted(self) -> None:
        if not self.full:
            return
        now = time.monotonic()
        if self._free_since is None:
            self._free_since = now
        if now - self._free_since >= SETTLE_S:
            self.full = False
            self.logger.warning(
                "%s: Redis takes writes again, after %.0f s full",
                self.who,
                self._free_since - self._full_since,
            )

    def probe(self, client: Redis) -> bool:
        """Look at Redis's memory (a read, answered when full): renewals land on a full
        Redis, so a keeper whose other writes had nothing to do would not see it otherwise.
        Returns whether it is full; a Redis that does not answer ``INFO`` leaves it as it was."""
        try:
            info = client.info("memory")
        except RedisError:
            return self.full
        limit = int(info.get("maxmemory") or 0)
        used = int(info.get("used_memory") or 0)
        if limit > 0 and used >= limit:
            self.refused(f"{used} bytes used of a maxmemory of {limit}")
        else:
            self.accepted()
        return self.full
