"""At most ``START_CONCURRENCY`` command starts of this process at once.

When hundreds of calls reach a worker together, every pool thread is in the CPU-bound part of
a command start at the same moment (the sandbox argv, the cgroup, the output log, the request
to the launcher). Under the GIL they take turns, and a reader thread that only has a line of
another command's output to forward waits behind all of them, and progress lines printed
during a burst of starts reach the caller late. Let through two at a time, the other starts
wait on a semaphore instead of on the GIL, and the lines go through between them
(``bench/bench_long_commands.py`` measures it).

A start that waits on something outside this process (the sandbox launcher's answer, for up
to ``START_TIMEOUT_S``) gives its place up while it waits (``released``): a stopped launcher
of one session must not hold up every other session's commands.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

START_CONCURRENCY = 2


class StartGate:
    """A semaphore whose holder can step out while it waits on another process."""

    def __init__(self, width: int) -> None:
        self._slots = threading.BoundedSemaphore(width)
        self._holding = threading.local()

    def _held_here(self) -> bool:
        return bool(getattr(self._holding, "held", False))

    @contextmanager
    def held(self) -> Iterator[None]:
        """One of the slots for the block; inside another ``held`` of this thread, nothing
        more (it has one)."""
        if self._held_here():
            yield
            return
        self._slots.acquire()
        self._holding.held = True
        try:
            yield
        finally:
            self._holding.held = False
            self._slots.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """The slot this thread holds is free for the block, and taken back after it (the
        thread may wait for it then). Outside ``held``, nothing."""
        if not self._held_here():
            yield
            return
        self._holding.held = False
        self._slots.release()
        try:
            yield
        finally:
            self._slots.acquire()
            self._holding.held = True


START_GATE = StartGate(START_CONCURRENCY)
