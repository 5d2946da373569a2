"""The distributed store: sessions, call records and per-call event streams in Redis.

``follow(call_id, after_seq)`` is the one way to consume a call's events, for the executor and
for the HTTP gateway (SSE ``Last-Event-ID``) alike. It subscribes to the call's channel and reads
the stream, deduplicating by sequence number: a consumer that connects late or reconnects
resumes with no gap and no duplicate. Every item also sits in the stream, so a missed pub/sub
frame (a reconnect, a slow subscribe) costs a read, never an event.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from toolhub.core import CallResult, Progress
from toolhub.core.trimmed import trimmed_marker
from toolhub.distributed import replies
from toolhub.distributed.codec import StreamEvent, decode_item, pack, unpack
from toolhub.distributed.dispatch_batch import DispatchBatches
from toolhub.distributed.following import EventCursor, RecordMissing
from toolhub.distributed.keys import Keys
from toolhub.distributed.pubsub import PubSubRouter, Subscription
from toolhub.distributed.records import TERMINAL_STATUSES, CallRecords, decode_record
from toolhub.distributed.redis_address import parse_redis_url
from toolhub.distributed.settings import Settings
from toolhub.distributed.signing import sign_session
from toolhub.errors import ErrorCode, ToolhubError


class CallNotFound(ToolhubError, LookupError):
    """``follow`` was asked for a call that Redis has no record of (never made, or expired)."""

    code = ErrorCode.CALL_NOT_FOUND


def failover_retry() -> Retry:
    """A Sentinel-managed client retries through a failover (Sentinels take a few seconds to
    promote a replica): backoff capped at 1 s, about ten seconds in all."""
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), 14)


def connect(url: str) -> Redis:
    """A client that fails fast when Redis is down (a caller gets a clear error in well under
    a second) instead of redis-py's long default retries; for a Sentinel URL, one that follows
    the current primary and rides out a failover (``failover_retry``)."""
    address = parse_redis_url(url)
    return address.client(
        socket_connect_timeout=2,
        socket_timeout=10,
        health_check_interval=0,
        retry=failover_retry()
        if address.is_sentinel
        else Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
    )


class RedisStore:
    def __init__(self, client: Redis, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.records = CallRecords(client, settings)
        self.dispatches = DispatchBatches(self.records)
        self._pubsub: PubSubRouter | None = None
        self._pubsub_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisStore:
        return cls(connect(settings.redis_url), settings)

    # -- sessions ----------------------------------------------------------------------------------

    def put_session(self, sid: str, *, config: str, config_hash: str, workspace: str) -> None:
        """Store the session's config (its JSON, as the caller serialized it) and the config by
        its hash. Both expire after ``session_ttl_seconds`` unless used: every call refreshes
        them (and the session's state and task index) in its dispatch script. With a fleet key
        the record is signed (``signing.py``): workers build no tool set from an unsigned one."""
        text = config
        ttl = self.settings.session_ttl_seconds
        key = self.keys.session(sid)
        pipe = self.client.pipeline()
        pipe.hset(
            key,
            mapping={
                "config": text,
                "config_hash": config_hash,
                "workspace": workspace,
                "sig": sign_session(sid, workspace, config_hash),
            },
        )
        pipe.hsetnx(key, "created", f"{time.time():.6f}")
        pipe.expire(key, ttl)
        pipe.set(self.keys.config(config_hash), text, ex=ttl)
        pipe.expire(self.keys.state(sid), ttl)
        pipe.execute()

    def has_session(self, sid: str) -> bool:
        return bool(self.client.exists(self.keys.session(sid)))

    def drop_session(self, sid: str) -> bool:
        """Forget the session's record: no dispatcher rebuilds it and workers run no new call
        of it (``session_unknown``). Its calls' records, its state and its task index stay
        until they expire, so what already ran can still be read. Every worker hears it on the
        control channel and removes the session's command logs and tmp on its host."""
        dropped = bool(self.client.delete(self.keys.session(sid)))
        self.client.publish(self.keys.control, pack({"op": "ended", "session_id": sid}))
        return dropped

    def get_session(self, sid: str) -> dict[str, str] | None:
        raw = replies.hgetall(self.client, self.keys.session(sid))
        return {k.decode(): v.decode() for k, v in raw.items()} if raw else None

    def get_config(self, config_hash: str) -> str | None:
        raw = replies.get(self.client, self.keys.config(config_hash))
        return raw.decode() if raw is not None else None

    # -- records and events ------------------------------------------------------------------------

    def get_record(self, call_id: str) -> dict[str, Any] | None:
        """The call record (status, tool, worker, attempts with timings, result), or None."""
        raw = replies.hgetall(self.client, self.keys.call(call_id))
        return decode_record(raw) if raw else None

    def read_events(self, call_id: str, after_seq: int = 0) -> list[StreamEvent]:
        """The call's events after ``after_seq``. A call that finished without any progress
        keeps no stream: its terminal event is read from the record. Where earlier events
        were trimmed (``emit.lua``: the stream's bytes are bounded), the first one read is
        the marker saying how much (``trimmed_marker``), numbered as the last trimmed one."""
        entries = replies.xrange(self.client, self.keys.events(call_id), f"(0-{after_seq}")
        if not entries:
            return self._with_marker(
                call_id, after_seq, self._terminal_from_record(call_id, after_seq)
            )
        out: list[StreamEvent] = []
        for entry_id, fields in entries:
            version = fields.get(b"v")
            out.append(
                StreamEvent(
                    int(entry_id.split(b"-", 1)[1]),
                    decode_item(fields[b"d"]),
                    int(version) if version else None,
                )
            )
        return self._with_marker(call_id, after_seq, out)

    def _read_followed(self, call_id: str, after_seq: int) -> list[StreamEvent]:
        """``read_events`` for a follower: ``RecordMissing`` when the call has neither events
        nor a record (Redis lost it), so the follower can say so instead of waiting for ever."""
        events = self.read_events(call_id, after_seq)
        if not events and not self.client.exists(self.keys.call(call_id)):
            raise RecordMissing(call_id)
        return events

    def _with_marker(
        self, call_id: str, after_seq: int, events: list[StreamEvent]
    ) -> list[StreamEvent]:
        """``events`` after the trimmed marker when they do not follow ``after_seq`` (a gap
        only trimming makes; the record is read only then)."""
        if not events or events[0].seq <= after_seq + 1:
            return events
        trimmed = replies.hget(self.client, self.keys.call(call_id), "trimmed")
        if not trimmed or int(trimmed) <= 0:
            return events
        marker = trimmed_marker(int(trimmed), by="redis")
        return [StreamEvent(events[0].seq - 1, marker, None), *events]

    def latest_progress(self, call_id: str, look_back: int = 8) -> Progress | None:
        """The newest progress item among the call's last ``look_back`` events (one
        ``XREVRANGE``): what a poller shows as the call's current state, from any process."""
        for _, fields in replies.xrevrange(self.client, self.keys.events(call_id), look_back):
            item = decode_item(fields[b"d"])
            if isinstance(item, Progress):
                return item
        return None

    def _terminal_from_record(self, call_id: str, after_seq: int) -> list[StreamEvent]:
        status, seq, result, version = replies.hmget(
            self.client, self.keys.call(call_id), "status", "seq", "result", "state_v"
        )
        if status is None or status.decode() not in TERMINAL_STATUSES or result is None:
            return []
        if int(seq or 0) <= after_seq:
            return []
        terminal = CallResult.from_dict(unpack(result))
        return [StreamEvent(int(seq or 0), terminal, int(version) if version else None)]

    @property
    def pubsub(self) -> PubSubRouter:
        with self._pubsub_lock:
            if self._pubsub is None:
                self._pubsub = PubSubRouter(self.settings.redis_url)
            return self._pubsub

    def subscribe(self, call_id: str) -> Subscription:
        return self.pubsub.subscribe(self.keys.channel(call_id))

    async def follow(
        self,
        call_id: str,
        after_seq: int = 0,
        *,
        subscription: Subscription | None = None,
        must_exist: bool = True,
        fresh: bool = False,
    ) -> AsyncIterator[StreamEvent]:
        """Every event after ``after_seq``, in order, each once, ending with the terminal.

        ``fresh``: the subscription was confirmed before the call was even enqueued, so no
        event can predate it and the initial stream read is skipped (the dispatcher's fast
        path). Raises ``CallNotFound`` for an unknown call and ``FollowLost`` when Redis stays
        unreachable longer than ``settings.follow_outage_seconds``."""
        if must_exist and not await asyncio.to_thread(
            self.client.exists, self.keys.call(call_id), self.keys.events(call_id)
        ):
            raise CallNotFound(call_id)
        sub = subscription or self.subscribe(call_id)
        cursor = self._cursor(call_id, sub, after_seq, fresh)
        try:
            while True:
                event = await cursor.next()
                yield event
                if event.terminal:
                    return
        finally:
            if subscription is None:
                sub.close()

    async def terminal(
        self, call_id: str, subscription: Subscription, *, fresh: bool = False
    ) -> StreamEvent:
        """The call's terminal event, read past its progress: ``follow`` for a caller that
        only wants the result, without an async generator held while it waits."""
        cursor = self._cursor(call_id, subscription, 0, fresh)
        while True:
            event = await cursor.next()
            if event.terminal:
                return event

    def _cursor(self, call_id: str, sub: Subscription, after_seq: int, fresh: bool) -> EventCursor:
        return EventCursor(
            call_id,
            sub,
            self._read_followed,
            after_seq=after_seq,
            fresh=fresh,
            outage_seconds=self.settings.follow_outage_seconds,
        )

    def close(self) -> None:
        with self._pubsub_lock:
            if self._pubsub is not None:
                self._pubsub.close()
                self._pubsub = None
        self.client.close()
