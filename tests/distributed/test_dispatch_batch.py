"""Dispatches of one event-loop turn share one write (``dispatch_batch.py``), on the real
stack: each caller gets its own reply, a large turn is written in slices as it comes, a
caller cancelled before its write leaves nothing behind, a broken connection sends the turn
again without refusing calls a worker took meanwhile, and a script Redis forgot is loaded
again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolhub.distributed import dispatch_batch
from toolhub.distributed.evalsha import read_replies

QUEUE = b"bench.batched"


def _dispatch(store, cid: str, run_id: str = "run"):
    return store.dispatches.create_and_enqueue(
        *store.records.create_and_enqueue_args(
            cid,
            run_id,
            {"session_id": "s", "name": "noop"},
            QUEUE,
            cid.encode(),
            config_hash="h",
            tenant="t",
        )
    )


def _count_writes(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> None:
    """Record each write's size in ``events`` (``"w<n>"``)."""
    real_send = dispatch_batch.send_scripts

    def counted(conn: Any, script: Any, calls: Any) -> None:
        events.append(f"w{len(calls)}")
        real_send(conn, script, calls)

    monkeypatch.setattr(dispatch_batch, "send_scripts", counted)


def test_one_turns_dispatches_go_out_in_one_write(live, store, monkeypatch):
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)
    cids = [f"batched-{i}" for i in range(20)]
    writes: list[str] = []
    _count_writes(monkeypatch, writes)

    async def body() -> list[int]:
        return await asyncio.gather(*(_dispatch(store, cid) for cid in cids))

    replies = asyncio.run(body())
    assert replies == [1] * 20, "each caller gets its own reply: created and queued"
    assert writes == ["w20"], "one write carried the turn's twenty scripts"
    assert sorted(client.lrange(QUEUE, 0, -1)) == sorted(c.encode() for c in cids)
    again = asyncio.run(_dispatch(store, cids[0], "other-run"))
    assert again == 0, "the id of a queued call is refused, as by the unbatched script"
    client.delete(QUEUE, store.keys.config("h"), *(store.keys.call(c) for c in cids))


def test_a_large_turn_is_written_in_slices_as_its_dispatches_come(live, store, monkeypatch):
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)
    monkeypatch.setattr(dispatch_batch, "SEND_EVERY", 8)
    cids = [f"sliced-{i}" for i in range(20)]
    events: list[str] = []
    _count_writes(monkeypatch, events)

    async def one(cid: str) -> int:
        events.append("d")
        return await _dispatch(store, cid)

    async def body() -> list[int]:
        return await asyncio.gather(*(one(cid) for cid in cids))

    assert asyncio.run(body()) == [1] * 20
    assert events == ["d"] * 8 + ["w8"] + ["d"] * 8 + ["w8"] + ["d"] * 4 + ["w4"], (
        "each slice goes out as soon as it is full, while later dispatches are still coming"
    )
    assert sorted(client.lrange(QUEUE, 0, -1)) == sorted(c.encode() for c in cids)
    client.delete(QUEUE, store.keys.config("h"), *(store.keys.call(c) for c in cids))


def test_a_broken_turn_is_sent_again_and_a_call_taken_meanwhile_is_still_its_callers(
    live, store, monkeypatch
):
    """The first slice's calls ran their script; one is claimed by a worker before the
    connection breaks. The turn goes again through a pipeline: every caller still gets
    "created", not "id in use", and each call is queued once."""
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)
    client.script_load(store.records.scripts.create_and_enqueue.script)
    monkeypatch.setattr(dispatch_batch, "SEND_EVERY", 2)
    cids = [f"broken-{i}" for i in range(3)]
    real_send = dispatch_batch.send_scripts
    writes: list[int] = []

    def send_then_claim(conn: Any, script: Any, calls: Any) -> None:
        real_send(conn, script, calls)
        writes.append(len(calls))
        if len(writes) > 1:
            return
        assert read_replies(conn, 2) == [1, 1]  # the first slice ran; take its replies
        client.hset(store.keys.call(cids[0]), "status", "running")  # as a worker's claim
        conn.send_command("CLIENT", "ID")
        client.client_kill_filter(_id=conn.read_response())  # Redis drops the connection

    monkeypatch.setattr(dispatch_batch, "send_scripts", send_then_claim)

    async def body() -> list[int]:
        return await asyncio.gather(*(_dispatch(store, cid) for cid in cids))

    assert asyncio.run(body()) == [1, 1, 1]
    assert writes == [2, 1]
    assert sorted(client.lrange(QUEUE, 0, -1)) == sorted(c.encode() for c in cids)
    assert client.hget(store.keys.call(cids[0]), "status") == b"running", "left as claimed"
    client.delete(QUEUE, store.keys.config("h"), *(store.keys.call(c) for c in cids))


def test_a_dispatch_cancelled_after_its_write_is_queued_and_the_others_answered(
    live, store, monkeypatch
):
    client = store.client
    client.set(store.keys.config("h"), "{}")
    client.delete(QUEUE)
    monkeypatch.setattr(dispatch_batch, "SEND_EVERY", 2)

    async def body() -> list[int]:
        tasks = [asyncio.ensure_future(_dispatch(store, f"late-{i}")) for i in range(3)]
        await asyncio.sleep(0)  # all three queued; the first two written; no flush yet
        tasks[0].cancel()
        return list(await asyncio.gather(*tasks[1:]))

    assert asyncio.run(body()) == [1, 1]
    assert sorted(client.lrange(QUEUE, 0, -1)) == [b"late-0", b"late-1", b"late-2"], (
        "a written dispatch runs, as one whose caller left after the flush always did"
    )
    client.delete(QUEUE, store.keys.config("h"), *(store.keys.call(f"late-{i}") for i in range(3)))


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
