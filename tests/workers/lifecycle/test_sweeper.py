"""The sweep on a real Redis: a call whose worker's lease expired gets an answer, re-enqueued
as its next attempt under the ``rerun`` policy and failed ``worker_lost`` under ``fail``; a
call whose lease is live is left alone."""

from __future__ import annotations

from tests.distributed.helpers import queued_call
from toolhub.distributed.settings import queue_for
from workers.calls.runtime import WorkerRuntime
from workers.lifecycle.sweeper import requeue_expired, sweep

QUEUE = b"test.sweeper"


def _lost(runtime: WorkerRuntime, cid: str, **fields: str) -> None:
    """A call claimed by a worker that died: its lease ran out."""
    message = queued_call(runtime.store, cid, QUEUE, **fields)
    assert runtime.records.claim(message, "dead-worker").action == "run"
    runtime.store.client.hset(runtime.store.keys.call(cid), "lease_until", "1.0")
    runtime.store.client.zadd(runtime.store.keys.leases, {cid: 1.0})


def _status(runtime: WorkerRuntime, cid: str) -> str:
    record = runtime.store.get_record(cid)
    assert record is not None
    return str(record["status"])


def test_a_lost_call_is_re_enqueued_as_its_next_attempt(runtime: WorkerRuntime) -> None:
    _lost(runtime, "w-rerun", on_lost="rerun")
    live = queued_call(runtime.store, "w-live", QUEUE)
    assert runtime.records.claim(live, "live-worker").action == "run"
    fast = queue_for("fast")
    runtime.store.client.delete(fast)
    assert sweep(runtime) == 1
    (pushed,) = runtime.store.client.lrange(fast, 0, -1)  # the next attempt's message
    assert b"w-rerun" in pushed and b"w-live" not in pushed
    assert _status(runtime, "w-live") == "running"
    assert requeue_expired(runtime) == 0  # its deadline moved on: swept once


def test_a_lost_call_under_the_fail_policy_fails_worker_lost(runtime: WorkerRuntime) -> None:
    _lost(runtime, "w-fail", on_lost="fail")
    assert requeue_expired(runtime) == 1
    assert _status(runtime, "w-fail") == "failed"
    error = runtime.store.read_events("w-fail")[-1].item.error
    assert error is not None and error.code == "worker_lost"
