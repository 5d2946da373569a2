"""Every call gets an answer, and says what happened: a message a dead worker took before its
claim is recovered, the default policy for side-effecting tools fails a lost call instead of
re-running it, every wait has a deadline, and a new dispatcher finds an old one's calls."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.distributed.helpers import assert_contiguous, wait_until, worker_pid
from tests.distributed.plugin_tools import CONFIG, DEFAULT_POLICY_CONFIG, make_builder
from toolhub import CallResult, ErrorKind, Progress, RedisUnavailable, Session
from toolhub.distributed.settings import queue_for


def test_a_message_taken_by_a_worker_that_died_before_its_claim_is_recovered(live, connect, store):
    """The take-before-claim loss: a worker's kombu has the message (here: delivered into the
    socket of a stopped worker), the worker is SIGKILLed before it claims, and the message is
    in no queue. The next worker's sweep re-enqueues it from the record."""
    session = connect()
    first, second = live.workers
    second.signal(signal.SIGKILL)
    second.wait(5)
    first.signal(signal.SIGSTOP)
    queue = queue_for("command").encode()
    try:
        for attempt in range(5):
            cid = f"taken-unclaimed-{attempt}"
            task = session._loop_thread().loop  # the session's own loop runs the call
            future = asyncio.run_coroutine_threadsafe(
                session.call("ticks", {"n": 2}, call_id=cid), task
            )
            wait_until(lambda cid=cid: store.get_record(cid) is not None, 5)
            time.sleep(0.2)
            if store.client.llen(queue) == 0:
                break  # the stopped worker's BRPOP took it: the case under test
            future.cancel()
        else:
            pytest.skip("the stopped worker never held a message (it was between reads)")
    finally:
        first.signal(signal.SIGKILL)
        first.wait(5)
    record = store.get_record(cid)
    assert record["status"] == "queued" and record["attempt"] == 0
    killed_at = time.monotonic()
    live.heal()
    healed = time.monotonic() - killed_at
    result = future.result(timeout=30)
    recovered = time.monotonic() - killed_at - healed
    assert not result.is_error, result.prompt_text
    record = store.get_record(cid)
    assert record["status"] == "succeeded" and record["attempt"] == 1
    assert record["requeued"] == 1 and record["lost"] == 0
    # Within a lease after a worker is back (half-lease claim deadline + a quarter-lease
    # sweep), not kombu's hours.
    lease = live_lease()
    assert recovered < lease, (recovered, lease)
    assert store.client.zscore(store.keys.pending, cid) is None


def live_lease() -> float:
    from tests.fixtures_stack import STACK_ENV

    return float(STACK_ENV["TOOLHUB_LEASE_SECONDS"])


def test_a_side_effecting_call_whose_worker_dies_fails_and_says_it_may_have_partly_run(
    live, connect, store, tmp_path: Path
):
    session = connect(DEFAULT_POLICY_CONFIG)
    marker = tmp_path / "runs.txt"
    cid = "lost-fail"

    async def go() -> list[Progress | CallResult]:
        seen: list[Progress | CallResult] = []
        async for item in session.stream(
            "ticks", {"n": 40, "delay_ms": 50, "marker": str(marker)}, call_id=cid
        ):
            seen.append(item)
            if len(seen) == 3:
                live.worker_by_pid(worker_pid(store.get_record(cid))).signal(signal.SIGKILL)
        return seen

    seen = asyncio.run(asyncio.wait_for(go(), 60))
    result = seen[-1]
    assert isinstance(result, CallResult) and result.is_error
    assert result.error.code == "worker_lost" and result.error.details["may_have_run"] is True
    assert "may have partly run" in result.prompt_text
    assert not [i for i in seen if isinstance(i, Progress) and i.subkind == "retry"]
    # It ran once and was not run again.
    time.sleep(live_lease())
    assert [line.split()[0] for line in marker.read_text().splitlines()] == ["start"]
    record = store.get_record(cid)
    assert record["status"] == "failed" and record["lost"] == 1 and record["attempt"] == 1
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost"]
    assert store.client.zscore(store.keys.leases, cid) is None


def test_timeout_cancels_the_call_and_says_what_the_record_showed(live, connect, store):
    session = connect()
    started = time.monotonic()
    result = session.call_sync("sleeper", {"seconds": 30}, call_id="timed", timeout=0.5)
    took = time.monotonic() - started
    assert result.is_error and result.error.kind == ErrorKind.TIMEOUT
    assert result.error.details["code"] == "call_timeout"
    assert "status running" in result.error.detail and "attempt 1 of 3" in result.error.detail
    assert took < 10.0  # the 0.5 s deadline and the 2 s cancel grace, not the 30 s sleep
    record = wait_until(
        lambda: (store.get_record("timed") or {}).get("finished_at") and store.get_record("timed"),
        5,
    )
    assert record["status"] == "cancelled"


def test_a_distributed_call_always_has_a_deadline(live, connect):
    session = connect()
    seconds = session.executor.deadline_seconds("command")
    assert seconds is not None and 0 < seconds < 24 * 3600


def test_a_new_dispatcher_collects_a_call_by_id(live, connect, store, tmp_path: Path):
    """The first dispatcher walks away mid-call (as if it crashed); another one finds the call
    by id: its record, and every event from the first on, then the result."""
    first = connect()
    cid = "collected"

    async def start_and_abandon() -> int:
        seen = 0
        # A crashed dispatcher cancels nothing; one that leaves its stream would (by default).
        items = first.stream("ticks", {"n": 30, "delay_ms": 20}, call_id=cid, cancel_on_exit=False)
        async for _item in items:
            seen += 1
            if seen == 3:
                break
        return seen

    assert asyncio.run(start_and_abandon()) == 3
    second = Session.connect(
        live.url, CONFIG, tmp_path / "ws", session_id=first.session_id, builder=make_builder()
    )
    stranger = Session.connect(
        live.url, None, tmp_path / "other", session_id="another", builder=make_builder()
    )
    try:
        assert stranger.record_sync(cid) is None, "another session does not see the call"
        record = second.record_sync(cid)
        assert record is not None and record["status"] in {"running", "succeeded"}
        items = list(second.follow_sync(cid))
        assert isinstance(items[-1], CallResult) and not items[-1].is_error
        ticks = [i for i in items if isinstance(i, Progress) and i.subkind == "tick"]
        assert [t.payload["i"] for t in ticks] == list(range(30))
        assert asyncio.run(second.record(cid))["status"] == "succeeded"
        events = asyncio.run(_events(store, cid))
        assert_contiguous(events)
        unknown = list(second.follow_sync("never-made"))
        assert len(unknown) == 1 and unknown[0].error.kind == ErrorKind.NOT_FOUND
        assert second.record_sync("never-made") is None
    finally:
        stranger.close()
        second.close()


async def _events(store, cid):
    return [event async for event in store.follow(cid)]


def test_connect_while_redis_is_down_raises_a_typed_error(tmp_path: Path):
    from tests.fixtures_stack import free_port

    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailable) as caught:
        Session.connect(url, None, tmp_path, builder=make_builder())
    assert caught.value.code == "redis_unavailable"
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)
