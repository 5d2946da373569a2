"""toolhub progress items as MCP ``notifications/progress``.

MCP progress must increase monotonically and both sides should rate-limit. The relay numbers
items 1, 2, 3 … (so the value only grows), and when items arrive faster than ``interval`` it
merges their messages into the next notification instead of dropping them: a client that
concatenates messages of output deltas still gets every byte, just in fewer frames.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from toolhub.core import Progress

MAX_MESSAGE_CHARS = 16 * 1024

Send = Callable[[float, str | None], Awaitable[None]]


def progress_message(item: Progress) -> str | None:
    """What a person would read for the item: its text, an output delta, or a short label."""
    if item.kind == "text":
        return item.text
    payload = item.payload if isinstance(item.payload, dict) else {}
    if item.kind == "custom" and isinstance(payload.get("delta"), str):
        return str(payload["delta"])
    if item.kind == "custom":
        return item.subkind
    return f"{len(item.blocks)} content block(s)"


class ProgressRelay:
    def __init__(self, send: Send, interval: float = 0.05) -> None:
        self.send = send
        self.interval = interval
        self.count = 0
        self._pending: list[str] = []
        self._dirty = False
        self._last = 0.0

    async def push(self, item: Progress) -> None:
        self.count += 1
        message = progress_message(item)
        if message:
            self._pending.append(message)
        self._dirty = True
        if time.monotonic() - self._last >= self.interval:
            await self.flush()

    async def flush(self) -> None:
        if not self._dirty:
            return
        message = "".join(self._pending)[-MAX_MESSAGE_CHARS:] or None
        self._pending.clear()
        self._dirty = False
        self._last = time.monotonic()
        await self.send(float(self.count), message)
