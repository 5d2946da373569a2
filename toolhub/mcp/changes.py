"""``notifications/tools/list_changed`` for every connected MCP client, whenever the session's
tool list really changes.

The tool list changes when external tools come and go (an MCP server connects, reconnects or
changes its own list, a client registers an HTTP tool, a hub attaches): the tool set calls its
``external_listeners`` for each tool, from whichever thread made the change. The fan-out hops to
the MCP server's event loop, waits a moment so that a burst (a server's whole list re-registered)
becomes one notification, and then tells each client whose last known list differs from the
current one (a reconnect that re-registers identical tools notifies nobody).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from toolhub.toolset import ExternalSpec, ToolSet

logger = logging.getLogger("toolhub.mcp.changes")

SETTLE_S = 0.05

Send = Callable[[], Awaitable[None]]


class _Subscriber:
    __slots__ = ("listed", "send")

    def __init__(self, send: Send, listed: str) -> None:
        self.send = send
        self.listed = listed


class ToolListChanges:
    """Subscribers are senders — a connection that finished its handshake, or the bus of the
    2026-07-28 listen streams; ``listing`` renders the tool list as clients see it."""

    def __init__(
        self, toolset: ToolSet, listing: Callable[[], Any], settle: float = SETTLE_S
    ) -> None:
        self.toolset = toolset
        self.listing = listing
        self.settle = settle
        self._subscribers: dict[object, _Subscriber] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = False
        self._tasks: set[asyncio.Task[None]] = set()
        toolset.external_listeners.append(self._changed)

    def subscribe(self, send: Send) -> Callable[[], None]:
        """Add a client (on the server's loop); returns the idempotent unsubscribe."""
        self._loop = asyncio.get_running_loop()
        token = object()
        self._subscribers[token] = _Subscriber(send, self._fingerprint())

        def unsubscribe() -> None:
            self._subscribers.pop(token, None)

        return unsubscribe

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.toolset.external_listeners.remove(self._changed)

    def _changed(self, spec: ExternalSpec, added: bool) -> None:
        """The tool set's listener: any thread, so it only schedules the flush."""
        loop = self._loop
        if loop is None or not self._subscribers:
            return
        with contextlib.suppress(RuntimeError):  # the loop has just closed
            loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        if self._pending:
            return
        self._pending = True
        task = asyncio.ensure_future(self._notify())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self) -> None:
        await asyncio.sleep(self.settle)
        self._pending = False
        current = self._fingerprint()
        for subscriber in list(self._subscribers.values()):
            if subscriber.listed == current:
                continue
            subscriber.listed = current
            try:
                await subscriber.send()
            except Exception:
                logger.warning("tools/list_changed not delivered", exc_info=True)

    def _fingerprint(self) -> str:
        listing = json.dumps(self.listing(), sort_keys=True, default=str)
        return hashlib.sha256(listing.encode()).hexdigest()
