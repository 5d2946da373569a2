"""A private event loop on a daemon thread, owning long-lived MCP connections.

An MCP client connection is bound to the loop that opened it, but a session is used from many
loops (``asyncio.run`` in the CLI, uvicorn's loop in the gateway, the sync twins' thread, a
worker's loop). So the connections live on their own loop, and callers on any loop reach them
through ``submit`` (a concurrent future, awaitable with ``asyncio.wrap_future``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self, name: str = "toolhub-mcp") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop once every task on it is done or cancelled."""
        if not self.loop.is_running():
            return

        async def finish() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(finish(), self.loop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
