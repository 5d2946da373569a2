"""A call whose consumer goes away is cancelled, on every executor: the command dies, the
record says ``cancelled``, and ``Session.close`` stops whatever still runs.

A framework cancels a tool by cancelling the task that awaits it (openai-agents'
``timeout_seconds``, a cancelled pydantic-ai or LangGraph run) or by no longer reading a
stream; neither may leave the command running with its record ``running`` forever.

Each command appends a tick to a file in the workspace every 0.1 s: once the call is cancelled
the ticks stop, which the test reads from outside the sandbox.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from toolhub import Progress

CONFIG = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}
TICKER = "for i in $(seq 1 600); do echo $i; echo $i >> ticks.txt; sleep 0.1; done"


def ticks(workspace: Path) -> int:
    path = workspace / "ticks.txt"
    return len(path.read_text().split()) if path.exists() else 0


def wait_for_ticks(workspace: Path, at_least: int = 2, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while ticks(workspace) < at_least:
        assert time.monotonic() < deadline, "the command never started ticking"
        time.sleep(0.05)


def assert_stopped(workspace: Path) -> None:
    """The ticks stop within a few seconds and stay stopped."""
    deadline = time.monotonic() + 15
    while True:
        before = ticks(workspace)
        time.sleep(1.0)
        if ticks(workspace) == before:
            break
        assert time.monotonic() < deadline, "the command kept running after its cancel"
    time.sleep(1.0)
    assert ticks(workspace) == before, "the command kept running after its cancel"


def wait_for_status(session, call_id: str, status: str, timeout: float = 15) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        record = session.record_sync(call_id) or {}
        if record.get("status") == status:
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.05)


def test_a_consumer_that_stops_reading_cancels_the_call(session_factory, tmp_path: Path):
    workspace = tmp_path / "ws"
    session = session_factory(CONFIG)

    async def go() -> None:
        stream = session.stream(
            "bash", {"command": TICKER, "description": "t"}, call_id="left-early"
        )
        async for item in stream:
            if isinstance(item, Progress) and ticks(workspace) >= 2:
                break
        await stream.aclose()

    asyncio.run(go())
    assert_stopped(workspace)
    record = wait_for_status(session, "left-early", "cancelled")
    assert record["result"]["error"]["kind"] == "cancelled"


def test_a_cancelled_consumer_task_cancels_the_call(session_factory, tmp_path: Path):
    workspace = tmp_path / "ws"
    session = session_factory(CONFIG)

    async def go() -> None:
        task = asyncio.create_task(
            session.call("bash", {"command": TICKER, "description": "t"}, call_id="timed-out")
        )
        await asyncio.to_thread(wait_for_ticks, workspace)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert_stopped(workspace)
    wait_for_status(session, "timed-out", "cancelled")
    # Nothing runs any more: a late cancel has nothing to stop.
    assert not asyncio.run(session.cancel("timed-out"))


def test_closing_the_session_stops_what_still_runs(session_factory, tmp_path: Path):
    workspace = tmp_path / "ws"
    session = session_factory(CONFIG)
    done = threading.Event()

    def call() -> None:
        session.call_sync("bash", {"command": TICKER, "description": "t"}, call_id="at-close")
        done.set()

    threading.Thread(target=call, daemon=True).start()
    wait_for_ticks(workspace)
    session.close()
    assert_stopped(workspace)
    assert done.wait(15), "the call never answered after its session closed"
