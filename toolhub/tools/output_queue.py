"""Output from a thread, streamed by a tool as ``output_delta`` progress: a command's reader
thread (``bash``) or a sub-agent's thread (``task``) posts bytes to the event loop, and the
tool drains them in batches until the producer posts ``None`` (it has ended)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from toolhub.core import OutputDeltas, Progress

OutputQueue = asyncio.Queue[bytes | None]


def post(loop: asyncio.AbstractEventLoop, queue: OutputQueue, item: bytes | None) -> None:
    """Hand an item to the event loop from the producer's thread; a closed loop means the
    caller went away, and the producer is being stopped anyway."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(queue.put_nowait, item)


async def queued_deltas(queue: OutputQueue) -> AsyncIterator[Progress]:
    """The queued bytes as ``output_delta`` items (whole UTF-8 characters), everything that is
    waiting at once, until the end marker."""
    deltas = OutputDeltas()
    finished = False
    while not finished:
        batch = [await queue.get()]
        while not queue.empty():
            batch.append(queue.get_nowait())
        data = b"".join(chunk for chunk in batch if chunk is not None)
        finished = None in batch
        for item in deltas.feed(data) if data else ():
            yield item
    for item in deltas.flush():
        yield item
