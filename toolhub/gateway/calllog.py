"""The in-process event log of a call: every item it streamed, numbered from 1, kept after the
call ends so a client can replay it and resume with ``Last-Event-ID``. It is the one event
source of the gateway: every SSE stream and every JSON waiter of a call reads its log, whether
the call runs here (``calls.py``) or on another replica (``mirrors.py``), and both fill it the
same way (``CallLog.feed``).

This is what the Redis stream ``call:{cid}:events`` is for a distributed call; an embedded
gateway keeps the same shape in memory so resumption works without Redis too. The log keeps
each item as it arrived (a ``Progress``, or the ``CallResult`` that ends the call); what a
client reads of it (``LoggedEvent.data``: docs/interfaces.md) is made once, by its first
reader. Readers register a listener that ``append`` calls in place (``listen``: the SSE
streams, so one appended event reaches every stream without waking a task per stream), or
await the result (``result``: a JSON call).

Each log holds a bounded window of its call (``window.py``): past ``window`` bytes of progress
the oldest events are replaced by one marker event numbered as the last one it replaces
(``trimmed_marker``), and a result larger than the window is cut with a note. Listeners hear
every event as it is appended, before any trimming; a client resuming from before the window
reads the marker first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from toolhub.core import CallResult, Progress, closing
from toolhub.core.trimmed import TRIMMED, trimmed_marker

from .call_ids import client_call_id, shown
from .window import DEFAULT_CALL_WINDOW_BYTES, cut_result, size_of

logger = logging.getLogger("toolhub.gateway.calllog")

EventKind = Literal["progress", "result"]
#: An item of a call's stream, as the session or the store hands it over.
Item = Progress | CallResult
#: Hears each event, or None when the log's source ended without a result (``CallLog.cut``).
Listener = Callable[["LoggedEvent | None"], None]


def wire_data(item: Item) -> dict[str, Any]:
    """What a client reads of an item (docs/interfaces.md): ``Progress.to_dict()``, or
    ``CallResult.to_dict()`` plus ``is_error``."""
    if isinstance(item, CallResult):
        return {**item.to_dict(), "is_error": item.is_error}
    return item.to_dict()


class LoggedEvent:
    """One event of a call's log: its number and its item as it arrived. ``data``, the item as
    the client reads it (naming the call by ``names``' client id, when the stored id differs),
    is made at its first reader and kept."""

    __slots__ = ("_data", "_frame", "item", "names", "seq", "size")

    def __init__(
        self, seq: int, item: Item, names: tuple[str, str] | None = None, size: int = 0
    ) -> None:
        self.seq = seq
        self.item = item
        #: About the bytes the item holds (``window.size_of``).
        self.size = size
        #: (stored call id, client call id), when they differ (``call_ids.shown``)
        self.names = names
        self._data: dict[str, Any] | None = None
        #: the SSE frame as an ASGI message, and whether it ends the call: made once however
        #: many clients follow the call (``sse.encode``)
        self._frame: tuple[dict[str, Any], bool] | None = None

    @property
    def kind(self) -> EventKind:
        return "result" if isinstance(self.item, CallResult) else "progress"

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            data = wire_data(self.item)
            self._data = data if self.names is None else shown(data, *self.names)
        return self._data


@dataclass
class CallLog:
    """The events of the stored call ``call_id``, logged as its client reads them: naming the
    call by ``client_id`` (``call_ids.py``), the id the client chose or was given. ``events``
    are numbered on from the first one held (a marker, once older ones were trimmed);
    ``held`` is about the bytes they hold, at most ``window`` (plus the newest event)."""

    call_id: str
    session_id: str
    window: int = DEFAULT_CALL_WINDOW_BYTES
    events: list[LoggedEvent] = field(default_factory=list)
    finished_at: float | None = None
    held: int = 0
    trimmed: int = 0
    _listeners: dict[int, Listener] = field(default_factory=dict)
    _seq: int = 0
    client_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.client_id = client_call_id(self.session_id, self.call_id)

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    async def feed(self, items: AsyncIterator[Item]) -> None:
        """Log ``items`` up to the result: the one way a log is filled, whether they come from
        the session running the call here or from the store (a call of another replica). When
        they end or fail without a result the log is ``cut``; ``items`` is closed either way."""
        try:
            async with closing(items) as source:
                async for item in source:
                    self.append(item)
                    if self.done:
                        return
        except Exception as exc:
            logger.warning("call %s: lost its event source: %s", self.call_id, exc)
        finally:
            if not self.done:
                self.cut()

    def append(self, item: Item) -> LoggedEvent:
        if self.done:
            raise RuntimeError(f"call {self.call_id} already has its result")
        names = None if self.client_id == self.call_id else (self.call_id, self.client_id)
        last = isinstance(item, CallResult)
        if isinstance(item, CallResult):
            item = cut_result(item, self.window)
        self._seq += 1
        event = LoggedEvent(self._seq, item, names, size_of(item))
        self.events.append(event)
        self.held += event.size
        if last:
            self.finished_at = time.monotonic()
        for listener in tuple(self._listeners.values()):
            listener(event)
        if last:
            self._listeners.clear()
        if self.held > self.window:
            self._trim()
        return event

    def _trim(self) -> None:
        """Replace the oldest progress by one marker until at most half the window is held
        (half: trimming is a list copy, so it runs once per half-window appended, not per
        event); the newest event always stays."""
        names = None if self.client_id == self.call_id else (self.call_id, self.client_id)
        drop = 0
        held = self.held
        while drop < len(self.events) - 1 and held > self.window // 2:
            event = self.events[drop]
            held -= event.size
            if not _is_marker(event):
                self.trimmed += event.size
            drop += 1
        if drop == 0:
            return
        last_dropped = self.events[drop - 1].seq
        marker = LoggedEvent(last_dropped, trimmed_marker(self.trimmed, by="gateway"), names)
        marker.size = size_of(marker.item)
        self.events = [marker, *self.events[drop:]]
        self.held = held + marker.size

    def _index_after(self, after: int) -> int:
        """The position in ``events`` of the first event numbered above ``after``."""
        if not self.events:
            return 0
        return min(max(0, after - self.events[0].seq + 1), len(self.events))

    def listen(self, listener: Listener, after: int = 0) -> Callable[[], None]:
        """Call ``listener`` with every event after ``after``: those logged so far at once,
        then each as it is appended, up to the result. Returns the function that stops it.
        Replay and registration are one step (nothing awaited between), so no event is
        missed or repeated."""
        for event in self.events[self._index_after(after) :]:
            listener(event)
        if self.done:
            return _nothing
        key = id(listener)
        self._listeners[key] = listener

        def stop() -> None:
            self._listeners.pop(key, None)

        return stop

    def cut(self) -> None:
        """The source of this log ended without a result (``feed``: a mirror lost its call's
        stream): every listener hears ``None`` and is gone; the log is not ``done``."""
        listeners = tuple(self._listeners.values())
        self._listeners.clear()
        for listener in listeners:
            listener(None)

    async def result(self) -> dict[str, Any]:
        """The data of the call's result event, once it is logged: one future the log's
        ``append`` resolves in place. Raises ``RuntimeError`` when the log is cut without
        one."""
        if self.done:
            return self.events[-1].data
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def hear(event: LoggedEvent | None) -> None:
            if answer.done():
                return
            if event is None:
                answer.set_exception(RuntimeError("call log ended without a result"))
            elif event.kind == "result":
                answer.set_result(event.data)

        stop = self.listen(hear, self._seq)
        try:
            return await answer
        finally:
            stop()


def _nothing() -> None:
    return None


def _is_marker(event: LoggedEvent) -> bool:
    """The gateway's own marker (a marker from Redis is output here, counted and trimmed)."""
    item = event.item
    return (
        isinstance(item, Progress)
        and item.subkind == TRIMMED
        and isinstance(item.payload, dict)
        and item.payload.get("by") == "gateway"
    )


class CallLogs:
    """Logs of the calls this gateway started, bounded: finished logs are dropped oldest first
    beyond ``keep`` or after ``ttl`` seconds; running ones are never dropped."""

    def __init__(
        self, keep: int = 2000, ttl: float = 3600.0, window: int = DEFAULT_CALL_WINDOW_BYTES
    ) -> None:
        self.keep = keep
        self.ttl = ttl
        self.window = window
        self._logs: OrderedDict[str, CallLog] = OrderedDict()

    def open(self, call_id: str, session_id: str) -> CallLog:
        self._evict()
        log = CallLog(call_id, session_id, self.window)
        self._logs[call_id] = log
        return log

    def get(self, call_id: str) -> CallLog | None:
        return self._logs.get(call_id)

    def discard(self, call_id: str) -> None:
        self._logs.pop(call_id, None)

    def running(self, call_id: str) -> bool:
        log = self._logs.get(call_id)
        return log is not None and not log.done

    def _evict(self) -> None:
        """Oldest first, a few logs per call (constant work): finished ones go once over the
        limit or past the TTL; a running one at the front is moved back rather than dropped."""
        now = time.monotonic()
        for _ in range(8):
            if not self._logs:
                return
            call_id, log = next(iter(self._logs.items()))
            over = len(self._logs) >= self.keep
            if log.finished_at is None:
                if not over:
                    return
                self._logs.move_to_end(call_id)
            elif over or now - log.finished_at > self.ttl:
                del self._logs[call_id]
            else:
                return
