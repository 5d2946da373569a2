"""``FanoutWrites`` on real loopback connections, under uvloop (the gateway's loop) and asyncio's
own: every byte arrives, in order, whether the batch is written by the loop's thread alone or
shared with helper threads, whatever a socket did not take goes through the transport, and a
closed or broken connection is handled as ``transport.write`` handles it."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from toolhub.gateway.fanout_writes import FanoutWrites

LOOPS = [pytest.param(uvloop.new_event_loop, id="uvloop"), pytest.param(asyncio.new_event_loop)]


class Sink(asyncio.Protocol):
    """The server side: what the connection received, and whether it was lost."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.lost = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


class Source(asyncio.Protocol):
    def __init__(self) -> None:
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


async def connections(
    count: int,
) -> tuple[list[tuple[asyncio.WriteTransport, Source]], list[Sink], asyncio.Server]:
    loop = asyncio.get_running_loop()
    sinks: list[Sink] = []

    def accept() -> Sink:
        sinks.append(Sink())
        return sinks[-1]

    server = await loop.create_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ends = []
    for _ in range(count):
        transport, source = await loop.create_connection(Source, "127.0.0.1", port)
        ends.append((transport, source))
    while len(sinks) < count:
        await asyncio.sleep(0.001)
    return ends, sinks, server


async def received(sinks: list[Sink], sizes: list[int]) -> None:
    for _ in range(2000):
        if all(len(s.data) >= n for s, n in zip(sinks, sizes, strict=True)):
            return
        await asyncio.sleep(0.005)
    raise AssertionError([len(s.data) for s in sinks])


def close(ends: list[tuple[asyncio.WriteTransport, Source]], server: asyncio.Server) -> None:
    for transport, _ in ends:
        transport.close()
    server.close()


def run(make_loop: Callable[[], asyncio.AbstractEventLoop], test: Awaitable[Any]) -> None:
    loop = make_loop()
    try:
        loop.run_until_complete(test)
    finally:
        loop.close()


@pytest.mark.parametrize("make_loop", LOOPS)
@pytest.mark.parametrize("helpers", [0, 2])
def test_every_byte_arrives_in_order(make_loop: Any, helpers: int) -> None:
    """Forty connections, four turns of frames each, two frames per connection in one of
    them: with helpers the batch is shared (``parallel_from`` 8), without it is not."""
    writes = FanoutWrites(helpers=helpers, parallel_from=8)

    async def test() -> None:
        ends, sinks, server = await connections(40)
        expected = [bytearray() for _ in ends]
        for turn in range(4):
            for i, (transport, _) in enumerate(ends):
                frames = [f"turn {turn} to {i};".encode()]
                if turn == 2:
                    frames.append(f"and again {i};".encode())
                for frame in frames:
                    writes.write(transport, frame)
                    expected[i] += frame
            await asyncio.sleep(0)  # the turn ends: its batch is flushed
        await received(sinks, [len(e) for e in expected])
        assert [bytes(s.data) for s in sinks] == [bytes(e) for e in expected]
        close(ends, server)

    run(make_loop, test())


@pytest.mark.parametrize("make_loop", LOOPS)
def test_what_a_full_socket_leaves_goes_through_the_transport(make_loop: Any) -> None:
    """A frame far larger than the socket's buffer: the write takes part of it, the transport
    the rest, and the frames of the next turns follow it, in order."""
    writes = FanoutWrites(helpers=1, parallel_from=1)

    async def test() -> None:
        ends, sinks, server = await connections(2)
        for transport, _ in ends:
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        big = bytes(range(256)) * 8_000  # 2 MB
        for transport, _ in ends:
            writes.write(transport, big)
        await asyncio.sleep(0)
        assert all(t.get_write_buffer_size() > 0 for t, _ in ends)  # the transports hold the rest
        for transport, _ in ends:
            writes.write(transport, b"after")  # buffered: straight to the transport, behind it
        await received(sinks, [len(big) + 5] * 2)
        assert all(bytes(s.data) == big + b"after" for s in sinks)
        close(ends, server)

    run(make_loop, test())


@pytest.mark.parametrize("make_loop", LOOPS)
def test_settle_writes_the_turns_frames_before_anything_else(make_loop: Any) -> None:
    writes = FanoutWrites(helpers=0)

    async def test() -> None:
        ends, sinks, server = await connections(1)
        transport = ends[0][0]
        writes.write(transport, b"frame;")
        writes.settle(transport)
        transport.write(b"0\r\n\r\n")  # the end of the response, written some other way
        await asyncio.sleep(0)
        await received(sinks, [11])
        assert bytes(sinks[0].data) == b"frame;0\r\n\r\n"
        transport.close()
        server.close()

    run(make_loop, test())


@pytest.mark.parametrize("make_loop", LOOPS)
def test_closed_and_broken_connections(make_loop: Any) -> None:
    """A transport closed before the flush gets nothing on its socket, and the flush raises
    nothing; a write that fails (the socket shut for writing) is handed to the transport,
    which meets the same error and closes the connection, as it would have alone."""
    writes = FanoutWrites(helpers=1, parallel_from=1)

    async def test() -> None:
        ends, sinks, server = await connections(3)
        (closed, _), (broken, broken_side), (fine, _) = ends
        fd = broken.get_extra_info("socket").fileno()
        with socket.socket(fileno=os.dup(fd)) as alias:
            alias.shutdown(socket.SHUT_WR)
        writes.write(closed, b"never")
        writes.write(broken, b"lost")
        writes.write(fine, b"fine")
        closed.close()
        await asyncio.sleep(0)
        await received([sinks[2]], [4])
        assert isinstance(await asyncio.wait_for(broken_side.lost, 5), OSError)
        await asyncio.sleep(0.05)
        assert bytes(sinks[0].data) == b"" and bytes(sinks[1].data) == b""
        assert bytes(sinks[2].data) == b"fine"
        fine.close()
        server.close()

    run(make_loop, test())
