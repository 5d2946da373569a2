"""Reading one call's events in order, one at a time: the loop behind ``RedisStore.follow``
(every event, for streams and the gateway's SSE) and ``RedisStore.terminal`` (only the end,
for a caller that waits for a result).

Frames arrive on the call's pub/sub channel; every event also sits in the call's stream, so a
resync, a gap in the sequence numbers or a long silence costs a read of the stream, never an
event. A cursor is a plain object the caller awaits, not an async generator: a call that only
waits for its result holds no generator frames while in flight (the objects each in-flight
call holds are what brings a busy dispatcher's full garbage collections).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from redis.exceptions import RedisError

from toolhub.distributed.codec import StreamEvent, decode_item, parse_frame
from toolhub.distributed.pubsub import RESYNC, Subscription
from toolhub.errors import ErrorCode, ToolhubError

#: A follower that hears nothing re-reads the call's stream after this long (a safety net: a
#: lost frame is normally announced by a resync or a gap), doubling up to ``MAX_POLL_SECONDS``
#: while such reads find nothing the channel had not delivered.
POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 8.0
OUTAGE_POLL_SECONDS = 0.25

StreamReader = Callable[[str, int], list[StreamEvent]]
"""``(call_id, after_seq)`` → the stored events after ``after_seq`` (``RedisStore.read_events``)."""


class FollowLost(ToolhubError, ConnectionError):
    """Redis stayed unreachable longer than the follow bound; the call may still finish."""

    code = ErrorCode.FOLLOW_LOST

    def __init__(self, call_id: str, last_seq: int, seconds: float) -> None:
        super().__init__(
            f"lost contact with Redis for {seconds:.0f}s while following call {call_id} "
            f"(after event {last_seq}); the call may still finish: follow it again by its id"
        )
        self.call_id = call_id
        self.last_seq = last_seq


class RecordMissing(LookupError):
    """A stream read found neither events nor the call's record (``RedisStore`` raises it)."""


class RecordLost(FollowLost):
    """The call's record vanished while it was followed: Redis lost it (a failover to a replica
    that never received it, a restart without persistence, a flush). Nobody will write its
    answer; whether it ran is unknown."""

    def __init__(self, call_id: str, last_seq: int) -> None:
        ToolhubError.__init__(
            self,
            f"Redis no longer holds call {call_id} (after event {last_seq}): it was lost with "
            "Redis's data (a failover to a replica that did not have it, or a restart without "
            "persistence). It may have run, partly or fully; nothing will answer it",
        )
        self.call_id = call_id
        self.last_seq = last_seq


#: How long a call's record may be missing before its follower says it is lost: past the
#: moment between a dispatch and its record becoming visible on another connection.
MISSING_GRACE_SECONDS = 2.0


class EventCursor:
    """The events of ``call_id`` after ``after_seq``, in order, each once: ``await next()``.

    ``fresh``: the subscription was confirmed before the call was even enqueued, so no event
    can predate it and the first stream read is skipped (the dispatcher's fast path).
    ``next`` raises ``FollowLost`` when Redis stays unreachable longer than
    ``outage_seconds``."""

    __slots__ = (
        "_batch",
        "_missing_since",
        "_outage_seconds",
        "_outage_since",
        "_read",
        "_resync",
        "_silence",
        "_skip_confirmation",
        "_sub",
        "call_id",
        "last",
    )

    def __init__(
        self,
        call_id: str,
        sub: Subscription,
        read: StreamReader,
        *,
        after_seq: int = 0,
        fresh: bool = False,
        outage_seconds: float,
    ) -> None:
        self.call_id = call_id
        #: The sequence number of the last event handed out.
        self.last = after_seq
        self._sub = sub
        self._read = read
        self._outage_seconds = outage_seconds
        #: Events read from the stream and not handed out yet (None until a read finds some).
        self._batch: deque[StreamEvent] | None = None
        self._outage_since: float | None = None
        self._missing_since: float | None = None
        self._resync = not fresh
        self._skip_confirmation = fresh
        self._silence = POLL_SECONDS

    async def next(self) -> StreamEvent:
        """The next event; after the terminal one, do not call again."""
        while True:
            if self._batch:
                event = self._batch.popleft()
                self.last = event.seq
                return event
            if self._resync and await self._read_stream():
                continue
            wait = OUTAGE_POLL_SECONDS if self._outage_since else self._silence
            frame = await self._sub.get(wait)
            if frame is RESYNC and self._skip_confirmation:
                self._skip_confirmation = False
                continue
            if frame is None or frame is RESYNC or not isinstance(frame, bytes):
                self._resync = True
                continue
            seq, version, payload = parse_frame(frame)
            if seq <= self.last:
                continue
            if seq > self.last + 1:
                self._resync = True
                continue
            self.last = seq
            return StreamEvent(seq, decode_item(payload), version)

    async def _read_stream(self) -> bool:
        """Read what the stream holds after ``last`` into the batch; True when it held any."""
        try:
            # Off the event loop: one follower's read must not stall the others (a gateway or
            # a dispatcher follows hundreds of calls in one loop).
            batch = await asyncio.to_thread(self._read, self.call_id, self.last)
        except RedisError:
            self._outage_since = self._outage_since or time.monotonic()
            lost_for = time.monotonic() - self._outage_since
            if lost_for > self._outage_seconds:
                raise FollowLost(self.call_id, self.last, lost_for) from None
            return False
        except RecordMissing:
            self._outage_since = None
            self._missing_since = self._missing_since or time.monotonic()
            if time.monotonic() - self._missing_since > MISSING_GRACE_SECONDS:
                raise RecordLost(self.call_id, self.last) from None
            self._resync = True
            self._silence = POLL_SECONDS
            return False
        self._missing_since = None
        self._outage_since = None
        self._resync = False
        self._silence = POLL_SECONDS if batch else min(self._silence * 2, MAX_POLL_SECONDS)
        if not batch:
            return False
        self._batch = deque(batch)
        return True


__all__ = [
    "MAX_POLL_SECONDS",
    "OUTAGE_POLL_SECONDS",
    "POLL_SECONDS",
    "EventCursor",
    "FollowLost",
    "RecordLost",
    "RecordMissing",
]
