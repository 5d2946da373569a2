"""The SSE frames of one event-loop turn, written to their sockets on more than one core.

An event of a call with a thousand followers is a thousand socket writes (``sse.py``). Under
``bench/bench_sse_followers.py`` most of the gateway's time is the kernel's part of those writes
(TCP, and the loopback delivery to each reader), not Python; written one at a time they keep one
core busy while the others mostly wait. Here the direct frame writes of a turn are queued, and
the first of the turn schedules one flush for the end of it: a large batch is split between the
loop's thread and helper threads, each writing with ``os.write`` (which lets go of the GIL for
the system call); a small one is written by the loop's thread alone.

Three rules keep this as safe as writing through the transport:

* **Order.** A connection is written this way only while its transport has nothing buffered,
  at most once per batch (a second frame in the same turn joins the first), and whatever a
  write did not take goes to the transport, before anything else can run on the loop.
* **No write to a closed or reused descriptor.** The loop's thread waits for the helpers
  within the flush, so no transport is closed (nor its descriptor reused) while a helper
  writes; a transport that is closing gets the frame through ``write``, which drops it.
* **Errors the transport way.** A write that fails for any reason but a full socket buffer
  hands its frame to ``transport.write``, which meets the same error and closes the
  connection as it always would.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from concurrent.futures import Future, ThreadPoolExecutor

#: A batch at least this large is shared with the helpers; below it, handing a share to a
#: helper costs more than it saves.
PARALLEL_FROM = 128
#: Helper threads: one fewer than the cores, at most three (none on one core).
HELPERS = min(3, (os.cpu_count() or 1) - 1)

_Batch = dict[asyncio.WriteTransport, bytearray]
#: A transport, its socket's descriptor, the bytes for it.
_Item = tuple[asyncio.WriteTransport, int, bytearray]


class FanoutWrites:
    """``write(transport, data)``, deferred to the end of the loop's turn and flushed in one
    batch per loop."""

    def __init__(self, helpers: int = HELPERS, parallel_from: int = PARALLEL_FROM) -> None:
        self.helpers = helpers
        self.parallel_from = parallel_from
        self._pool: ThreadPoolExecutor | None = None
        self._pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batch] = (
            weakref.WeakKeyDictionary()
        )

    def write(self, transport: asyncio.WriteTransport, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        batch = self._pending.get(loop)
        queued = None if batch is None else batch.get(transport)
        if queued is not None:
            queued += data
        elif transport.is_closing() or transport.get_write_buffer_size():
            transport.write(data)
        else:
            if batch is None:
                batch = self._pending[loop] = {}
                loop.call_soon(self._flush, loop)
            batch[transport] = bytearray(data)

    def settle(self, transport: asyncio.WriteTransport) -> None:
        """Write now what this turn queued for ``transport``: for a caller about to write to
        it some other way (the end of a response), so that its bytes follow the frames."""
        batch = self._pending.get(asyncio.get_running_loop())
        queued = None if batch is None else batch.pop(transport, None)
        if queued is not None:
            transport.write(bytes(queued))

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop, None)
        if not batch:
            return
        # Each descriptor is read here, on the loop's thread, after every other callback of
        # the turn: a transport closed meanwhile gets its frame through ``write``.
        items: list[_Item] = []
        for transport, data in batch.items():
            sock = None if transport.is_closing() else transport.get_extra_info("socket")
            fd = -1 if sock is None else sock.fileno()
            if fd < 0:
                transport.write(bytes(data))
            else:
                items.append((transport, fd, data))
        shares = self._shares(len(items))
        helped: list[tuple[list[_Item], Future[list[int]]]] = []
        if len(shares) > 1:
            pool = self._pool or self._start_pool()
            for start, end in shares[1:]:
                part = items[start:end]
                helped.append((part, pool.submit(_write_all, part)))
        own = items[shares[0][0] : shares[0][1]]
        _finish(own, _write_all(own))
        for part, written in helped:
            _finish(part, written.result())

    def _shares(self, count: int) -> list[tuple[int, int]]:
        """Index ranges of the batch: the loop thread's first, then one per helper used."""
        if self.helpers < 1 or count < self.parallel_from:
            return [(0, count)]
        ways = self.helpers + 1
        size = -(-count // ways)
        return [(start, min(start + size, count)) for start in range(0, count, size)]

    def _start_pool(self) -> ThreadPoolExecutor:
        self._pool = ThreadPoolExecutor(self.helpers, thread_name_prefix="toolhub-sse-write")
        return self._pool


def _write_all(items: list[_Item]) -> list[int]:
    """Bytes written of each item; -1 when the write failed for another reason than a full
    socket buffer. Runs on the loop's thread or a helper, and touches nothing but the
    descriptors."""
    written = []
    for _, fd, data in items:
        try:
            written.append(os.write(fd, data))
        except BlockingIOError:
            written.append(0)
        except OSError:
            written.append(-1)
    return written


def _finish(items: list[_Item], written: list[int]) -> None:
    """On the loop's thread: what the writes left (all of a failed one) to the transports."""
    for (transport, _, data), count in zip(items, written, strict=True):
        if count < 0:
            transport.write(bytes(data))
        elif count < len(data):
            transport.write(bytes(data[count:]))
