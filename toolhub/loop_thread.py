"""A private event loop on a daemon thread: what ``Session``'s sync twins (``call_sync``,
``stream_sync``, …) run their coroutines on, so they work whether or not the calling thread
already runs a loop of its own."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the loop and wait for its result here."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
