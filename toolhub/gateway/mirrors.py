"""Calls of another replica (or the CLI), followed once per gateway process into a log of its
own, so that every SSE stream or JSON waiter of such a call here reads that log exactly as it
reads a call this gateway started, and the log is fed the same way (``CallLog.feed``, from
the store's items instead of the session's): one Redis subscription and one replay per call,
not one per stream, and each event written to every stream in one pass.

A mirror follows its call from the first event to the result. A finished mirror is kept like
a finished call's log (bounded, oldest first), so late followers replay from memory. One whose
source fails or ends without a result (Redis lost for longer than the follow window) is cut:
its streams end without a result, and the next follower opens a fresh mirror.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

from .calllog import CallLog, CallLogs, Item
from .window import DEFAULT_CALL_WINDOW_BYTES


class RemoteCalls(Protocol):
    """The shared store of a distributed deployment, as the gateway reads it. ``None`` means
    no call with this id belongs to ``session_id`` (whether or not another session has one)."""

    async def follow(self, call_id: str, session_id: str) -> AsyncIterator[Item] | None:
        """The call's items from the first, live until the result, as the store hands them
        over."""

    async def record(self, call_id: str, session_id: str) -> dict[str, Any] | None: ...

    async def cancel(self, call_id: str, session_id: str) -> bool | None: ...


class Mirrors:
    def __init__(
        self,
        remote: RemoteCalls,
        *,
        keep: int = 2000,
        ttl: float = 600.0,
        window: int = DEFAULT_CALL_WINDOW_BYTES,
    ) -> None:
        self.remote = remote
        #: Each mirror holds at most ``window`` bytes of its call, like a call's own log.
        self.logs = CallLogs(keep=keep, ttl=ttl, window=window)
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, call_id: str, session_id: str) -> CallLog | None:
        """The mirror of ``session_id``'s call ``call_id``, opened if needed; None when the
        session has no such call."""
        log = self.logs.get(call_id)
        if log is None:
            items = await self.remote.follow(call_id, session_id)
            if items is None:
                return None
            log = self.logs.get(call_id)  # another request may have opened it meanwhile
            if log is None:
                log = self.logs.open(call_id, session_id)
                task = asyncio.create_task(self._mirror(log, items), name=f"mirror:{call_id}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        return log if log.session_id == session_id else None

    async def _mirror(self, log: CallLog, items: AsyncIterator[Item]) -> None:
        """Feed the mirror; one cut without a result is forgotten, so the next follower opens
        a fresh one."""
        try:
            await log.feed(items)
        finally:
            if not log.done:
                self.logs.discard(log.call_id)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
