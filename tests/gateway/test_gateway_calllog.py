"""The in-process call logs: numbering, replay from any point, and bounded memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from toolhub.core import CallResult, Progress, ToolOutput
from toolhub.gateway.calllog import CallLogs, Item

DONE = CallResult(name="t", prompt_text="done", output=ToolOutput("t", {"done": True}))
#: What a client reads of ``DONE`` (docs/interfaces.md).
DONE_DATA = {**DONE.to_dict(), "is_error": False}


def progress(n: int) -> Progress:
    return Progress.custom("n", n)


def test_a_listener_hears_the_replay_then_live_events() -> None:
    log = CallLogs().open("c1", "s1")
    log.append(progress(1))
    seen: list[int] = []
    log.listen(lambda event: seen.append(event.seq) if event else None, 0)
    assert seen == [1]
    log.append(progress(2))
    log.append(DONE)
    assert seen == [1, 2, 3]

    def replay(after: int) -> list[int]:
        heard: list[int] = []
        log.listen(lambda event: heard.append(event.seq) if event else None, after)
        return heard

    assert replay(2) == [3]
    assert replay(3) == []


def test_result_waits_past_progress_and_stops_listening() -> None:
    async def body() -> None:
        log = CallLogs().open("c1", "s1")
        waiting = asyncio.ensure_future(log.result())
        await asyncio.sleep(0.01)
        log.append(progress(1))
        await asyncio.sleep(0.01)
        assert not waiting.done(), "progress is not the result"
        log.append(DONE)
        assert await asyncio.wait_for(waiting, 1) == DONE_DATA
        assert await log.result() == DONE_DATA, "a finished log answers at once"
        assert not log._listeners

    asyncio.run(body())


def test_result_of_a_cut_log_is_an_error_not_a_wait() -> None:
    async def body() -> None:
        log = CallLogs().open("c1", "s1")
        waiting = asyncio.ensure_future(log.result())
        await asyncio.sleep(0.01)
        log.cut()
        with pytest.raises(RuntimeError, match="without a result"):
            await asyncio.wait_for(waiting, 1)

    asyncio.run(body())


def test_finished_logs_are_evicted_oldest_first_running_ones_kept() -> None:
    logs = CallLogs(keep=3, ttl=3600)
    running = logs.open("running", "s")
    for index in range(10):
        logs.open(f"c{index}", "s").append(DONE)
    assert logs.get("running") is running, "a running call's log is never dropped"
    assert logs.get("c9") is not None and logs.get("c0") is None
    assert sum(logs.get(f"c{i}") is not None for i in range(10)) <= 3


def test_expired_logs_go_after_the_ttl() -> None:
    logs = CallLogs(keep=100, ttl=0.0)
    logs.open("old", "s").append(DONE)
    logs.open("new", "s")
    assert logs.get("old") is None and logs.get("new") is not None


def test_feed_logs_the_items_to_the_result_and_closes_its_source() -> None:
    closed: list[str] = []

    async def items(end: bool) -> AsyncIterator[Item]:
        try:
            yield progress(1)
            if end:
                yield DONE
                yield progress(2)  # never read: the result ends the log
        finally:
            closed.append("closed")

    async def body() -> None:
        done = CallLogs().open("c1", "s1")
        await done.feed(items(end=True))
        assert [e.kind for e in done.events] == ["progress", "result"] and done.done
        cut = CallLogs().open("c2", "s1")
        heard: list[int | None] = []
        cut.listen(lambda event: heard.append(event.seq if event else None))
        await cut.feed(items(end=False))
        assert heard == [1, None] and not cut.done, "a source without a result cuts the log"
        assert closed == ["closed", "closed"]

    asyncio.run(body())


def test_what_a_client_reads_names_the_call_by_its_own_id() -> None:
    log = CallLogs().open("acme~s1/c1", "acme~s1")
    event = log.append(CallResult(name="t", prompt_text="done", call_id="acme~s1/c1"))
    assert event.item.call_id == "acme~s1/c1", "the item stays as it arrived"
    assert event.data["call_id"] == "c1" and event.data["is_error"] is False
