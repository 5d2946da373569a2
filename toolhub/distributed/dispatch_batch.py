"""The dispatches of one event-loop turn, sent to Redis as one pipeline.

A process that starts many calls at once (an agent fanning out, a gateway under a burst, a
``gather`` of calls) used to run each call's record-and-enqueue script as its own blocking
round trip on its event loop: 500 calls held the loop for 500 round trips, one after another,
and no progress of any call already running reached its caller meanwhile (the first lines of
500 long commands arrived 0.6 s late, ``bench/bench_long_commands.py``). Here each dispatch is
queued, and the first of a turn schedules one flush for the next turn: every script queued by
then goes out in one pipeline (one write, one read, one stall of the loop), and each caller
gets its own reply. A lone call pays two more turns of the loop (tens of microseconds), no
extra round trip.

Scripts go out as ``EVALSHA``, packed by hiredis in one write (``evalsha.run_scripts``); a
reply saying Redis does not know the script (after a ``SCRIPT FLUSH`` or a restart) is retried
alone through redis-py's ``Script``, which loads it.
A dispatch whose caller was cancelled before the flush is dropped unsent: nothing is recorded
or queued for a call nobody waits for. A broken connection sends the batch again through a
redis-py pipeline and its retries (the script is idempotent for a dispatch's run id); an error
left after those fails every dispatch of the batch, as it would have failed each alone.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError, RedisError

from .evalsha import run_scripts
from .records import CallRecords


@dataclass(slots=True)
class _Pending:
    keys: list[Any]
    args: list[Any]
    reply: asyncio.Future[int]


class DispatchBatches:
    """``CallRecords.create_and_enqueue``, awaited, batched per event loop and turn."""

    def __init__(self, records: CallRecords) -> None:
        self.records = records
        self._pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Pending]] = (
            weakref.WeakKeyDictionary()
        )

    async def create_and_enqueue(self, keys: list[Any], args: list[Any]) -> int:
        """The ``create_and_enqueue`` script with these keys and arguments
        (``CallRecords.create_and_enqueue_args``), in this turn's pipeline; its reply."""
        loop = asyncio.get_running_loop()
        pending = _Pending(keys, args, loop.create_future())
        batch = self._pending.setdefault(loop, [])
        batch.append(pending)
        if len(batch) == 1:
            loop.call_soon(self._flush, loop)
        return await pending.reply

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = [p for p in self._pending.pop(loop, []) if not p.reply.done()]
        if not batch:
            return
        script = self.records.scripts.create_and_enqueue
        try:
            replies = run_scripts(self.records.client, script, [(p.keys, p.args) for p in batch])
        except RedisError as exc:
            for p in batch:
                p.reply.set_exception(exc)
            return
        for p, reply in zip(batch, replies, strict=True):
            try:
                if isinstance(reply, NoScriptError):
                    reply = script(keys=p.keys, args=p.args)
                if isinstance(reply, Exception):
                    raise reply
                p.reply.set_result(int(reply))
            except RedisError as exc:
                p.reply.set_exception(exc)
