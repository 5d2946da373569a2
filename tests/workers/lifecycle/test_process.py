"""SIGTERM: a worker finishes what it can within its soft-shutdown window and hands the rest
back to the queue; no call is lost or run to completion twice."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from tests.distributed.helpers import async_wait_until, worker_pid


def test_sigterm_finishes_short_calls_and_hands_back_long_ones(
    live, connect, store, tmp_path: Path
):
    session = connect()
    marker = tmp_path / "runs.txt"
    # Soft shutdown is 3 s in the test stack: 1 s calls finish, 6 s calls are handed back.
    short = [f"term-short-{i}" for i in range(4)]
    long = [f"term-long-{i}" for i in range(2)]

    async def go():
        calls = {
            cid: asyncio.ensure_future(
                session.call(
                    "ticks", {"n": 10, "delay_ms": 100, "marker": str(marker)}, call_id=cid
                )
            )
            for cid in short
        }
        calls |= {
            cid: asyncio.ensure_future(
                session.call(
                    "ticks", {"n": 60, "delay_ms": 100, "marker": str(marker)}, call_id=cid
                )
            )
            for cid in long
        }
        await async_wait_until(
            lambda: all((store.get_record(c) or {}).get("status") == "running" for c in calls), 10
        )
        victim_pid = worker_pid(store.get_record(long[0]))
        victim = live.worker_by_pid(victim_pid)
        on_victim = [c for c in calls if worker_pid(store.get_record(c)) == victim_pid]
        started = time.monotonic()
        victim.signal(signal.SIGTERM)
        results = {cid: await task for cid, task in calls.items()}
        exit_code = await asyncio.to_thread(victim.wait, 20)
        return results, victim_pid, on_victim, exit_code, time.monotonic() - started

    results, victim_pid, on_victim, exit_code, took = asyncio.run(asyncio.wait_for(go(), 60))
    assert all(not r.is_error for r in results.values()), [
        r.prompt_text for r in results.values() if r.is_error
    ]
    assert exit_code == 0 and took < 20
    for cid in on_victim:
        record = store.get_record(cid)
        outcomes = [a["outcome"] for a in record["attempts"]]
        if cid in long:
            assert outcomes == ["handed_back", "succeeded"], (cid, outcomes)
            assert worker_pid({"worker": record["worker"]}) != victim_pid
            assert record["lost"] == 0
        else:
            assert outcomes == ["succeeded"], (cid, outcomes)
    dones = [line for line in marker.read_text().splitlines() if line.startswith("done")]
    assert len(dones) == len(short) + len(long)
