"""The record side of the sweep, on a Redis no worker serves: a message still in its queue is
left alone however long it waits, a taken one is re-enqueued once per deadline, and a call
taken and lost ``max_attempts`` times fails with an answer that says it never ran.

The tests play the sweep themselves, so no worker may see their calls: a live worker's own
sweep of the same overdue calls would race them (and did, on a busy machine: it re-enqueued a
call first, so the test's sweep found it waiting again)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.distributed.helpers import queued_call
from toolhub.distributed.codec import unpack
from toolhub.distributed.recovery import Recovery
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer

QUEUE = b"test.unconsumed"


@pytest.fixture
def store(bare_redis: RedisServer) -> Iterator[RedisStore]:
    redis_store = RedisStore.from_settings(Settings.from_env(bare_redis.url))
    yield redis_store
    redis_store.close()


def _create(store, cid: str, max_attempts: int = 3) -> dict:
    return queued_call(store, cid, QUEUE, max_attempts)


def _past_deadline(store, cid: str, by: float = 0.001) -> None:
    """Its claim deadline passed ``by`` seconds ago (Redis's clock): just now, by default, as
    for a sweep that keeps up."""
    seconds, micros = store.client.time()
    due = seconds + micros / 1e6 - by
    store.client.hset(store.keys.call(cid), "claim_by", f"{due:.6f}")
    store.client.zadd(store.keys.pending, {cid: due})


def test_a_message_still_in_its_queue_is_never_re_enqueued(store):
    recovery = Recovery(store.records)
    store.client.delete(QUEUE)
    _create(store, "waits")
    for _ in range(3):
        _past_deadline(store, "waits")
        assert "waits" in recovery.unclaimed()
        assert recovery.sweep_unclaimed("waits") is None
    assert store.client.lrange(QUEUE, 0, -1) == [b"payload-1"]
    record = store.get_record("waits")
    assert record["claim_by"] > time.time() and "requeued" not in record
    store.client.delete(QUEUE, store.keys.call("waits"))
    store.client.zrem(store.keys.pending, "waits")


def test_the_sweep_reads_a_call_s_place_in_its_queue_without_scanning_it(store):
    """Each queued call keeps its place among the pushes onto its list (``qpos``); the items
    left are the newest pushes, so a place among the last LLEN is still waiting, an older one
    was popped. No ``LPOS``: the check costs the same for a call deep in a long queue
    (issue 43). An item pushed another way (kombu's own publish) only lengthens the list: a
    taken call may look waiting a while longer, a waiting one never looks taken."""
    recovery = Recovery(store.records)
    store.client.delete(QUEUE)
    calls = [f"place-{i}" for i in range(5)]
    for cid in calls:
        _create(store, cid)
    store.client.rpop(QUEUE)  # the oldest two were popped by workers (and never claimed)
    store.client.rpop(QUEUE)
    store.client.lpush(QUEUE, b"kombu's own publish")
    store.client.config_resetstat()
    for cid in calls:
        _past_deadline(store, cid)
        store.client.hset(store.keys.call(cid), "waited", "0")  # already given its extra time
    taken = {cid for cid in calls if recovery.sweep_unclaimed(cid) is not None}
    assert taken == {"place-0"}  # place-1 looks waiting: one uncounted item is still queued
    assert "cmdstat_lpos" not in store.client.info("commandstats")
    assert store.client.lrange(QUEUE, 0, -1)[-3:] == [b"payload-1"] * 3  # nothing copied
    store.client.delete(QUEUE, *(store.keys.call(cid) for cid in calls))
    store.client.zrem(store.keys.pending, *calls)


def test_a_call_seen_waiting_gets_one_more_deadline_when_it_leaves_its_queue(store):
    """A long queue keeps a call past its claim deadline; a worker then pops it and claims it
    a moment later. A sweep in between must not copy it (issue 43): having seen it waiting,
    the sweep gives it one more deadline, and only a call still unclaimed after that (its
    worker died holding it) is re-enqueued."""
    recovery = Recovery(store.records)
    store.client.delete(QUEUE)
    message = _create(store, "popped")
    _past_deadline(store, "popped")
    assert recovery.sweep_unclaimed("popped") is None  # waiting, far past its deadline
    assert store.client.rpop(QUEUE) is not None  # a live worker pops it, not claimed yet
    _past_deadline(store, "popped")
    assert recovery.sweep_unclaimed("popped") is None  # left its queue just now: no copy
    record = store.get_record("popped")
    assert record["claim_by"] > time.time() and "requeued" not in record
    _past_deadline(store, "popped")  # still unclaimed a deadline later: its worker is gone
    lost = recovery.sweep_unclaimed("popped")
    assert lost is not None and lost.message == message and lost.requeued == 0
    store.client.delete(QUEUE, store.keys.call("popped"))
    store.client.zrem(store.keys.pending, "popped")


def test_a_call_the_sweep_fell_behind_gets_one_more_deadline_when_missing(store):
    """A backlog outruns the sweep: a call first looked at long past its deadline, already
    popped by a live worker about to claim it, is not copied; still unclaimed after one more
    (shorter) deadline, it is."""
    recovery = Recovery(store.records)
    store.client.delete(QUEUE)
    _create(store, "behind")
    assert store.client.rpop(QUEUE) is not None
    _past_deadline(store, "behind", by=60.0)  # nobody looked at it for a minute
    assert recovery.sweep_unclaimed("behind") is None
    assert "requeued" not in store.get_record("behind")
    _past_deadline(store, "behind", by=60.0)  # once only: then it is taken
    assert recovery.sweep_unclaimed("behind") is not None
    store.client.delete(QUEUE, store.keys.call("behind"))
    store.client.zrem(store.keys.pending, "behind")


def test_a_taken_message_is_re_enqueued_once_per_deadline_then_fails(store):
    recovery = Recovery(store.records)
    store.client.delete(QUEUE)
    message = _create(store, "taken", max_attempts=2)
    for n in (1, 2):
        assert store.client.rpop(QUEUE) is not None  # a worker took it ... and died
        _past_deadline(store, "taken")
        lost = recovery.sweep_unclaimed("taken")
        assert lost is not None and lost.message == message and lost.requeued == n - 1
        # A concurrent sweep right after finds the deadline moved on: it acts once.
        assert recovery.sweep_unclaimed("taken") is None
        assert recovery.reenqueue("taken", "run-1", QUEUE, f"payload-{n + 1}".encode())
        assert store.client.lrange(QUEUE, 0, -1) == [f"payload-{n + 1}".encode()]
    assert store.client.rpop(QUEUE) is not None
    _past_deadline(store, "taken")
    lost = recovery.sweep_unclaimed("taken")
    assert lost is not None and lost.requeued == 2
    assert recovery.fail_unclaimed(lost)
    record = store.get_record("taken")
    assert record["status"] == "failed"
    error = record["result"]["error"]
    assert error["details"]["code"] == "worker_lost" and error["details"]["may_have_run"] is False
    assert "never ran as an attempt" in error["detail"]
    assert "only a read-only tool starts before its claim" in error["detail"]
    assert store.client.zscore(store.keys.pending, "taken") is None
    # What only a live call needs is dropped with the terminal (retention).
    raw = store.client.hgetall(store.keys.call("taken"))
    assert not {b"message", b"qkey", b"qpos", b"claim_by"} & set(raw)
    # A stale re-enqueue (another run id) is refused.
    assert not recovery.reenqueue("taken", "run-other", QUEUE, b"x")
    assert store.client.llen(QUEUE) == 0
    store.client.delete(store.keys.call("taken"), store.keys.events("taken"))


def test_a_claimed_call_leaves_the_pending_index(store):
    _create(store, "claimed")
    message = unpack(store.client.hget(store.keys.call("claimed"), "message"))
    claim = store.records.claim(message, "test-worker")
    assert claim.action == "run" and claim.lost == 0
    assert store.client.zscore(store.keys.pending, "claimed") is None
    assert store.client.hmget(store.keys.call("claimed"), "qkey", "qpos") == [None, None]
    store.client.delete(QUEUE, store.keys.call("claimed"), store.keys.events("claimed"))
    store.client.zrem(store.keys.leases, "claimed")


def test_a_running_record_without_its_message_leaves_the_lease_index(store):
    """A record no dispatcher wrote whole (``running``, a lapsed lease, no message) cannot be
    run again: the sweep drops it from the lease index, instead of failing on it every pass."""
    cid = "no-message"
    key = store.keys.call(cid)
    store.client.hset(key, mapping={"status": "running", "attempt": 1, "lease_until": "1.0"})
    store.client.zadd(store.keys.leases, {cid: 1.0})
    recovery = Recovery(store.records)
    assert recovery.requeue(cid) is None
    assert store.client.zscore(store.keys.leases, cid) is None
