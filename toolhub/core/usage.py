"""What one call used: the meter a call's code charges and the call's record reads.

Why a meter in a context variable: the code that knows what a command cost (the process
backend reading its cgroup, or ``wait4``'s resource usage) is deep below the tool, and the code
that records a call (the worker, the embedded executor) is far above it. The executor opens a
meter around the call (``metering``); whatever runs inside it, in this thread or in asyncio
tasks created inside, finds it with ``current_meter`` and charges it. Code that hands work to a
thread pool captures the meter first and charges it from there. Charging with no meter open
(a tool called outside any executor) is a no-op.

CPU seconds and output bytes add up over a call's commands; peak memory is the largest peak
any one of them reached. Nothing here reads the kernel: it is plain bookkeeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Usage", "UsageMeter", "current_meter", "metered_call", "metering"]

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Usage:
    """A call's totals: CPU seconds (user + system) of the commands it ran, the largest peak
    memory of any of them, and the bytes of output they produced."""

    cpu_seconds: float = 0.0
    peak_memory_bytes: int = 0
    output_bytes: int = 0


#: The lock of every meter: its holders only add a few numbers, and a lock per meter was an
#: allocation on every call (every embedded no-op opens a meter), freed when its record goes.
_LOCK = threading.Lock()


class UsageMeter:
    """Thread-safe running totals for one call."""

    __slots__ = ("_cpu", "_output", "_peak")

    def __init__(self) -> None:
        self._cpu = 0.0
        self._peak = 0
        self._output = 0

    def charge(
        self, *, cpu_seconds: float = 0.0, peak_memory_bytes: int = 0, output_bytes: int = 0
    ) -> None:
        """Add one command's (or one piece of work's) use; negative amounts are ignored."""
        with _LOCK:
            self._cpu += max(0.0, cpu_seconds)
            self._peak = max(self._peak, peak_memory_bytes)
            self._output += max(0, output_bytes)

    def usage(self) -> Usage:
        with _LOCK:
            return Usage(self._cpu, self._peak, self._output)


_current: ContextVar[UsageMeter | None] = ContextVar("toolhub_usage_meter", default=None)


def current_meter() -> UsageMeter | None:
    """The meter of the call running here, or None outside any call."""
    return _current.get()


class _Opened:
    """``metering``'s context manager: a class rather than a generator, since every call opens
    one (the embedded executor's no-op call included)."""

    __slots__ = ("_token", "meter")
    _token: Token[UsageMeter | None]

    def __init__(self, meter: UsageMeter) -> None:
        self.meter = meter

    def __enter__(self) -> UsageMeter:
        self._token = _current.set(self.meter)
        return self.meter

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def metering(meter: UsageMeter | None = None) -> AbstractContextManager[UsageMeter]:
    """Open ``meter`` (a new one by default) for everything run inside."""
    return _Opened(meter if meter is not None else UsageMeter())


def metered_call(meter: UsageMeter, fn: Callable[[A], R], arg: A) -> R:
    """``fn(arg)`` with ``meter`` open: ``metering`` without a context manager, for the
    embedded executor's inline run of a sync tool (every embedded call, the no-op's too)."""
    token = _current.set(meter)
    try:
        return fn(arg)
    finally:
        _current.reset(token)
