"""Calls of another replica (or the CLI), followed once per gateway process into a log of its
own, so that every SSE stream of such a call here reads that log (``sse.py``) exactly as it
reads a call this gateway started: one Redis subscription and one replay per call, not one
per stream, and each event written to every stream in one pass.

A mirror follows its call from the first event to the result. A finished mirror is kept like
a finished call's log (bounded, oldest first), so late followers replay from memory. One whose
source fails or ends without a result (Redis lost for longer than the follow window) is cut:
its streams end without a result, and the next follower opens a fresh mirror.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

from .calllog import CallLog, CallLogs, LoggedEvent

logger = logging.getLogger("toolhub.gateway.mirrors")


class RemoteCalls(Protocol):
    """The shared store of a distributed deployment, as the gateway reads it. ``None`` means
    no call with this id belongs to ``session_id`` (whether or not another session has one)."""

    async def follow(self, call_id: str, session_id: str) -> AsyncIterator[LoggedEvent] | None:
        """The call's events from the first, live until the result."""

    async def record(self, call_id: str, session_id: str) -> dict[str, Any] | None: ...

    async def cancel(self, call_id: str, session_id: str) -> bool | None: ...


class Mirrors:
    def __init__(self, remote: RemoteCalls, *, keep: int = 2000, ttl: float = 600.0) -> None:
        self.remote = remote
        self.logs = CallLogs(keep=keep, ttl=ttl)
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, call_id: str, session_id: str) -> CallLog | None:
        """The mirror of ``session_id``'s call ``call_id``, opened if needed; None when the
        session has no such call."""
        log = self.logs.get(call_id)
        if log is None:
            events = await self.remote.follow(call_id, session_id)
            if events is None:
                return None
            log = self.logs.get(call_id)  # another request may have opened it meanwhile
            if log is None:
                log = self.logs.open(call_id, session_id)
                task = asyncio.create_task(self._copy(events, log), name=f"mirror:{call_id}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        return log if log.session_id == session_id else None

    async def _copy(self, events: AsyncIterator[LoggedEvent], log: CallLog) -> None:
        try:
            async for event in events:
                log.append(event.kind, event.data)
                if event.kind == "result":
                    return
        except Exception as exc:
            logger.warning("call %s: lost its event stream: %s", log.call_id, exc)
        finally:
            if not log.done:
                self.logs.discard(log.call_id)
                log.cut()

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
