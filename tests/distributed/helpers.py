"""Small helpers shared by the distributed tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psutil

from toolhub import CallResult, Progress, Session
from toolhub.distributed.codec import StreamEvent
from toolhub.distributed.store import RedisStore

T = TypeVar("T")

#: The built-in bash and background-task tools (the durable background command tests).
TASK_TOOLS = {
    "tools": [
        {"id": "Main:bash"},
        {"id": "Main:task_output"},
        {"id": "Main:wait_tasks"},
        {"id": "Main:kill_task"},
    ]
}


def wait_until(check: Callable[[], T], timeout: float = 10.0, every: float = 0.02) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


async def async_wait_until(check: Callable[[], T], timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.02)


async def collect(
    session: Session, name: str, args: Any, call_id: str
) -> list[Progress | CallResult]:
    return [item async for item in session.stream(name, args, call_id=call_id)]


async def follow_all(store: RedisStore, call_id: str, after_seq: int = 0) -> list[StreamEvent]:
    return [event async for event in store.follow(call_id, after_seq)]


def worker_pid(record: dict[str, Any]) -> int:
    """The pid part of a record's ``worker`` field (``host:pid``)."""
    return int(str(record["worker"]).rsplit(":", 1)[1])


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def assert_contiguous(events: list[StreamEvent], first: int = 1) -> None:
    seqs = [e.seq for e in events]
    assert seqs == list(range(first, first + len(seqs))), seqs
    assert sum(e.terminal for e in events) == 1 and events[-1].terminal
