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
    data = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode()


def parse_last_event_id(raw: str | None) -> int:
    """The sequence number to resume after; ValueError for anything but a non-negative int."""
    if raw is None or raw.strip() == "":
        return 0
    value = int(raw.strip())
    if value < 0:
        raise ValueError("Last-Event-ID must not be negative")
    return value


async def _frames(
    events: AsyncIterator[LoggedEvent],
    keepalive_s: float,
    on_abandon: Callable[[], Awaitable[object]] | None,
) -> AsyncIterator[bytes]:
    """Events as SSE frames, with keepalives while the call is quiet.

    The next event is awaited as a task of its own, so a keepalive timeout never cancels the
    event source. When the client goes away before the result, ``on_abandon`` runs (cancel on
    disconnect)."""
    finished = False
    step: asyncio.Future[LoggedEvent] | None = None
    try:
        yield b": connected\n\n"
        while True:
            if step is None:
                step = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({step}, timeout=keepalive_s)
            if not done:
                yield b": keepalive\n\n"
                continue
            try:
                event = step.result()
            except StopAsyncIteration:
                finished = True
                return
            step = None
            yield encode(event)
            if event.kind == "result":
                finished = True
                return
    finally:
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await step
        if not finished and on_abandon is not None:
            # The client is gone; we may be inside a cancellation, so the cancel runs on its own.
            asyncio.get_running_loop().create_task(_quietly(on_abandon))


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
