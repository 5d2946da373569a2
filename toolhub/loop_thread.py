"""A private event loop on a daemon thread, for work that must not depend on the caller's loop.

Two uses share it:

* ``Session``'s sync twins (``call_sync``, ``stream_sync``, …) run their coroutines on one
  (``run``), so they work whether or not the calling thread already runs a loop of its own.
* Long-lived MCP client connections live on one (``toolhub/sources/mcp_client.py``): a
  connection is bound to the loop that opened it, but a session is used from many loops
  (``asyncio.run`` in the CLI, uvicorn's loop in the gateway, the sync twins' thread, a
  worker's loop); callers on any loop reach it through ``submit`` (a concurrent future,
  awaitable with ``asyncio.wrap_future``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "toolhub-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop; its result arrives on the returned future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` (a coroutine, or an async generator's next step) on the loop and
        wait for its result here."""
        return self.submit(_awaited(awaitable)).result()

    def stop(self, timeout: float = 10.0, grace: float = 0.0) -> None:
        """Stop the loop once every task on it is done or cancelled, and close it when its
        thread has ended within ``timeout``. Tasks get ``grace`` seconds to end by themselves
        first (a cancelled call saying how it ended) before they are cancelled."""
        if not self.loop.is_running():
            return
        if threading.current_thread() is self.thread:
            self.loop.stop()  # asked from a task on the loop: nothing here can wait for it
            return

        async def finish() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            if tasks and grace > 0:
                await asyncio.wait(tasks, timeout=grace)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(finish(), self.loop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable
