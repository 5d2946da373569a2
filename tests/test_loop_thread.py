"""The private loop thread: it runs coroutines for a caller that already runs a loop of its own
on the same thread (the sync twins), serves callers on other loops (MCP connections), and on
stop cancels what still runs on it, ends its thread and closes the loop."""

from __future__ import annotations

import asyncio
import threading

from toolhub.loop_thread import LoopThread


def test_runs_a_coroutine_for_a_thread_inside_its_own_running_loop() -> None:
    runner = LoopThread()

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    async def caller() -> str:
        # asyncio.run here would fail: this thread's loop is running.
        result: str = runner.run(where())
        return result

    try:
        assert asyncio.run(caller()) == runner.thread.name != threading.current_thread().name
    finally:
        runner.stop()
    assert not runner.thread.is_alive()


def test_a_caller_on_another_loop_awaits_a_submitted_coroutine() -> None:
    runner = LoopThread("toolhub-test")

    async def on_the_runner() -> str:
        return threading.current_thread().name

    async def caller() -> str:
        return await asyncio.wrap_future(runner.submit(on_the_runner()))

    try:
        assert asyncio.run(caller()) == "toolhub-test"
    finally:
        runner.stop()


def test_stop_cancels_what_still_runs_and_closes_the_loop() -> None:
    runner = LoopThread()
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    pending = runner.submit(forever())
    assert started.wait(30)
    runner.stop(timeout=30)
    assert cancelled.is_set() and pending.cancelled()
    assert not runner.thread.is_alive() and runner.loop.is_closed()
