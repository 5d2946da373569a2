"""Server-sent events for a call: ``progress`` events then one ``result`` event, each with the
item's sequence number as its id, so ``Last-Event-ID`` resumes exactly after the last event a
client saw. Comment lines keep idle connections open through proxies.

Every stream reads the call's in-memory log (``calllog.py``; a call of another replica is
mirrored into one, ``calls.py``). A new event is written to every stream of the call from the
step that appends it: the event's ASGI body message is made once and handed to each
follower's connection in one pass (``Follower.write``), with no task woken per follower: with
a thousand followers of one call, a task per follower and event would be most of the gateway's
time, and the last follower would hear of each event long after the first.

What each follower costs per event is one ASGI ``send`` of a shared message, and that send is
the server's own (``SERVER_SEND``, which the gateway's app leaves in the scope): the frames in
the middle of a response skip the middleware between the server and the route, each of which
would add a coroutine per follower and event without doing anything with a body frame. The
start of the response and its end still go through every middleware, so whatever observes a
response (its status, when it ended: request metrics, telemetry) sees it whole. So every
middleware in front of event streams must be pure ASGI and leave bodies alone: not Starlette's
``BaseHTTPMiddleware`` (it re-sends the start from a task of its own, so a frame could reach
the server first), not compression. The gateway's are; a test fails if one is added.

A follower whose connection is slow (its transport stopped taking bytes) gets its frames
queued and written by a task of its own once the connection drains, so it never holds up the
others; past its call's window (``CallLog.window``, between ``MIN_BACKLOG_BYTES`` and
``MAX_BACKLOG_BYTES``) queued it is dropped, and resumes with ``Last-Event-ID``: what the
gateway holds per follower is bounded like what it holds per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from types import CoroutineType
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .calllog import CallLog, LoggedEvent

logger = logging.getLogger("toolhub.gateway.sse")

MEDIA_TYPE = "text/event-stream"
#: The scope key under which the gateway's app leaves the ASGI server's ``send``.
SERVER_SEND = "toolhub.server_send"


def _body(frame: bytes) -> dict[str, Any]:
    """The ASGI message of a frame in the middle of a response."""
    return {"type": "http.response.body", "body": frame, "more_body": True}


CONNECTED = _body(b": connected\n\n")
KEEPALIVE = _body(b": keepalive\n\n")
#: What a slow follower may have waiting before it is dropped (it resumes by Last-Event-ID):
#: its call's window, within these bounds.
MIN_BACKLOG_BYTES = 64 << 10
MAX_BACKLOG_BYTES = 4 << 20


def encode(event: LoggedEvent) -> tuple[Message, bool]:
    """The ASGI message of the event's SSE frame, and whether it is the result (the last);
    made at its first follower and kept on the event, so a thousand followers of one call
    cost one ``json.dumps`` and one message per event, not a thousand. Servers only read a
    message they are sent, so every follower is sent the same one."""
    if event._frame is None:
        data = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
        frame = f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode()
        event._frame = (_body(frame), event.kind == "result")
    return event._frame


def parse_last_event_id(raw: str | None) -> int:
    """The sequence number to resume after; ValueError for anything but a non-negative int."""
    if raw is None or raw.strip() == "":
        return 0
    value = int(raw.strip())
    if value < 0:
        raise ValueError("Last-Event-ID must not be negative")
    return value


class Follower:
    """One SSE stream's writer. ``write`` runs the ASGI ``send`` of a frame right away; when
    the send would wait (the connection is not draining), the rest of that send and every
    frame after it are finished by a task of the follower's own, in order."""

    __slots__ = (
        "_backlog",
        "_ending",
        "_queued",
        "_resumer",
        "_send",
        "ended",
        "max_backlog",
        "wrote",
    )

    def __init__(self, send: Send, window: int | None = None) -> None:
        self._send = send
        self.max_backlog = (
            MAX_BACKLOG_BYTES
            if window is None
            else min(MAX_BACKLOG_BYTES, max(window, MIN_BACKLOG_BYTES))
        )
        #: Frames waiting for a slow connection (None: the connection takes them at once).
        self._backlog: list[bytes] | None = None
        self._queued = 0
        self._ending = False
        self._resumer: asyncio.Task[None] | None = None
        #: Resolves True once the result frame is out, False when the follower was dropped.
        self.ended: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        #: Whether anything was written since the stream last checked (keepalives).
        self.wrote = False

    def on_event(self, event: LoggedEvent | None) -> None:
        """The log's listener: each event, in order, the result last; None when the log was
        cut (the client reconnects and resumes by ``Last-Event-ID``)."""
        if event is None:
            self.drop("the call's event source was lost")
        else:
            message, last = encode(event)
            self.write(message, last=last)

    def write(self, message: Message, *, last: bool = False) -> None:
        """Send ``message`` (a body frame with more to come) now, or queue its frame behind
        the ones waiting for a slow connection."""
        if self.ended.done():
            return
        self.wrote = True
        if last:
            self._ending = True
        if self._backlog is not None:
            frame = message["body"]
            self._backlog.append(frame)
            self._queued += len(frame)
            if self._queued > self.max_backlog:
                self.drop("its connection is too slow")
            return
        sent = self._send(message)
        sending = sent if isinstance(sent, CoroutineType) else _await(sent)
        try:
            waiting = sending.send(None)  # run the send up to its first wait, if any
        except StopIteration:
            if self._ending:
                self._end()
            return
        except Exception as exc:
            self.drop(f"send failed: {exc}")
            return
        self._backlog = []
        self._resumer = asyncio.ensure_future(self._resume(sending, waiting))

    async def _resume(self, sending: Coroutine[Any, Any, Any], waiting: Any) -> None:
        """Finish the send that waited, then write what queued meanwhile, one chunk per
        drain, until the connection keeps up again."""
        try:
            await _finish(sending, waiting)
            while self._backlog:
                chunk = b"".join(self._backlog)
                self._backlog, self._queued = [], 0
                await self._send(_body(chunk))
        except Exception as exc:
            self.drop(f"send failed: {exc}")
            return
        self._backlog = None
        if self._ending:
            self._end()

    def _end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(True)

    def drop(self, why: str) -> None:
        if not self.ended.done():
            logger.info("SSE follower dropped: %s", why)
            self.ended.set_result(False)
        if self._resumer is not None and self._resumer is not asyncio.current_task():
            self._resumer.cancel()


