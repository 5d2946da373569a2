"""A worker's cache of session tool sets is bounded (``TOOLHUB_WORKER_SESSIONS``), and evicting
a tool set never cancels a call it is running: the tool set is retired and closed when that
call ends. Before, a worker with more sessions than cache slots cancelled the oldest session's
running call with "session closed" as soon as a newer session's call arrived."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import WorkerProcess
from toolhub import CallResult, Progress, Session
from toolhub.stack import RedisServer

pytestmark = pytest.mark.timeout(120)

SLOTS = 2


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[RedisServer, Path]]:
    base = Path(tempfile.mkdtemp(prefix="toolhub-cache-"))
    redis = RedisServer().start()
    worker = WorkerProcess(
        "cache", redis.url, base, concurrency=4, env={"TOOLHUB_WORKER_SESSIONS": str(SLOTS)}
    )
    try:
        worker.start()
        worker.wait_ready()
        yield redis, base
    finally:
        worker.stop()
        redis.stop()
        shutil.rmtree(base, ignore_errors=True)


def _session(fleet: tuple[RedisServer, Path], name: str) -> Session:
    redis, base = fleet
    ws = base / name
    ws.mkdir(exist_ok=True)
    return Session.connect(redis.url, CONFIG, ws, session_id=name, builder=make_builder())


def test_evicting_a_session_with_a_running_call_lets_the_call_finish(fleet) -> None:
    old = _session(fleet, "old")
    newer = [_session(fleet, f"new{i}") for i in range(SLOTS + 2)]

    async def go() -> tuple[CallResult, list[CallResult]]:
        stream = old.stream("sleeper", {"seconds": 2})
        first = await anext(stream)
        assert isinstance(first, Progress) and first.subkind == "pid"
        # Every newer session's call pushes the old session further out of the cache, twice
        # over, while its call still runs.
        quick = [await s.call("noop", {}) for s in newer]
        rest = [item async for item in stream]
        assert isinstance(rest[-1], CallResult)
        return rest[-1], quick

    try:
        result, quick = asyncio.run(asyncio.wait_for(go(), 60))
        assert not any(r.is_error for r in quick), [r.error for r in quick if r.is_error]
        assert not result.is_error, result.error
        assert result.output.value["exit_code"] == 0
        # The evicted session builds again and runs its next call.
        again = asyncio.run(old.call("noop", {}))
        assert not again.is_error, again.error
    finally:
        for s in [old, *newer]:
            s.close()
