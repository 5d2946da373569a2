"""Workers die: the call still completes exactly once, and a poison call stops."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

from tests.distributed.helpers import (
    assert_contiguous,
    async_wait_until,
    follow_all,
    wait_until,
    worker_pid,
)
from toolhub import CallResult, Progress
from toolhub.distributed.codec import unpack


def test_sigkill_mid_call_completes_once_on_another_worker(live, connect, store, tmp_path: Path):
    session = connect()
    marker = tmp_path / "runs.txt"
    cid = "kill-mid-call"

    async def go():
        # Following before the dispatch: the call may not exist yet when it starts.
        follower = asyncio.ensure_future(follow_all(store, cid, must_exist=False))
        seen: list[Progress | CallResult] = []
        killed: list[int] = []
        async for item in session.stream(
            "ticks", {"n": 20, "delay_ms": 60, "marker": str(marker)}, call_id=cid
        ):
            seen.append(item)
            if len(seen) == 5:
                pid = worker_pid(store.get_record(cid))
                live.worker_by_pid(pid).signal(signal.SIGKILL)
                killed.append(pid)
        return seen, killed[0], await follower

    seen, killed_pid, events = asyncio.run(asyncio.wait_for(go(), 60))
    result = seen[-1]
    assert isinstance(result, CallResult) and not result.is_error, result.prompt_text
    assert result.output.value["worker_pid"] != killed_pid
    # The re-run is announced first thing in what the model reads.
    assert result.prompt_text.startswith(
        "[toolhub] The worker running this call was lost; the call ran again from the start "
        "(attempt 2 of 3)."
    )
    # The consumer saw every event once, in order: attempt 1's ticks, the retry marker,
    # attempt 2's ticks, one terminal.
    assert_contiguous(events)
    assert [e.item.to_dict() for e in events] == [i.to_dict() for i in seen]
    retries = [i for i in seen if isinstance(i, Progress) and i.subkind == "retry"]
    assert [r.payload["attempt"] for r in retries] == [2]
    assert len([i for i in seen if isinstance(i, Progress) and i.subkind == "tick"]) >= 20
    # It ran to completion exactly once.
    lines = marker.read_text().splitlines()
    assert lines.count(f"start {killed_pid}") == 1
    assert [line for line in lines if line.startswith("done")] == [
        f"done {result.output.value['worker_pid']}"
    ]
    record = store.get_record(cid)
    assert record["status"] == "succeeded" and record["attempt"] == 2
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "succeeded"]
    assert worker_pid({"worker": record["attempts"][0]["worker"]}) == killed_pid
    assert record["lost"] == 1
    assert store.client.ttl(store.keys.call(cid)) > 0
    assert store.client.ttl(store.keys.events(cid)) > 0
    assert store.client.zscore(store.keys.leases, cid) is None


def test_duplicate_delivery_with_live_lease_runs_nothing_twice(
    live, connect, store, tmp_path: Path
):
    session = connect()
    marker = tmp_path / "runs.txt"
    cid = "duplicate-delivery"
    app = session.executor.app

    async def go():
        task = asyncio.ensure_future(
            session.call("ticks", {"n": 40, "delay_ms": 100, "marker": str(marker)}, call_id=cid)
        )
        await async_wait_until(lambda: (store.get_record(cid) or {}).get("status") == "running")
        message = unpack(store.client.hget(store.keys.call(cid), "message"))
        # Duplicates reach both workers, and the call outlives two leases after them: the
        # run that owns the call keeps renewing it.
        for _ in range(4):
            app.send_task("toolhub.execute", kwargs=message, queue="toolhub.command")
        result = await task
        return result, message

    result, message = asyncio.run(asyncio.wait_for(go(), 30))
    assert not result.is_error, result.prompt_text
    seq_after = store.get_record(cid)["seq"]
    # A redelivery after the call finished is dropped as well.
    app.send_task("toolhub.execute", kwargs=message, queue="toolhub.command")
    wait_until(lambda: store.client.llen("toolhub.command") == 0, 5)
    lines = marker.read_text().splitlines()
    assert len([line for line in lines if line.startswith("start")]) == 1
    record = store.get_record(cid)
    assert record["attempt"] == 1 and len(record["attempts"]) == 1
    assert record["seq"] == seq_after == 41


def test_poison_call_stops_at_the_attempt_limit(live, connect, store, monkeypatch):
    monkeypatch.setenv("TOOLHUB_MAX_ATTEMPTS", "2")
    session = connect()
    cid = "poison"
    stop = threading.Event()

    def keep_workers_alive() -> None:
        while not stop.is_set():
            live.heal()
            stop.wait(0.1)

    healer = threading.Thread(target=keep_workers_alive, daemon=True)
    healer.start()
    try:
        result = asyncio.run(asyncio.wait_for(session.call("suicide", {}, call_id=cid), 90))
    finally:
        stop.set()
        healer.join(30)
    assert result.is_error and result.error.code == "worker_lost", result.prompt_text
    assert "2 time(s)" in result.error.detail
    # It ran, twice: the answer says its effects may be there.
    assert result.error.details["may_have_run"] is True
    record = store.get_record(cid)
    assert record["status"] == "failed" and record["lost"] == 2
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "worker_lost"]
    assert store.client.zscore(store.keys.leases, cid) is None
    # Nothing is left to run it a third time.
    live.heal()
    assert store.get_record(cid)["attempt"] == 2
