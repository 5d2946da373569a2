"""A queue's backlog: the calls past their tenant's fair share that wait as ids, not messages.

A Celery message is ~1.4 KB; a call that waits as one in a 100,000-call backlog holds Redis
memory for nothing (issue 43). So the create-and-enqueue script pushes a call past its
tenant's share as a message onto the queue's sunk list (``fair.py``) only while that list holds
fewer than ``Settings.backlog_window`` messages and no backlog waits; beyond, it pushes the call
id onto the queue's backlog (``Keys.backlog``), and the record, which keeps the message, names
the backlog (``qkey``). The sunk list and its backlog are one FIFO: nothing changes in who runs
first, and a backlogged call has no claim deadline (no worker can take it, so no sweep need
look for it).

The workers of the queue promote the oldest ids as the sunk list drains (``promote``, run by
each worker's ``BacklogPromoter``): they build each call's message from its record, as the
sweep's re-enqueue does, and ``lua/promote.lua`` moves the id off the backlog and the message
onto the sunk list in one step, so a promoter that dies loses no call; a concurrent promoter
finds the ids taken and stops.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import replies
from .codec import unpack
from .fair import sunk_queue
from .records import CallRecords

#: Ids promoted per script: Redis runs each script whole, so a batch stays short.
PROMOTE_BATCH = 500

#: Builds the level-0 message (kombu's payload) of a call's stored message, with the trace
#: context the dispatcher stored beside it (``trace``: its message headers), or None.
Build = Callable[[dict[str, Any], dict[str, Any] | None], bytes | None]


@dataclass(frozen=True, slots=True)
class Promotion:
    """One round: how many ids waited in the backlog before it, and how many it took off."""

    waiting: int
    taken: int


class Backlogs:
    def __init__(self, records: CallRecords) -> None:
        self.client = records.client
        self.keys = records.keys
        self.settings = records.settings
        self.scripts = records.scripts

    def promote(self, queue: str, build: Build, window: int) -> Promotion:
        """Once ``queue``'s sunk list is down to half ``window`` messages, top it up to
        ``window`` from the backlog, oldest first (at most ``PROMOTE_BATCH`` a round)."""
        backlog, sunk = self.keys.backlog(queue), sunk_queue(queue.encode())
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(backlog)
        pipe.llen(sunk)
        waiting, held = (int(n) for n in pipe.execute())
        if not waiting or held > window // 2:
            return Promotion(waiting, 0)
        count = min(waiting, window - held, PROMOTE_BATCH)
        ids = [i.decode() for i in reversed(replies.lrange(self.client, backlog, -count, -1))]
        pipe = self.client.pipeline(transaction=False)
        for cid in ids:
            pipe.hmget(self.keys.call(cid), "status", "qkey", "run_id", "message", "trace")
        calls: list[str] = []
        args: list[Any] = [self.settings.claim_deadline_seconds]
        for cid, (status, qkey, run_id, message, trace) in zip(ids, pipe.execute(), strict=True):
            payload = b""
            if status == b"queued" and qkey == backlog.encode() and message and run_id:
                built = build(unpack(message), json.loads(trace) if trace else None)
                if built is None:
                    break  # this process cannot build messages: leave the rest waiting
                payload = built
            calls.append(cid)
            args += [cid, run_id or b"", payload]
        if not calls:
            return Promotion(waiting, 0)
        keys: list[str | bytes] = [backlog, sunk, self.keys.pending]
        keys += [self.keys.call(c) for c in calls]
        return Promotion(waiting, int(self.scripts.promote(keys=keys, args=args)))
