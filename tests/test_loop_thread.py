"""The sync twins' private loop: it runs coroutines for a caller that already runs a loop of
its own on the same thread, and stops its thread when asked."""

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
