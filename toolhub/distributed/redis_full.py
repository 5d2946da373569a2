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

from redis import Redis
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

OOM_MARK = "OOM command not allowed"


def is_full(exc: RedisError) -> bool:
    """True when ``exc`` is Redis refusing a write for want of memory."""
    return isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and OOM_MARK in str(exc)
    )


class FullRedis:
    """Whether the last write of one keeper was refused for memory; logs the change once each
    way (one line when Redis fills, one when it takes writes again)."""

    def __init__(self, logger: logging.Logger, who: str) -> None:
        self.logger = logger
        self.who = who
        self.full = False
        self.refusals = 0

    def refused(self, exc: RedisError) -> None:
        self.refusals += 1
        if not self.full:
            self.full = True
            self.logger.error(
                "%s: Redis is full (maxmemory reached, noeviction) and refuses writes: %s. "
                "Running calls keep their leases and keep running; what was refused is "
                "retried. Free memory or raise maxmemory.",
                self.who,
                exc,
            )

    def accepted(self) -> None:
        if self.full:
            self.full = False
            self.logger.warning(
                "%s: Redis takes writes again (%d refused while it was full)",
                self.who,
                self.refusals,
            )
            self.refusals = 0


def still_full(client: Redis) -> bool:
    """Whether Redis is still at its ``maxmemory`` (a read: answered when full)."""
    info = client.info("memory")
    limit = int(info.get("maxmemory") or 0)
    return limit > 0 and int(info.get("used_memory") or 0) >= limit
