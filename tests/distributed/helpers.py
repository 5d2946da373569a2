"""Small helpers shared by the distributed tests."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgpack
import psutil
import pytest

from tests.fixtures_stack import WorkerProcess
from toolhub import CallResult, Progress, Session
from toolhub.distributed.codec import StreamEvent, pack
from toolhub.distributed.shared import close_shared_backends
from toolhub.distributed.store import RedisStore

T = TypeVar("T")


class _Redis(Protocol):
    """A Redis to start and stop: a ``RedisServer``, or a ``SentinelSet`` and its URL."""

    @property
    def url(self) -> str: ...
    def start(self) -> Any: ...
    def stop(self) -> None: ...


R = TypeVar("R", bound=_Redis)


@contextmanager
def one_worker_fleet(
    redis: R, home: Path, lease: float, concurrency: int, env: dict[str, str] | None = None
) -> Iterator[tuple[R, WorkerProcess]]:
    """``redis`` started and one worker on it (in ``home``), the worker and this process (the
    dispatcher) on a lease of ``lease`` seconds; on exit both stopped and the environment as
    it was."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLHUB_LEASE_SECONDS", f"{lease:g}")
        redis.start()
        worker_env = {"TOOLHUB_LEASE_SECONDS": f"{lease:g}", **(env or {})}
        worker = WorkerProcess("w", redis.url, home, concurrency=concurrency, env=worker_env)
        try:
            worker.start().wait_ready()
            yield redis, worker
        finally:
            close_shared_backends()
            worker.stop()
            redis.stop()


#: The built-in bash and background-task tools (the durable background command tests).
TASK_TOOLS = {
    "tools": [
        {"id": "Main:bash"},
        {"id": "Main:task_output"},
        {"id": "Main:wait_tasks"},
        {"id": "Main:kill_task"},
    ]
}


def queued_call(
    store: RedisStore, cid: str, queue: bytes, max_attempts: int = 3, **fields: Any
) -> dict[str, Any]:
    """A call recorded and queued (as a dispatcher does, on ``queue``), in session ``s``;
    returns its message. ``fields`` are added to its record (``on_lost``, ``tool``...)."""
    message = {
        "call_id": cid,
        "run_id": "run-1",
        "session_id": "s",
        "name": "noop",
        "max_attempts": max_attempts,
    }
    store.client.set(store.keys.config("h"), "{}")
    record = {"session_id": "s", "name": "noop", "max_attempts": max_attempts, **fields}
    code = store.records.create_and_enqueue(
        cid,
        "run-1",
        {**record, "message": pack(message)},
        queue,
        b"payload-1",
        config_hash="h",
        tenant="t",
    )
    assert code == 1
    return message


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


async def follow_all(
    store: RedisStore, call_id: str, after_seq: int = 0, *, must_exist: bool = True
) -> list[StreamEvent]:
    return [event async for event in store.follow(call_id, after_seq, must_exist=must_exist)]


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


#: A call message as the dispatcher sends it (``toolhub.executors.celery``).
CALL_MESSAGE: dict[str, Any] = {
    "call_id": "c-1",
    "run_id": "r-1",
    "session_id": "s-1",
    "config_hash": "h-1",
    "name": "noop",
    "tool": "Test:noop",
    "arguments": {},
    "max_attempts": 3,
}
NO_WORKFLOW = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def queue_item(
    kwargs: Any = None,
    *,
    task: str = "toolhub.execute",
    queue: str = "toolhub.fast",
    body: bytes | None = None,
    headers: dict[str, Any] | None = None,
) -> bytes:
    """A raw queue item the way kombu's Redis transport pushes a Celery task message (JSON
    envelope, base64 msgpack body ``[args, kwargs, embed]``), with parts replaced at will."""
    task_id = str(uuid.uuid4())
    if body is None:
        body = msgpack.packb([[], CALL_MESSAGE if kwargs is None else kwargs, NO_WORKFLOW])
    envelope = {
        "body": base64.b64encode(body).decode(),
        "content-encoding": "binary",
        "content-type": "application/x-msgpack",
        "headers": {
            "lang": "py",
            "task": task,
            "id": task_id,
            "shadow": None,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": task_id,
            "parent_id": None,
            "argsrepr": "()",
            "kwargsrepr": "{}",
            "origin": "test",
            "ignore_result": True,
            "replaced_task_nesting": 0,
            "stamped_headers": None,
            "stamps": {},
            **(headers or {}),
        },
        "properties": {
            "correlation_id": task_id,
            "reply_to": str(uuid.uuid4()),
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    return json.dumps(envelope).encode()
