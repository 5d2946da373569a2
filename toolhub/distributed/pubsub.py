"""One pub/sub connection per process, shared by every call this process follows.

Why not a subscription per call (what Celery's Redis result backend does): each one costs a
connection or leaks a channel when a consumer goes away (celery#3812, #5320). Here a single
reader thread owns one connection; followers in any event loop register a channel, get frames
delivered into their loop, and the reader unsubscribes a channel once its last follower left.

Delivery is best effort by design: a follower catches up from the call's Redis stream whenever
it is told to resync (subscription confirmed, connection re-established) or sees a gap, so a
frame missed here is never an event lost.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from typing import Any, Final

from toolhub.distributed.redis_address import parse_redis_url
from toolhub.fences.redis import PubSubConnection
from toolhub.fences.redis import connect as pubsub_connect

logger = logging.getLogger("toolhub.pubsub")


class _Resync:
    """Tells a follower to re-read the stream: its subscription just became effective."""

    def __repr__(self) -> str:
        return "RESYNC"


RESYNC: Final = _Resync()
Frame = bytes | _Resync


class Subscription:
    """One follower's channel: frames arrive in the follower's own event loop.

    Frames wait in a deque, appended by the pub/sub thread. The follower's loop is woken only
    while the follower waits in ``get``, and once per batch of replies the pub/sub thread read
    (``PubSubRouter``): a frame that arrives while the follower is busy, such as the
    confirmation during its own dispatch, costs no wake-up. ``get`` sets its waiter before it
    checks the deque a last time, and the pub/sub thread reads the waiter after appending, so
    a frame is either seen by that check or wakes the waiter.
    """

    __slots__ = ("_closed", "_frames", "_router", "_waiter", "channel", "confirmed", "loop")

    def __init__(
        self, router: PubSubRouter, channel: bytes, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._router = router
        self.channel = channel
        self.loop = loop
        self._frames: deque[Frame] = deque()
        #: The future ``get`` awaits; set only while the follower waits.
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        #: True once Redis confirmed the subscription: from then on every publish reaches us.
        self.confirmed = False

    def push(self, frame: Frame) -> bool:
        """Called from the pub/sub thread: queue ``frame``. True when the follower waits, so
        its loop must be woken (``wake``)."""
        self._frames.append(frame)
        return self._waiter is not None

    def wake(self) -> None:
        """On the follower's loop: end the current wait, if any."""
        if self._waiter is not None:
            _expire(self._waiter)

    async def get(self, timeout: float) -> Frame | None:
        """The next frame, or None after ``timeout`` seconds of silence."""
        if self._frames:
            return self._frames.popleft()
        deadline = self.loop.time() + timeout
        while True:
            waiter = self.loop.create_future()
            self._waiter = waiter
            try:
                if self._frames:  # the last check, after the waiter is set (class docstring)
                    return self._frames.popleft()
                timer = self.loop.call_at(deadline, _expire, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
            finally:
                self._waiter = None
            if self._frames:
                return self._frames.popleft()
            if self.loop.time() >= deadline:
                return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._router.release(self)


def _expire(waiter: asyncio.Future[None]) -> None:
    """End a wait (its timer, or a wake-up), unless it ended already."""
    if not waiter.done():
        waiter.set_result(None)


def _wake_all(subs: list[Subscription]) -> None:
    for sub in subs:
        sub.wake()


class PubSubRouter:
    """The process-wide pub/sub reader. Thread-safe; start it once, share it everywhere."""

    def __init__(self, url: str) -> None:
        #: Asked for the current primary at every (re)connect: a Sentinel URL follows failovers.
        self._address = parse_redis_url(url)
        self._subs: dict[bytes, set[Subscription]] = {}
        self._confirmed: set[bytes] = set()
        #: Channels whose last follower left; unsubscribed by the reader thread (``_leave``).
        self._leaving: set[bytes] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._conn: PubSubConnection | None = None
        try:
            self._conn = pubsub_connect(self._address.primary_url())
        except OSError as exc:
            logger.warning("pub/sub connection not available yet: %s", exc)
        self._thread = threading.Thread(target=self._run, name="toolhub-pubsub", daemon=True)
        self._thread.start()

    def subscribe(
        self, channel: str, loop: asyncio.AbstractEventLoop | None = None
    ) -> Subscription:
        sub = Subscription(self, channel.encode(), loop or asyncio.get_running_loop())
        with self._lock:
            members = self._subs.setdefault(sub.channel, set())
            # A channel still leaving was never unsubscribed: it stays, as it was.
            first = not members and sub.channel not in self._leaving
            self._leaving.discard(sub.channel)
            members.add(sub)
            confirmed = sub.channel in self._confirmed
            conn = self._conn
        if first:
            self._send(conn, b"SUBSCRIBE", sub.channel)
        elif confirmed:
            # Already active for another follower: confirmed at once, nothing waits yet.
            sub.confirmed = True
            sub.push(RESYNC)
        return sub

    def release(self, sub: Subscription) -> None:
        """Drop a follower. The last one of a channel leaves it to the reader thread to
        unsubscribe, in one ``UNSUBSCRIBE`` for every channel left since its last read: no
        write on the follower's thread, and one command for a burst of finished calls."""
        with self._lock:
            members = self._subs.get(sub.channel)
            if members is None:
                return
            members.discard(sub)
            if members:
                return
            del self._subs[sub.channel]
            self._leaving.add(sub.channel)

    def channels(self) -> list[bytes]:
        """Channels currently subscribed for followers (tests check nothing leaks)."""
        with self._lock:
            return list(self._subs)

    @staticmethod
    def _send(conn: PubSubConnection | None, command: bytes, channel: bytes) -> None:
        if conn is None:
            return
        try:
            conn.send(command, channel)
        except OSError as exc:
            # The reader reconnects and resubscribes every live channel; followers poll the
            # stream meanwhile, so nothing is lost by failing here.
            logger.debug("pub/sub %s %r failed: %s", command, channel, exc)

    def _run(self) -> None:
        backoff = 0.05
        while not self._closed:
            conn = self._conn
            try:
                if conn is None:
                    conn = self._reconnect()
                    backoff = 0.05
                self._dispatch(conn.read(1.0))
                self._leave(conn)
            except (OSError, ValueError) as exc:
                if self._closed:
                    return
                if conn is not None:
                    logger.warning("pub/sub connection lost (%s); reconnecting", exc)
                    conn.close()
                with self._lock:
                    self._conn = None
                    self._confirmed.clear()
                    self._leaving.clear()  # a new connection subscribes to live channels only
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def _reconnect(self) -> PubSubConnection:
        conn = pubsub_connect(self._address.primary_url())
        with self._lock:
            self._conn = conn
            channels = list(self._subs)
        if channels:
            conn.send(b"SUBSCRIBE", *channels)
        return conn

    def _leave(self, conn: PubSubConnection) -> None:
        """Unsubscribe every channel left since the last call. Sent under the lock, so a
        follower that subscribes to one of them again either took it back first (``subscribe``:
        nothing to send) or sends its ``SUBSCRIBE`` after this ``UNSUBSCRIBE``."""
        with self._lock:
            if not self._leaving:
                return
            channels, self._leaving = self._leaving, set()
            self._confirmed.difference_update(channels)
            conn.send(b"UNSUBSCRIBE", *channels)

    def _dispatch(self, replies: list[Any]) -> None:
        """Queue each frame with its followers, then wake each waiting follower's loop once
        for the whole batch."""
        waiting: dict[asyncio.AbstractEventLoop, list[Subscription]] = {}
        for reply in replies:
            for sub, frame in self._frames_of(reply):
                if sub.loop.is_closed():
                    sub.close()
                elif sub.push(frame):
                    waiting.setdefault(sub.loop, []).append(sub)
        for loop, subs in waiting.items():
            try:
                loop.call_soon_threadsafe(_wake_all, subs)
            except RuntimeError:  # the loop closed meanwhile
                for sub in subs:
                    sub.close()

    def _frames_of(self, reply: Any) -> list[tuple[Subscription, Frame]]:
        """(follower, frame) for one reply: a message's payload for each follower of its
        channel; ``RESYNC`` for each follower of a channel Redis just confirmed."""
        if not isinstance(reply, list) or len(reply) < 3:
            return []
        kind, channel, data = reply[0], reply[1], reply[2]
        if kind == b"message":
            with self._lock:
                members = list(self._subs.get(channel, ()))
            return [(sub, data) for sub in members]
        if kind == b"subscribe":
            with self._lock:
                if channel not in self._subs:
                    return []
                self._confirmed.add(channel)
                members = list(self._subs[channel])
            for sub in members:
                sub.confirmed = True
            return [(sub, RESYNC) for sub in members]
        return []

    def close(self) -> None:
        self._closed = True
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._thread.join(timeout=2)
