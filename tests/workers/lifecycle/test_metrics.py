"""Worker ``/metrics`` scraped before and after real calls on the real stack: each counter moves
by exactly what the calls did, summed over both workers."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.distributed.helpers import async_wait_until, wait_until, worker_pid
from tests.fixtures_stack import WorkerProcess
from tests.observability.metrics_scrape import moved, scrape_all, total, value
from toolhub import CallResult
from toolhub.distributed.codec import unpack

CALLS = "toolhub_worker_calls_total"
RUNS = "toolhub_worker_run_seconds_count"
IN_FLIGHT = "toolhub_worker_calls_in_flight"


def test_counters_move_by_exactly_the_calls_made(live, connect, store, tmp_path: Path):
    session = connect()
    before = scrape_all(live)
    n = 5

    async def go():
        results = await asyncio.gather(
            *(session.call("noop", {}, call_id=f"obs-ok-{i}") for i in range(n))
        )
        # A tool that raises: its marker is a directory, which it cannot append to.
        failed = await session.call("ticks", {"n": 1, "marker": str(tmp_path)}, call_id="obs-err")
        # A duplicate delivery while the call runs is dropped, not run.
        running = asyncio.ensure_future(
            session.call("ticks", {"n": 10, "delay_ms": 50}, call_id="obs-dup")
        )
        await async_wait_until(
            lambda: (store.get_record("obs-dup") or {}).get("status") == "running"
        )
        message = unpack(store.client.hget(store.keys.call("obs-dup"), "message"))
        session.executor.app.send_task("toolhub.execute", kwargs=message, queue="toolhub.command")
        # A cancelled call.
        sleeper = asyncio.ensure_future(session.call("sleeper", {"seconds": 30}, call_id="obs-c"))
        await async_wait_until(lambda: (store.get_record("obs-c") or {}).get("status") == "running")
        await session.cancel("obs-c")
        return results, failed, await running, await sleeper

    results, failed, duplicated, cancelled = asyncio.run(asyncio.wait_for(go(), 30))
    assert not any(r.is_error for r in results) and not duplicated.is_error
    assert failed.is_error and cancelled.is_error and cancelled.error.kind == "cancelled"
    wait_until(lambda: total(scrape_all(live), IN_FLIGHT) == 0, 30)
    # The duplicate is claimed (and dropped) by whichever worker pops it.
    wait_until(
        lambda: (
            moved(
                before,
                scrape_all(live),
                "toolhub_worker_messages_dropped_total",
                reason="duplicate",
            )
            == 1
        ),
        5,
    )
    # A caller may have its result a moment before the worker counts the run it finished.
    wait_until(
        lambda: moved(before, scrape_all(live), CALLS, tool="Test:noop", outcome="ok") == n, 5
    )
    after = scrape_all(live)

    assert moved(before, after, CALLS, tool="Test:noop", outcome="ok") == n
    assert moved(before, after, RUNS, tool="Test:noop") == n
    assert moved(before, after, CALLS, tool="Test:ticks", outcome=failed.error.kind.value) == 1
    assert moved(before, after, CALLS, tool="Test:ticks", outcome="ok") == 1
    assert moved(before, after, RUNS, tool="Test:ticks") == 2
    assert moved(before, after, CALLS, tool="Test:sleeper", outcome="cancelled") == 1
    assert moved(before, after, "toolhub_worker_retries_total", tool="Test:ticks") == 0
    assert moved(before, after, "toolhub_worker_leases_lost_total") == 0
    # Every run of each worker is in its histogram, and only finished runs are.
    for samples in after:
        runs = sum(v for (name, _), v in samples.items() if name == RUNS)
        calls = sum(v for (name, _), v in samples.items() if name == CALLS)
        assert runs == calls


def test_a_frozen_worker_loses_its_lease_and_another_recovers_the_call(live, connect, store):
    """SIGSTOP the worker running a call for longer than its lease: the other worker takes the
    call over (its sweep re-enqueues it, or the call's redelivered message finds its lease
    expired) and runs it as attempt 2 (retry); once the frozen worker
    resumes, its renewal finds the call taken over (lease lost) and its attempt stops."""
    session = connect()
    before = scrape_all(live)
    cid = "obs-frozen"
    frozen: list[WorkerProcess] = []

    async def go():
        async for item in session.stream("ticks", {"n": 40, "delay_ms": 50}, call_id=cid):
            if not frozen:
                holder = live.worker_by_pid(worker_pid(store.get_record(cid)))
                holder.signal(signal.SIGSTOP)
                frozen.append(holder)
                other = next(w for w in live.workers if w is not holder)
                await async_wait_until(
                    lambda: (store.get_record(cid) or {}).get("attempt") == 2, 10
                )
                assert worker_pid(store.get_record(cid)) == other.pid
                holder.signal(signal.SIGCONT)
            if isinstance(item, CallResult):
                return item
        return None

    try:
        result = asyncio.run(asyncio.wait_for(go(), 30))
    finally:
        for worker in frozen:
            worker.signal(signal.SIGCONT)
    assert result is not None and not result.is_error, result
    wait_until(lambda: total(scrape_all(live), IN_FLIGHT) == 0, 10)
    after = scrape_all(live)
    # The other worker's sweep re-enqueues the call, unless the frozen worker's own message,
    # put back on the queue first, reached it (``claim.lua`` takes over an expired lease then,
    # with no sweep): one or the other, never both.
    recovered = moved(before, after, "toolhub_worker_calls_recovered_total")
    assert recovered in (0, 1)
    assert moved(before, after, "toolhub_worker_retries_total", tool="Test:ticks") == 1
    assert moved(before, after, "toolhub_worker_leases_lost_total") == 1
    assert moved(before, after, CALLS, tool="Test:ticks", outcome="lease_lost") == 1
    assert moved(before, after, CALLS, tool="Test:ticks", outcome="ok") == 1
    # Per worker: the frozen one lost the lease, the other recovered the call and re-ran it.
    holder = live.workers.index(frozen[0])
    other = 1 - holder
    lost = "toolhub_worker_leases_lost_total"
    assert moved([before[holder]], [after[holder]], lost) == 1
    assert (
        moved([before[other]], [after[other]], "toolhub_worker_calls_recovered_total") == recovered
    )
    assert (
        moved([before[other]], [after[other]], "toolhub_worker_retries_total", tool="Test:ticks")
        == 1
    )


def test_each_ready_worker_has_frozen_its_startup_heap(live):
    """Full collections skip the worker's startup heap (toolhub/process_heap.py): a worker that
    did not freeze it reports 0, and its full collections are counted apart, with their pauses."""
    for samples in scrape_all(live):
        assert value(samples, "toolhub_worker_heap_frozen_objects") > 10_000
        assert ("python_gc_collections_total", frozenset({("generation", "2")})) in samples
        # The freeze's own full collection, at least, with how long it stopped the worker.
        assert value(samples, "toolhub_gc_pause_seconds_count", generation="2") >= 1
        assert value(samples, "toolhub_gc_pause_seconds_sum", generation="2") > 0
