"""The stdio server's wire: stdin and stdout taken from the process while it serves.

Threat: a tool's child process inherits fd 0 and fd 1. Left as they are, a command could read
the client's next requests or write a frame of its own into the protocol stream. So, as the
SDK's own ``stdio_server`` does, fd 0 points at the null device and fd 1 at stderr while the
server runs, and the wire is read and written on private duplicates (close-on-exec).

What differs from the SDK: stdin is read by a daemon thread of its own. A read of a terminal
or a pipe cannot be interrupted, and the SDK reads on a worker thread that its event loop and
interpreter both wait for at exit: Ctrl-C could not stop the server until the client sent
another line. Here the loop stops waiting when the server is cancelled, and the process
exits without joining the reader (``run_stdio`` stops on the first Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import queue
import threading
from collections.abc import Iterator
from typing import IO


class StdinLines:
    """The client's lines (``async for line in ...``), each read on request by a daemon
    thread: one line per ``__anext__``, as the SDK's reader paces them (a request piped with
    EOF right after it is answered before EOF ends the server)."""

    def __init__(self, wire: IO[bytes]) -> None:
        self._text = io.TextIOWrapper(wire, encoding="utf-8", errors="replace")
        self._loop = asyncio.get_running_loop()
        self._wanted: queue.SimpleQueue[asyncio.Future[str]] = queue.SimpleQueue()
        threading.Thread(target=self._read, name="mcp-stdin", daemon=True).start()

    def _read(self) -> None:
        line = "-"
        while line:
            wanted = self._wanted.get()
            try:
                line = self._text.readline()
            except (OSError, ValueError):
                line = ""
            try:
                self._loop.call_soon_threadsafe(_settle, wanted, line)
            except RuntimeError:  # the loop has closed: nobody is reading
                return

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        wanted = self._loop.create_future()
        self._wanted.put(wanted)
        line: str = await wanted
        if not line:
            raise StopAsyncIteration
        return line


def _settle(wanted: asyncio.Future[str], line: str) -> None:
    if not wanted.done():
        wanted.set_result(line)


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The wire's stdin and stdout (binary), with fd 0 on the null device and fd 1 on stderr
    until the block ends. The stdin duplicate is never closed: the reader thread may still
    be blocked on it."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
