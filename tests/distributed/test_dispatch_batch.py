"""Dispatches of one event-loop turn share one write (``dispatch_batch.py``), on the real
stack: each caller gets its own reply, a caller cancelled before the flush leaves nothing
behind, and a script Redis forgot is loaded again."""

from __future__ import annotations

import asyncio

from toolhub.distributed import dispatch_batch

QUEUE = b"bench.batched"


def _dispatch(store, cid: str, run_id: str = "run"):
    return store.dispatches.create_and_enqueue(
        *store.records.create_and_enqueue_args(
            cid, run_id, {"session_id": "s", "name": "noop"}, QUEUE, cid.encode(), config_hash="h"
        )
    )


def test_one_turns_dispatches_go_out_in_one_write(live, store, monkeypatch):
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)
    cids = [f"batched-{i}" for i in range(20)]
    batches: list[int] = []
    real_run_scripts = dispatch_batch.run_scripts

    def counted(client, script, calls):
        batches.append(len(calls))
        return real_run_scripts(client, script, calls)

    monkeypatch.setattr(dispatch_batch, "run_scripts", counted)

    async def body() -> list[int]:
        return await asyncio.gather(*(_dispatch(store, cid) for cid in cids))

    replies = asyncio.run(body())
    assert replies == [1] * 20, "each caller gets its own reply: created and queued"
    assert batches == [20], "one write carried the turn's twenty scripts"
    assert sorted(client.lrange(QUEUE, 0, -1)) == sorted(c.encode() for c in cids)
    again = asyncio.run(_dispatch(store, cids[0], "other-run"))
    assert again == 0, "the id of a queued call is refused, as by the unbatched script"
    client.delete(QUEUE, store.keys.config("h"), *(store.keys.call(c) for c in cids))


def test_a_dispatch_cancelled_before_the_flush_records_and_queues_nothing(live, store):
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)

    async def body() -> int:
        doomed = asyncio.ensure_future(_dispatch(store, "doomed"))
        kept = asyncio.ensure_future(_dispatch(store, "kept"))
        await asyncio.sleep(0)  # both queued their dispatch; the flush has not run yet
        doomed.cancel()
        return await kept

    assert asyncio.run(body()) == 1
    assert client.exists(store.keys.call("doomed")) == 0
    assert client.lrange(QUEUE, 0, -1) == [b"kept"]
    client.delete(QUEUE, store.keys.call("kept"), store.keys.config("h"))


def test_a_script_redis_forgot_is_loaded_again(live, store):
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)
    client.script_flush()
    try:
        assert asyncio.run(_dispatch(store, "after-flush")) == 1
        assert client.lrange(QUEUE, 0, -1) == [b"after-flush"]
    finally:
        client.delete(QUEUE, store.keys.call("after-flush"), store.keys.config("h"))
