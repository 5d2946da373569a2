"""The in-process call logs: numbering, replay from any point, and bounded memory."""

from __future__ import annotations

import asyncio

import pytest

from toolhub.gateway.calllog import CallLogs


def test_a_listener_hears_the_replay_then_live_events() -> None:
    log = CallLogs().open("c1", "s1")
    log.append("progress", {"n": 1})
    seen: list[int] = []
    log.listen(lambda event: seen.append(event.seq) if event else None, 0)
    assert seen == [1]
    log.append("progress", {"n": 2})
    log.append("result", {"done": True})
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
        log.append("progress", {"n": 1})
        await asyncio.sleep(0.01)
        assert not waiting.done(), "progress is not the result"
        log.append("result", {"done": True})
        assert await asyncio.wait_for(waiting, 1) == {"done": True}
        assert await log.result() == {"done": True}, "a finished log answers at once"
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
        logs.open(f"c{index}", "s").append("result", {})
    assert logs.get("running") is running, "a running call's log is never dropped"
    assert logs.get("c9") is not None and logs.get("c0") is None
    assert sum(logs.get(f"c{i}") is not None for i in range(10)) <= 3


def test_expired_logs_go_after_the_ttl() -> None:
    logs = CallLogs(keep=100, ttl=0.0)
    logs.open("old", "s").append("result", {})
    logs.open("new", "s")
    assert logs.get("old") is None and logs.get("new") is not None