async def _await(awaitable: Awaitable[None]) -> None:
    """What an ASGI ``send`` returned, as a coroutine (it is one, unless a wrapper says
    otherwise)."""
    await awaitable


async def _finish(sending: Coroutine[Any, Any, Any], waiting: Any) -> None:
    """Drive a coroutine started by hand, now waiting on ``waiting`` (a future, or None for
    a bare yield), to its end, as a task would."""
    try:
        while True:
            if waiting is None:
                await asyncio.sleep(0)
            else:
                await waiting
            try:
                waiting = sending.send(None)
            except StopIteration:
                return
    except BaseException:
        sending.close()
        raise


class EventStream(Response):
    """The response of one SSE stream of ``log``, after event ``after``: the events so far,
    then each new one as it is appended, then the end of the response after the result.
    ``on_abandon`` runs when the client leaves before the result (cancel on disconnect)."""

    media_type = MEDIA_TYPE

    def __init__(
        self,
        log: CallLog,
        after: int = 0,
        *,
        keepalive_s: float = 15.0,
        on_abandon: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.log, self.after = log, after
        self.keepalive_s = keepalive_s
        self.on_abandon = on_abandon
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        follower = Follower(scope.get(SERVER_SEND, send), self.log.window)
        follower.write(CONNECTED)
        stop = self.log.listen(follower.on_event, self.after)
        left = asyncio.ensure_future(_disconnected(receive))
        try:
            while not follower.ended.done():
                follower.wrote = False
                waits: list[asyncio.Future[Any]] = [follower.ended, left]
                done, _ = await asyncio.wait(
                    waits,
                    timeout=self.keepalive_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if left in done:
                    follower.drop("the client left")
                elif not done and not follower.wrote:
                    follower.write(KEEPALIVE)
        finally:
            stop()
            left.cancel()
            if not follower.ended.done():
                follower.drop("the stream ended")
        if follower.ended.result():
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif self.on_abandon is not None and not self.log.done:
            # The client is gone before the result: cancel, on a task of its own.
            asyncio.get_running_loop().create_task(_quietly(self.on_abandon))


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _quietly(action: Callable[[], Awaitable[object]]) -> None:
    with contextlib.suppress(Exception):
        await action()
