"""The holder's lease keeping: it renews the leases of the background commands it holds every
sixth of the lease, beside a self-fence (``workers/lifecycle/fencing.py``).

A command whose renewal Redis has not confirmed for most of a lease (the holder cut off from
Redis) is killed before its lease can end, so its re-run elsewhere never overlaps it. A full
Redis is not a lost one: renewals still land (``lua/renew_many.lua``); a refusal is logged once
and retried on the next tick. Threat: none beyond the worker's lease keeper's; the holder only
renews attempts it started itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from redis.exceptions import RedisError

from toolhub.core.tool import LEASE_LOST
from toolhub.distributed.records import CallRecords
from toolhub.distributed.redis_full import FullRedis, is_full
from toolhub.distributed.script_replies import RenewReply
from workers.calls.running import Running
from workers.lifecycle.fencing import SelfFence, confirmed, gave_up

logger = logging.getLogger("toolhub.holder")

__all__ = ["keep_leases"]


def keep_leases(
    records: CallRecords,
    lease_seconds: float,
    held_runs: Callable[[], list[Running]],
    stopping: threading.Event,
) -> None:
    """Until ``stopping`` is set: renew what ``held_runs`` lists, fence what Redis stops
    confirming."""
    full = FullRedis(logger, "holder")
    fence = SelfFence(held_runs, lease_seconds)
    fence.start()
    try:
        while not stopping.wait(lease_seconds / 6):
            held = [r for r in held_runs() if not gave_up(r)]
            if not held:
                continue
            sent = time.monotonic()
            try:
                codes = records.renew([(r.call_id, r.attempt) for r in held])
                full.probe(records.client)
            except RedisError as exc:
                if is_full(exc):
                    full.refused(exc)
                else:
                    logger.warning("holder: leases not renewed: %s", exc)
                continue
            for running, code in zip(held, codes, strict=True):
                if code in (RenewReply.RENEWED, RenewReply.CANCEL_REQUESTED):
                    confirmed(running, sent)
                if code is RenewReply.LOST:
                    logger.warning("call %s: lease lost; stopping this attempt", running.call_id)
                    running.token.cancel(LEASE_LOST)
                elif code is RenewReply.CANCEL_REQUESTED:
                    running.token.cancel("cancelled")
    finally:
        fence.stop()
