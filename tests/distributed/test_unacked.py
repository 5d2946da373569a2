"""``clean_stale_unacked`` against a real redis-server, on entries kombu itself wrote: each
message is published with toolhub's Celery app and taken with a real kombu channel without an
ack, with kombu's ack emulation on (what a worker of an earlier release, holding a call, did;
today's workers run without it and write no such entries), then aged by moving its delivery
time back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from redis import Redis

from toolhub.distributed.celery_app import EXECUTE_TASK, make_celery
from toolhub.distributed.keys import Keys
from toolhub.distributed.settings import QUEUES, Settings
from toolhub.distributed.unacked import clean_stale_unacked, decode_entry, unacked_keys
from toolhub.stack import RedisServer

UNACKED, INDEX = "unacked", "unacked_index"
QUEUE = QUEUES["fast"]
MIN_AGE = 3.0


@pytest.fixture
def client(bare_redis: RedisServer) -> Iterator[Redis]:
    redis_client = Redis.from_url(bare_redis.url)
    redis_client.flushdb()
    yield redis_client
    redis_client.close()


@pytest.fixture
def broker(bare_redis: RedisServer) -> Iterator[Broker]:
    app = make_celery(Settings(redis_url=bare_redis.url))
    assert app.conf.broker_transport_options["ack_emulation"] is False
    app.conf.broker_transport_options = {**app.conf.broker_transport_options, "ack_emulation": True}
    b = Broker(app)
    yield b
    b.close()


class Broker:
    """Publishes toolhub task messages and takes them off the queue unacked, as kombu does for
    a worker (``QoS.append`` writes the ``unacked`` entry)."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self.connection = app.connection_for_write()
        self.channel = self.connection.default_channel
        # Closing must not put the held messages back on the queue.
        self.channel.do_restore = False

    def deliver(self, kwargs: dict[str, Any]) -> tuple[str, Any]:
        self.app.send_task(EXECUTE_TASK, kwargs=kwargs, queue=QUEUE, ignore_result=True)
        message = self.channel.basic_get(QUEUE, no_ack=False)
        assert message is not None
        return str(message.delivery_tag), message

    def close(self) -> None:
        self.connection.close()


def age(client: Redis, tag: str, seconds: float) -> None:
    client.zadd(INDEX, {tag: time.time() - seconds}, xx=True)


def record(client: Redis, cid: str, status: str, run_id: str) -> None:
    client.hset(Keys().call(cid), mapping={"status": status, "run_id": run_id})


def tags(client: Redis) -> set[str]:
    in_hash = {t.decode() for t in client.hkeys(UNACKED)}
    in_index = {t.decode() for t in client.zrange(INDEX, 0, -1)}
    assert in_hash == in_index, "hash and index out of step"
    return in_hash


def test_entries_are_real_kombu_ones(client: Redis, broker: Broker):
    tag, _ = broker.deliver({"call_id": "c1", "run_id": "r1", "arguments": {"x": 1}})
    assert tags(client) == {tag}
    assert decode_entry(client.hget(UNACKED, tag)) == ("c1", "r1")


def test_removes_what_no_call_needs_and_keeps_the_rest(client: Redis, broker: Broker):
    removed, kept = set(), set()
    for status in ("succeeded", "failed", "cancelled", "running"):
        cid = f"call-{status}"
        record(client, cid, status, "run-1")
        tag, _ = broker.deliver({"call_id": cid, "run_id": "run-1"})
        removed.add(tag)
    gone, _ = broker.deliver({"call_id": "call-gone", "run_id": "run-1"})
    removed.add(gone)
    record(client, "call-rerun", "queued", "run-2")
    stale_run, _ = broker.deliver({"call_id": "call-rerun", "run_id": "run-1"})
    removed.add(stale_run)
    record(client, "call-queued", "queued", "run-1")
    queued, _ = broker.deliver({"call_id": "call-queued", "run_id": "run-1"})
    kept.add(queued)
    for tag in removed | kept:
        age(client, tag, 2 * MIN_AGE)
    record(client, "call-young", "succeeded", "run-1")
    young, _ = broker.deliver({"call_id": "call-young", "run_id": "run-1"})
    kept.add(young)
    # Garbage: not JSON, and a message toolhub never sends (pickle); one of each old, one young.
    client.hset(UNACKED, mapping={"junk-old": b"\x80not json", "pickle-old": _pickled()})
    client.zadd(INDEX, {"junk-old": time.time() - 2 * MIN_AGE, "pickle-old": 0.0})
    client.hset(UNACKED, "junk-young", b"{")
    client.zadd(INDEX, {"junk-young": time.time()})
    removed |= {"junk-old", "pickle-old"}
    kept.add("junk-young")

    count = clean_stale_unacked(client, Keys(), min_age=MIN_AGE)

    assert count == len(removed)
    assert tags(client) == kept
    # Nothing else was touched: the records are all still there.
    assert client.hget(Keys().call("call-queued"), "status") == b"queued"
    assert clean_stale_unacked(client, Keys(), min_age=MIN_AGE) == 0


def test_a_late_ack_of_a_removed_entry_is_harmless(client: Redis, broker: Broker):
    record(client, "done", "succeeded", "r")
    tag, message = broker.deliver({"call_id": "done", "run_id": "r"})
    age(client, tag, 2 * MIN_AGE)
    assert clean_stale_unacked(client, Keys(), min_age=MIN_AGE) == 1
    message.ack()
    assert tags(client) == set()


def test_work_per_sweep_is_bounded(client: Redis, broker: Broker):
    for i in range(5):
        record(client, f"c{i}", "succeeded", "r")
        tag, _ = broker.deliver({"call_id": f"c{i}", "run_id": "r"})
        age(client, tag, 2 * MIN_AGE)
    assert clean_stale_unacked(client, Keys(), min_age=MIN_AGE, limit=2) == 2
    assert len(tags(client)) == 3
    assert clean_stale_unacked(client, Keys(), min_age=MIN_AGE, limit=2) == 2
    assert clean_stale_unacked(client, Keys(), min_age=MIN_AGE, limit=2) == 1
    assert tags(client) == set()


def test_transport_options_name_the_keys(client: Redis):
    assert unacked_keys(None) == (UNACKED, INDEX)
    options = {"global_keyprefix": "p:", "unacked_key": "u", "unacked_index_key": "ui"}
    assert unacked_keys(options) == ("p:u", "p:ui")
    client.hset("p:u", "t", b"junk")
    client.zadd("p:ui", {"t": 0.0})
    assert clean_stale_unacked(client, Keys(), min_age=MIN_AGE, transport_options=options) == 1
    assert not client.exists("p:u", "p:ui")


def _pickled() -> bytes:
    envelope = {"body": "gAR9lC4=", "content-type": "application/x-python-serialize"}
    return json.dumps([envelope, "", QUEUE]).encode()
