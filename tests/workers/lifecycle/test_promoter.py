"""The backlog promoter on a real Redis: a call that waited as its id in the backlog enters
the sunk list as the message kombu builds for it, at the sunk priority, with the trace context
its dispatcher stored, and it passes the queue screen a worker runs on every item."""

from __future__ import annotations

import dataclasses
import json
import uuid

from toolhub.distributed.celery_app import EXECUTE_TASK
from toolhub.distributed.codec import pack
from toolhub.distributed.fair import SUNK_PRIORITY, sunk_queue
from toolhub.distributed.messages import read_queue_item
from toolhub.distributed.store import RedisStore
from workers.calls.runtime import WorkerRuntime
from workers.lifecycle.promoter import BacklogPromoter

TRACE = {"traceparent": "00-" + "3" * 32 + "-" + "4" * 16 + "-01"}


def _message(cid: str) -> dict:
    return {
        "call_id": cid,
        "run_id": "run-1",
        "session_id": "s",
        "config_hash": "h",
        "name": "noop",
        "tool": "Test:noop",
        "arguments": {},
        "max_attempts": 3,
    }


def test_a_backlogged_call_is_promoted_as_kombus_message(runtime: WorkerRuntime) -> None:
    queue = f"test.promoted.{uuid.uuid4().hex[:6]}"
    settings = dataclasses.replace(runtime.settings, fair_share=1, fair_burst=1, backlog_window=2)
    store = RedisStore.from_settings(settings)
    store.client.set(store.keys.config("h"), "{}")
    calls = [f"p{i}" for i in range(4)]
    for cid in calls:
        captured = runtime.capture(_message(cid), queue)
        assert captured is not None
        fields = {"session_id": "s", "name": "noop", "message": pack(_message(cid))}
        fields["trace"] = json.dumps(TRACE)
        code = store.records.create_and_enqueue(
            cid, "run-1", fields, *captured, config_hash="h", tenant="pt"
        )
        assert code == 1
    sunk = sunk_queue(queue.encode())
    assert store.client.lrange(store.keys.backlog(queue), 0, -1) == [b"p3"]
    store.client.delete(sunk)  # the sunk list drained
    assert BacklogPromoter(runtime, (queue,)).promote(queue) == 1  # one id waited
    (raw,) = store.client.lrange(sunk, 0, -1)
    envelope = read_queue_item(raw)  # what a worker's screen accepts
    assert envelope["properties"]["priority"] == SUNK_PRIORITY
    assert envelope["headers"]["task"] == EXECUTE_TASK
    assert envelope["headers"]["traceparent"] == TRACE["traceparent"]
    assert envelope["properties"]["delivery_info"]["routing_key"] == queue
    assert store.client.llen(store.keys.backlog(queue)) == 0
    assert store.client.hget(store.keys.call("p3"), "qkey") == sunk
    store.client.delete(queue, sunk, *(store.keys.call(c) for c in calls))
    store.close()
