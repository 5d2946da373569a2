"""Waiting in the main thread for SIGINT or SIGTERM without a lock in the signal handler.

A handler that calls ``threading.Event.set`` can deadlock: Python runs handlers in the main
thread, between bytecodes, so the handler may interrupt that same thread inside
``Event.wait`` while it holds the event's (non-reentrant) condition lock, and then block on
it for ever. ``toolhub up`` hit exactly that when Ctrl-C came as it began to wait, and the
background holder had the same handler. The handler here only sets a flag (``requested``);
``wait`` sleeps in short slices and reads it, and a loop of its own (the holder's) reads it
each turn.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable
from types import FrameType, TracebackType
from typing import Any

POLL_SECONDS = 0.1

#: What ``signal.signal`` returns: the handler that was installed before.
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopSignals:
    """``with StopSignals() as stop: ...; stop.wait()`` returns once SIGINT or SIGTERM came
    (at most ``POLL_SECONDS`` after it). The previous handlers come back on exit."""

    def __init__(self, signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM)):
        self._signals = tuple(signals)
        self._previous: dict[signal.Signals, Handler] = {}
        self.requested = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def __enter__(self) -> StopSignals:
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def wait(self) -> None:
        while not self.requested:
            time.sleep(POLL_SECONDS)
