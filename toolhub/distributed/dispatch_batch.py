"""The dispatches of one event-loop turn, sent to Redis as one pipeline.

A process that starts many calls at once (an agent fanning out, a gateway under a burst, a
``gather`` of calls) would hold its event loop for one blocking round trip per call if each
record-and-enqueue script ran alone, and no progress of any call already running would reach
its caller meanwhile. Here each dispatch is
queued, and the first of a turn schedules one flush for the next turn: every script queued by
then has been written on one connection, and the flush reads their replies (one stall of the
loop) and gives each caller its own. A lone call pays two more turns of the loop, no extra
round trip.

A large turn is written in slices of ``SEND_EVERY`` as its dispatches come, not all at its
end, so that Redis and the workers start on the first calls while the loop still prepares
the others; the replies are still read once, at the flush.

Scripts go out as ``EVALSHA``, packed by hiredis (``evalsha.send_scripts``); a reply saying
Redis does not know the script (after a ``SCRIPT FLUSH`` or a restart) is retried alone
through redis-py's ``Script``, which loads it.
A dispatch whose caller was cancelled before its write is dropped unsent: nothing is recorded
or queued for a call nobody waits for (once written, it runs, as a call whose caller went
away after its dispatch always did; ``Session.cancel`` stops it). A broken connection sends
the turn again through a redis-py pipeline and its retries (the script is idempotent for a
dispatch's run id); an error left after those fails every dispatch of the turn, as it would
have failed each alone.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Any

from redis.connection import Connection
from redis.exceptions import ConnectionError, NoScriptError, RedisError, TimeoutError

from .evalsha import read_replies, run_pipeline, send_scripts
from .quota import OverQuota, script_reply
from .records import CallRecords
from .replies import untyped
from .script_replies import CreateAndEnqueueReply

#: A turn's dispatches are written as soon as this many wait, not all at its end: otherwise a
#: ``gather`` of 1,000 calls keeps Redis and the workers idle while this loop prepares every
#: one of them.
SEND_EVERY = 32


@dataclass(slots=True)
class _Pending:
    keys: list[Any]
    args: list[Any]
    reply: asyncio.Future[CreateAndEnqueueReply | OverQuota]


@dataclass(slots=True)
class _Turn:
    """One loop turn's dispatches: those before ``sent`` are written on ``conn``, their
    replies unread until ``drained``; ``broken`` when a write failed and the flush must send
    them all again."""

    calls: list[_Pending] = field(default_factory=list)
    sent: int = 0
    conn: Connection | None = None
    broken: bool = False
    drained: bool = False


class DispatchBatches:
    """``CallRecords.create_and_enqueue``, awaited, batched per event loop and turn."""

    def __init__(self, records: CallRecords) -> None:
        self.records = records
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turn] = (
            weakref.WeakKeyDictionary()
        )

    async def create_and_enqueue(
        self, keys: list[Any], args: list[Any]
    ) -> CreateAndEnqueueReply | OverQuota:
        """The ``create_and_enqueue`` script with these keys and arguments
        (``CallRecords.create_and_enqueue_args``), in this turn's pipeline; its reply (a
        refusal over a quota as ``OverQuota``)."""
        loop = asyncio.get_running_loop()
        pending = _Pending(keys, args, loop.create_future())
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = _Turn()
            loop.call_soon(self._flush, loop)
        turn.calls.append(pending)
        if len(turn.calls) - turn.sent >= SEND_EVERY:
            self._send(turn)
        return await pending.reply

    def _send(self, turn: _Turn) -> None:
        """Write the turn's unsent dispatches, leaving out those whose caller is gone."""
        turn.calls[turn.sent :] = [p for p in turn.calls[turn.sent :] if not p.reply.done()]
        unsent = turn.calls[turn.sent :]
        turn.sent = len(turn.calls)
        if not unsent or turn.broken:
            return
        script = self.records.scripts.create_and_enqueue
        try:
            if turn.conn is None:
                turn.conn = self.records.client.connection_pool.get_connection()
            send_scripts(turn.conn, script, [(p.keys, p.args) for p in unsent])
        except (RedisError, TypeError):
            turn.broken = True  # the flush takes the stock path, which says what failed

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        turn = self._turns.pop(loop)
        try:
            self._send(turn)
            replies = self._replies(turn)
        except RedisError as exc:
            replies = [exc] * len(turn.calls)
        finally:
            if turn.conn is not None:
                if not turn.drained:
                    # Replies still on their way must not reach its next user (the pool checks
                    # only for those already arrived).
                    untyped(turn.conn.disconnect)()
                self.records.client.connection_pool.release(turn.conn)
        script = self.records.scripts.create_and_enqueue
        for p, reply in zip(turn.calls, replies, strict=True):
            if p.reply.done():
                continue  # cancelled after its write: the call was dispatched all the same
            try:
                if isinstance(reply, NoScriptError):
                    reply = script(keys=p.keys, args=p.args)
                if isinstance(reply, Exception):
                    raise reply
                created = script_reply(reply)
                p.reply.set_result(
                    created if isinstance(created, OverQuota) else CreateAndEnqueueReply(created)
                )
            except RedisError as exc:
                p.reply.set_exception(exc)

    def _replies(self, turn: _Turn) -> list[Any]:
        """Every written dispatch's reply, in order; all of them sent again through a
        redis-py pipeline (idempotent for a dispatch's run id) when the connection broke."""
        if not turn.calls:
            return []
        if not turn.broken and turn.conn is not None:
            try:
                replies = read_replies(turn.conn, len(turn.calls))
                turn.drained = True
                return replies
            except (ConnectionError, TimeoutError):
                pass
        script = self.records.scripts.create_and_enqueue
        return run_pipeline(self.records.client, script, [(p.keys, p.args) for p in turn.calls])
