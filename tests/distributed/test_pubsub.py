"""The process-wide pub/sub router against a real Redis: what a follower's ``Subscription``
receives, and when its loop is woken.

A frame that arrives while the follower is not waiting is kept, not lost, and costs its loop no
wake-up; a frame that arrives while it waits ends the wait; a silent channel ends the wait after
the timeout, and a wake with nothing queued (the batch's frame already taken) does not end it
early. A subscription whose loop is gone is released. The reader thread unsubscribes the
channels whose last follower left, many in one command, and a channel taken back before that
stays subscribed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from redis import Redis

from tests.distributed.helpers import wait_until
from toolhub.distributed.pubsub import RESYNC, PubSubRouter, Subscription, _wake_all
from toolhub.stack import RedisServer


@pytest.fixture
def router(live) -> Iterator[PubSubRouter]:
    started = PubSubRouter(live.redis.url)
    yield started
    started.close()


@pytest.fixture
def client(live) -> Iterator[Redis]:
    connected = Redis.from_url(live.redis.url)
    yield connected
    connected.close()


def _confirmed(sub: Subscription) -> None:
    wait_until(lambda: sub.confirmed, 5)


async def _ready(router: PubSubRouter, channel: str) -> Subscription:
    """A confirmed subscription whose confirmation (``RESYNC``) was taken."""
    sub = router.subscribe(channel)
    await asyncio.to_thread(_confirmed, sub)
    assert await sub.get(1.0) is RESYNC
    return sub


def test_frames_published_while_nobody_waits_are_kept_in_order(
    router: PubSubRouter, client: Redis
) -> None:
    async def scenario() -> tuple[list[object], list[object]]:
        loop = asyncio.get_running_loop()
        scheduled: list[object] = []  # what other threads scheduled on this loop
        schedule = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
            scheduled.append(callback)
            return schedule(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        sub = router.subscribe("ps-kept")
        await asyncio.to_thread(_confirmed, sub)
        for i in range(3):
            client.publish("ps-kept", f"f{i}")
        await asyncio.to_thread(wait_until, lambda: len(sub._frames) == 4, 5)
        frames = [await sub.get(1.0) for _ in range(4)]
        sub.close()
        return frames, scheduled

    frames, scheduled = asyncio.run(scenario())
    assert frames == [RESYNC, b"f0", b"f1", b"f2"]
    assert _wake_all not in scheduled  # nobody waited: no wake-up was sent
    wait_until(lambda: router.channels() == [], 5)


def test_a_frame_published_during_the_wait_ends_it(router: PubSubRouter, client: Redis) -> None:
    async def scenario() -> tuple[object, float]:
        loop = asyncio.get_running_loop()
        sub = await _ready(router, "ps-wake")
        timer = threading.Timer(0.2, client.publish, ("ps-wake", "late"))
        timer.start()
        started = loop.time()
        frame = await sub.get(10.0)
        waited = loop.time() - started
        sub.close()
        # The publisher may still be reading its reply when the frame arrives here.
        await asyncio.to_thread(timer.join, 10)
        return frame, waited

    frame, waited = asyncio.run(scenario())
    assert frame == b"late"
    assert 0.1 < waited < 5.0


def test_silence_ends_the_wait_after_the_timeout_and_a_bare_wake_does_not(
    router: PubSubRouter,
) -> None:
    async def scenario() -> tuple[object, float]:
        loop = asyncio.get_running_loop()
        sub = await _ready(router, "ps-silent")
        loop.call_later(0.05, sub.wake)  # a wake whose frame someone else took
        started = loop.time()
        frame = await sub.get(0.4)
        sub.close()
        return frame, loop.time() - started

    frame, waited = asyncio.run(scenario())
    assert frame is None
    assert waited >= 0.35


def test_a_second_follower_of_a_confirmed_channel_is_confirmed_at_once(
    router: PubSubRouter,
) -> None:
    async def scenario() -> tuple[bool, object]:
        first = router.subscribe("ps-shared")
        await asyncio.to_thread(_confirmed, first)
        second = router.subscribe("ps-shared")
        confirmed = second.confirmed
        frame = await second.get(0.1)
        first.close()
        second.close()
        return confirmed, frame

    assert asyncio.run(scenario()) == (True, RESYNC)
    wait_until(lambda: router.channels() == [], 5)


def test_a_follower_whose_loop_is_gone_is_released(router: PubSubRouter, client: Redis) -> None:
    loop = asyncio.new_event_loop()
    sub = router.subscribe("ps-gone", loop)
    _confirmed(sub)
    loop.close()
    client.publish("ps-gone", "into the void")
    wait_until(lambda: router.channels() == [], 5)


def test_a_burst_of_finished_calls_leaves_in_one_unsubscribe(tmp_path) -> None:
    server = RedisServer(data_dir=tmp_path / "redis")
    server.start()
    router = PubSubRouter(server.url)
    client = Redis.from_url(server.url)
    channels = [f"ps-burst-{i}" for i in range(50)]
    try:

        async def scenario() -> None:
            subs = [router.subscribe(channel) for channel in channels]
            await asyncio.to_thread(wait_until, lambda: all(s.confirmed for s in subs), 5)
            client.config_resetstat()
            for sub in subs:
                sub.close()

        asyncio.run(scenario())
        wait_until(lambda: all(n == 0 for _, n in client.pubsub_numsub(*channels)), 5)
        unsubscribes = client.info("commandstats")["cmdstat_unsubscribe"]["calls"]
        assert unsubscribes <= 2  # one per reader wake-up, not one per channel
    finally:
        router.close()
        client.close()
        server.stop()


def test_a_channel_taken_back_before_it_left_stays_subscribed(
    router: PubSubRouter, client: Redis
) -> None:
    async def scenario() -> list[object]:
        first = await _ready(router, "ps-back")
        first.close()
        again = router.subscribe("ps-back")  # before or after the reader unsubscribed it
        await asyncio.to_thread(_confirmed, again)
        await asyncio.sleep(1.5)  # past the reader's next wake-up, whatever it sent then
        client.publish("ps-back", "still here")
        frames = [await again.get(2.0), await again.get(2.0)]
        again.close()
        return frames

    assert asyncio.run(scenario()) == [RESYNC, b"still here"]
    wait_until(lambda: client.pubsub_numsub("ps-back")[0][1] == 0, 5)
