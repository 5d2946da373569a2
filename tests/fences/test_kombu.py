"""kombu's fence (``toolhub/fences/kombu.py``), both paths, on the shared real stack (a
redis-server and two real ``toolhub worker`` processes): a batch of calls dispatched at once
is enqueued and runs whether the dispatcher captures kombu's publish (one round trip) or
publishes the plain way (``TOOLHUB_PLAIN_LIBRARIES=kombu``: record, then kombu's public
``Producer.publish``); the workers' queue screen dead-letters a poisoned item (the fenced
path; ``tests/distributed/test_poison.py`` has every kind), and on the plain path neither
worker reach is made. Reconnecting after a broker restart is ``test_redis_restart.py``'s."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.distributed.helpers import wait_until
from toolhub.distributed.enqueue import Enqueuer, capture_send_task
from toolhub.distributed.settings import Settings
from toolhub.distributed.shared import shared_backend
from toolhub.fences import kombu as fence

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=["fenced", "plain"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "plain":
        monkeypatch.setenv("TOOLHUB_PLAIN_LIBRARIES", "kombu")
    else:
        monkeypatch.delenv("TOOLHUB_PLAIN_LIBRARIES", raising=False)
    return str(request.param)


def test_a_batch_is_enqueued_and_runs_on_both_paths(live, connect, store, path: str) -> None:
    _, app = shared_backend(Settings.from_env(live.url))
    captured = capture_send_task(app, "toolhub.execute", queue="toolhub.fast", kwargs={})
    fresh = Enqueuer(app).message("toolhub.execute", "toolhub.fast", {}, "r")
    assert (captured is None and fresh is None) == (path == "plain")
    session = connect()

    async def batch() -> list[bool]:
        calls = [session.call("noop", {}, call_id=f"fence-batch-{path}-{n}") for n in range(12)]
        return [result.is_error for result in await asyncio.gather(*calls)]

    assert asyncio.run(asyncio.wait_for(batch(), 60)) == [False] * 12
    for n in range(12):
        assert store.get_record(f"fence-batch-{path}-{n}")["status"] == "succeeded"


def test_the_fenced_screen_dead_letters_a_poisoned_item(live, store) -> None:
    raw = b"\x00 not json {fence}"
    store.client.lpush("toolhub.fast", raw)

    def entry() -> dict | None:
        for line in store.client.lrange(store.keys.deadletter, 0, -1):
            found = json.loads(line)
            if found["size"] == len(raw) and found["queue"] == "toolhub.fast":
                return found
        return None

    assert wait_until(entry, 15)["reason"] == "undecodable"
    assert all(worker.alive for worker in live.workers)


def test_the_plain_path_makes_no_worker_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    from kombu.transport import redis as transport

    monkeypatch.setattr(transport.Channel, "_brpop_read", transport.Channel._brpop_read)
    monkeypatch.setattr(transport.Channel, "_connparams", transport.Channel._connparams)
    stock = (transport.Channel._brpop_read, transport.Channel._connparams)
    monkeypatch.setenv("TOOLHUB_PLAIN_LIBRARIES", "kombu")
    assert not fence.screen_deliveries(lambda raw, queue: None)
    assert not fence.guard_detached_channels()
    assert (transport.Channel._brpop_read, transport.Channel._connparams) == stock
    monkeypatch.setenv("TOOLHUB_PLAIN_LIBRARIES", "redis")
    assert fence.screen_deliveries(lambda raw, queue: None)
    assert transport.Channel._brpop_read is fence._screened_brpop_read
