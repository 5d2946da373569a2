"""Server-sent events for a call: ``progress`` events then one ``result`` event, each with the
item's sequence number as its id, so ``Last-Event-ID`` resumes exactly after the last event a
client saw. Comment lines keep idle connections open through proxies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.responses import StreamingResponse

from .calllog import LoggedEvent

MEDIA_TYPE = "text/event-stream"


def encode(event: LoggedEvent) -> bytes:
    """The event's SSE frame; encoded at its first follower and kept on the event, so a
    thousand followers of one call cost one ``json.dumps`` per event, not a thousand."""
    if not event._frame:
        data = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
        event._frame.append(f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode())
    return event._frame[0]


def parse_last_event_id(raw: str | None) -> int:
    """The sequence number to resume after; ValueError for anything but a non-negative int."""
    if raw is None or raw.strip() == "":
        return 0
    value = int(raw.strip())
    if value < 0:
        raise ValueError("Last-Event-ID must not be negative")
    return value


#: Frames ready at once are sent as one write, up to this many.
MAX_BATCH = 64
_DONE = object()


async def _frames(
    events: AsyncIterator[LoggedEvent],
    keepalive_s: float,
    on_abandon: Callable[[], Awaitable[object]] | None,
) -> AsyncIterator[bytes]:
    """Events as SSE frames, with keepalives while the call is quiet.

    One task per stream pumps the event source into a queue, so a keepalive timeout only
    ever cancels a queue read, never the source (and no task is made per event: with a
    thousand followers that was most of the gateway's time). Frames already waiting go out
    as one write. When the client goes away before the result, ``on_abandon`` runs (cancel
    on disconnect)."""
    queue: asyncio.Queue[object] = asyncio.Queue()
    pump = asyncio.ensure_future(_pump(events, queue))
    finished = False
    try:
        yield b": connected\n\n"
        while not finished:
            if queue.empty():
                try:
                    async with asyncio.timeout(keepalive_s):
                        first = await queue.get()
                except TimeoutError:
                    yield b": keepalive\n\n"
                    continue
            else:
                first = queue.get_nowait()
            chunk: list[bytes] = []
            item = first
            while True:
                if item is _DONE:
                    finished = True
                    break
                if isinstance(item, BaseException):
                    raise item
                assert isinstance(item, LoggedEvent)
                chunk.append(encode(item))
                if item.kind == "result":
                    finished = True
                    break
                if queue.empty() or len(chunk) >= MAX_BATCH:
                    break
                item = queue.get_nowait()
            if chunk:
                yield b"".join(chunk)
    finally:
        if not pump.done():
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
        if not finished and on_abandon is not None:
            # The client is gone; we may be inside a cancellation, so the cancel runs on its own.
            asyncio.get_running_loop().create_task(_quietly(on_abandon))


async def _pump(events: AsyncIterator[LoggedEvent], queue: asyncio.Queue[object]) -> None:
    """The source's events into ``queue``, then ``_DONE`` (or the error that ended it)."""
    try:
        async for event in events:
            queue.put_nowait(event)
            if event.kind == "result":
                break
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        queue.put_nowait(exc)
        return
    queue.put_nowait(_DONE)


async def _quietly(action: Callable[[], Awaitable[object]]) -> None:
    with contextlib.suppress(Exception):
        await action()


def stream_events(
    events: AsyncIterator[LoggedEvent],
    *,
    keepalive_s: float = 15.0,
    on_abandon: Callable[[], Awaitable[object]] | None = None,
    status_code: int = 200,
) -> StreamingResponse:
    return StreamingResponse(
        _frames(events, keepalive_s, on_abandon),
        status_code=status_code,
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
