"""A queue's backlog (``toolhub/distributed/backlog.py``): past the sunk list's window a call
past its tenant's share waits as its id, with no message and no claim deadline; promotion moves
the oldest ids into the sunk list as their messages, drops ids whose call ended, and acts once
under concurrent promoters; on real workers every backlogged call runs exactly once."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator

import pytest

from tests.distributed.helpers import wait_until
from toolhub.distributed.backlog import Backlogs
from toolhub.distributed.codec import pack
from toolhub.distributed.fair import NORMAL_FIELD, SUNK_FIELD, sunk_queue
from toolhub.distributed.settings import Settings
from toolhub.distributed.shared import close_shared_backends
from toolhub.distributed.store import RedisStore

QUEUE = "test.backlogged"
WINDOW = 2


@pytest.fixture
def small(live) -> Iterator[RedisStore]:
    """A dispatcher's store with a fair share of 1 (no over level) and a sunk-list window of 2."""
    settings = dataclasses.replace(
        Settings.from_env(live.url), fair_share=1, fair_burst=1, backlog_window=WINDOW
    )
    store = RedisStore.from_settings(settings)
    keys = store.keys
    store.client.delete(QUEUE, sunk_queue(QUEUE.encode()), keys.backlog(QUEUE))
    store.client.delete(keys.fair_queued("bt"))
    yield store
    store.client.delete(QUEUE, sunk_queue(QUEUE.encode()), keys.backlog(QUEUE))
    store.close()


def _enqueue(store: RedisStore, cid: str) -> None:
    store.client.set(store.keys.config("h"), "{}")
    message = {"call_id": cid, "run_id": "run", "session_id": "s", "name": "noop"}
    payload = b'{"properties": {"priority": 0}, "call": "' + cid.encode() + b'"}'
    fields = {"session_id": "s", "name": "noop", "message": pack(message)}
    code = store.records.create_and_enqueue(
        cid, "run", fields, QUEUE.encode(), payload, config_hash="h", tenant="bt"
    )
    assert code == 1


def _build(message: dict, trace: dict | None = None) -> bytes:
    """A stand-in level-0 message naming its call (the real one: kombu's, ``promoter.py``)."""
    return b'{"properties": {"priority": 0}, "call": "' + message["call_id"].encode() + b'"}'


def test_past_the_window_a_call_waits_as_its_id_until_promoted(small):
    client, keys = small.client, small.keys
    calls = [f"bl{i}" for i in range(8)]
    for cid in calls:
        _enqueue(small, cid)
    sunk, backlog = sunk_queue(QUEUE.encode()), keys.backlog(QUEUE)
    assert client.llen(QUEUE) == 1 and client.llen(sunk) == WINDOW
    assert client.lrange(backlog, 0, -1) == [c.encode() for c in reversed(calls[3:])]
    waiting = client.hgetall(keys.call("bl3"))
    assert waiting[b"qkey"] == backlog.encode() and waiting[b"status"] == b"queued"
    assert b"claim_by" not in waiting and b"qpos" not in waiting  # no worker can take it
    assert client.zscore(keys.pending, "bl3") is None
    assert client.zcard(keys.fair_queued("bt")) == 8  # still counts in its tenant's share
    # The dispatcher's trace context comes back with the stored message (tracing on).
    context = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    client.hset(keys.call("bl3"), "trace", json.dumps(context))
    assert "trace" not in small.get_record("bl3")  # bookkeeping, not shown
    traces: dict[str, dict | None] = {}

    def build(message: dict, trace: dict | None) -> bytes:
        traces[message["call_id"]] = trace
        return _build(message)

    # A call ended while backlogged leaves the backlog at its turn, unpromoted.
    assert small.records.cancel("bl4") == "cancelled"
    client.rpop(sunk)
    client.rpop(sunk)  # the sunk list drained: promote
    backlogs = Backlogs(small.records)
    promoted = backlogs.promote(QUEUE, build, WINDOW)
    assert (promoted.waiting, promoted.taken) == (5, 2)  # bl3 promoted, bl4 dropped
    assert traces == {"bl3": context}
    assert client.llen(sunk) == 1
    assert backlogs.promote(QUEUE, _build, WINDOW).taken == 1  # half the window: top up
    assert client.lrange(sunk, 0, -1) == [
        _build({"call_id": c}).replace(NORMAL_FIELD.encode(), SUNK_FIELD.encode())
        for c in ("bl5", "bl3")
    ]
    moved = client.hgetall(keys.call("bl3"))
    assert moved[b"qkey"] == sunk and b"qpos" in moved and b"claim_by" in moved
    assert client.zscore(keys.pending, "bl3") is not None
    assert client.lrange(backlog, 0, -1) == [b"bl7", b"bl6"]
    # Above half the window nothing moves; a promoter that lost the race stops at once.
    assert backlogs.promote(QUEUE, _build, WINDOW).taken == 0
    client.rpop(sunk)
    client.rpop(sunk)
    raced = small.records.scripts.promote(
        keys=[backlog, sunk, keys.pending, keys.call("bl5")], args=[3.0, "bl5", "run", b"{}"]
    )
    assert raced == 0 and client.llen(backlog) == 2
    for cid in calls:
        client.delete(keys.call(cid), keys.events(cid))
        client.zrem(keys.pending, cid)


def test_a_backlog_on_real_workers_runs_every_call_once(live, connect, monkeypatch, store):
    """The dispatcher keeps at most 2 messages in the sunk list; the workers promote the rest
    as it drains, and each call runs once (no re-enqueue, no call left behind)."""
    monkeypatch.setenv("TOOLHUB_BACKLOG_WINDOW", str(WINDOW))
    monkeypatch.setenv("TOOLHUB_FAIR_BURST", "0")  # no over level: past the share, the sunk one
    close_shared_backends()  # the scripts are made with the window: this test's, then the default
    session = connect(session_id="bl-tenant~burst")

    async def burst() -> list:
        calls = [session.call("noop", {}, call_id=f"bl-burst{i}") for i in range(40)]
        return await asyncio.gather(*calls)

    try:
        results = asyncio.run(burst())
    finally:
        session.close()
        close_shared_backends()
    assert all(not r.is_error for r in results), [r.prompt_text for r in results if r.is_error]
    for i in range(40):
        record = store.get_record(f"bl-burst{i}")
        assert record is not None and record["status"] == "succeeded"
        assert "requeued" not in record and len(record["attempts"]) == 1
    wait_until(lambda: store.client.llen(store.keys.backlog("toolhub.fast")) == 0)
