"""Fair dispatch (``toolhub/distributed/fair.py``) on the real stack: the script queues a
tenant's calls past its fair share at the over level and past its burst line at the sunk
level, with kombu's own priority, the claim gives the share back,
and on real workers one tenant's single call overtakes another tenant's backlog while every
call of that backlog still runs exactly once."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from tests.distributed.helpers import async_wait_until, wait_until
from toolhub.distributed.celery_app import EXECUTE_TASK, make_celery
from toolhub.distributed.enqueue import Enqueuer, capture_send_task
from toolhub.distributed.fair import (
    NORMAL_FIELD,
    OVER_FIELD,
    OVER_PRIORITY,
    SUNK_FIELD,
    SUNK_PRIORITY,
    over_queue,
    sunk_queue,
)
from toolhub.distributed.settings import Settings

QUEUE = b"bench.fair"


def _envelope(payload: bytes) -> dict:
    envelope = json.loads(payload)
    envelope["properties"].pop("delivery_tag")
    return envelope


def test_a_sunk_message_is_the_one_kombu_builds_at_the_sunk_priority(live):
    """The script's rewrite of the level-0 message equals kombu's own message at
    ``SUNK_PRIORITY``, on the list kombu would push it to (so kombu's restore keeps it there)."""
    app = make_celery(Settings.from_env(live.url))
    options = {"queue": "toolhub.command", "kwargs": {"k": 1}, "kwargsrepr": "r"}
    normal = capture_send_task(app, EXECUTE_TASK, task_id="t", ignore_result=True, **options)
    sunk = capture_send_task(
        app, EXECUTE_TASK, task_id="t", ignore_result=True, priority=SUNK_PRIORITY, **options
    )
    assert normal is not None and sunk is not None
    assert normal[1].count(NORMAL_FIELD.encode()) == 1
    assert sunk[0] == sunk_queue(normal[0])
    rewritten = normal[1].replace(NORMAL_FIELD.encode(), SUNK_FIELD.encode())
    assert _envelope(rewritten) == _envelope(sunk[1])
    over = capture_send_task(
        app, EXECUTE_TASK, task_id="t", ignore_result=True, priority=OVER_PRIORITY, **options
    )
    assert over is not None and over[0] == over_queue(normal[0])
    rewritten = normal[1].replace(NORMAL_FIELD.encode(), OVER_FIELD.encode())
    assert _envelope(rewritten) == _envelope(over[1])
    templated = Enqueuer(app).message(EXECUTE_TASK, "toolhub.command", {"k": 1}, "r")
    assert templated is not None and templated[1].count(NORMAL_FIELD.encode()) == 1


def _enqueue(store, cid: str, tenant: str) -> None:
    store.client.set(store.keys.config("h"), "{}")
    payload = b'{"body": "x", "properties": {"priority": 0, "tag": "' + cid.encode() + b'"}}'
    code = store.records.create_and_enqueue(
        cid, "run", {"session_id": "s", "name": "noop"}, QUEUE, payload, config_hash="h",
        tenant=tenant,
    )  # fmt: skip
    assert code == 1


def _claim(store, cid: str) -> None:
    store.records.claim({"call_id": cid, "session_id": "s", "run_id": "run"}, "w")


def test_past_its_share_a_tenants_calls_queue_over_and_a_claim_gives_the_share_back(live, store):
    client, share = store.client, store.settings.fair_share
    assert store.settings.fair_burst > share + 4
    sunk = over_queue(QUEUE)  # below the burst line, past the share: the over level
    client.delete(QUEUE, sunk, store.keys.fair_queued("a"), store.keys.fair_queued("b"))
    for i in range(share + 3):
        _enqueue(store, f"fair-a{i}", "a")
    _enqueue(store, "fair-b0", "b")
    assert client.llen(QUEUE) == share + 1  # a's share, then b's call
    assert client.lindex(QUEUE, 0).endswith(b'"fair-b0"}}')
    assert client.llen(sunk) == 3
    for raw in client.lrange(sunk, 0, -1):
        assert b'"priority": 5' in raw and b'"priority": 0' not in raw
    record = store.get_record("fair-a5")
    assert record is not None and "fair" not in record  # internal, like the queue key
    assert client.hget(store.keys.call(f"fair-a{share}"), "qkey") == sunk
    # The claim takes the call out of its tenant's count: the next call is at level 0 again.
    for i in range(3):
        _claim(store, f"fair-a{i}")
    assert client.zcard(store.keys.fair_queued("a")) == share
    _enqueue(store, "fair-a-next", "a")
    assert client.llen(sunk) == 4
    for i in range(3, share + 3):
        _claim(store, f"fair-a{i}")
    _enqueue(store, "fair-a-last", "a")
    assert client.lindex(QUEUE, 0).endswith(b'"fair-a-last"}}')
    # An entry nobody removed lapses with the record's TTL instead of counting forever.
    key = store.keys.fair_queued("c")
    client.zadd(key, {f"ghost{i}": time.time() - 1 for i in range(share + 1)})
    _enqueue(store, "fair-c0", "c")
    assert client.lindex(QUEUE, 0).endswith(b'"fair-c0"}}')
    assert client.zcard(key) == 1
    client.delete(QUEUE, sunk)


def test_past_its_burst_line_a_tenants_calls_sink(live, store):
    """From ``fair_burst`` queued calls on, a tenant's calls go to the sunk list, behind every
    over one: a tenant whose few calls piled up (its share and a little more) never waits
    behind another tenant's burst."""
    client, share, burst = store.client, store.settings.fair_share, store.settings.fair_burst
    over, sunk = over_queue(QUEUE), sunk_queue(QUEUE)
    client.delete(QUEUE, over, sunk, store.keys.fair_queued("d"), store.keys.fair_queued("e"))
    for i in range(burst + 2):
        _enqueue(store, f"fair-d{i}", "d")
    assert (client.llen(QUEUE), client.llen(over), client.llen(sunk)) == (share, burst - share, 2)
    for raw in client.lrange(sunk, 0, -1):
        assert b'"priority": 9' in raw and b'"priority": 0' not in raw
    for i in range(share + 1):
        _enqueue(store, f"fair-e{i}", "e")  # e's one call past its share: over, not sunk
    assert client.lindex(over, 0).endswith(b'"fair-e' + str(share).encode() + b'"}}')
    assert client.llen(sunk) == 2
    client.delete(QUEUE, over, sunk)


#: The shared stack's worker slots (2 workers x 4 threads).
SLOTS = 8


async def _backlog_and_single(connect, store, markers: Path) -> tuple[list, int, object]:
    """a's 300 calls queue behind blockers that hold every worker slot, so the backlog is whole
    however fast this machine submits it (a busy one once submitted no faster than the workers
    drained, and a backlog that never formed was waited for in vain); b's call is queued next,
    then the blockers are cancelled and the slots pick the queues in their order."""
    a = connect(session_id="fair-a~backlog")
    b = connect(session_id="fair-b~single")
    c = connect(session_id="fair-c~blockers")
    blockers = [
        asyncio.ensure_future(c.call("sleeper", {"seconds": 60}, call_id=f"fair-block{i}"))
        for i in range(SLOTS)
    ]

    def running() -> bool:
        return all(
            (store.get_record(f"fair-block{i}") or {}).get("status") == "running"
            for i in range(SLOTS)
        )

    await async_wait_until(running, 90)
    backlog = [
        asyncio.ensure_future(
            a.call("ticks", {"n": 1, "delay_ms": 100, "marker": str(markers / f"a{i}")},
                   call_id=f"a{i}")
        )
        for i in range(300)
    ]  # fmt: skip
    queued = store.keys.fair_queued("fair-a")
    await async_wait_until(lambda: store.client.zcard(queued) == 300, 90)
    single = asyncio.ensure_future(b.call("ticks", {"n": 1}, call_id="b0"))
    await async_wait_until(lambda: (store.get_record("b0") or {}).get("status") == "queued", 30)
    for i in range(SLOTS):
        await c.cancel(f"fair-block{i}")
    await asyncio.gather(*blockers)
    answer = await single
    unfinished = sum(not call.done() for call in backlog)
    results = await asyncio.gather(*backlog)
    return results, unfinished, answer


def test_a_tenants_single_call_overtakes_another_tenants_backlog(live, connect, store, tmp_path):
    """300 calls of 0.1 s on 8 worker slots take seconds; b's one call, sent once all of them
    are queued, finishes while most are still waiting (FIFO would run it after all of them),
    and every call of the backlog finishes, having run once (or, where the machine stalled a
    worker past its lease, as often as its record's attempts announce: never silently)."""
    results, unfinished, single = asyncio.run(_backlog_and_single(connect, store, tmp_path))
    assert not single.is_error, single.prompt_text
    assert unfinished >= 150, f"only {unfinished} of a's 300 calls were unfinished"
    assert all(not r.is_error for r in results), [r.prompt_text for r in results if r.is_error]
    records = {f"a{i}": store.get_record(f"a{i}") for i in range(300)}
    assert all(r is not None and r["status"] == "succeeded" for r in records.values())
    runs = {cid: (tmp_path / cid).read_text().count("start") for cid in records}
    unsaid = {
        cid: (runs[cid], record["attempts"])
        for cid, record in records.items()
        if record is not None and runs[cid] != len(record["attempts"])
    }
    assert not unsaid, f"runs differ from the recorded attempts: {unsaid}"
    assert sum(runs.values()) >= 300
    wait_until(lambda: store.client.zcard(store.keys.fair_queued("fair-a")) == 0)
