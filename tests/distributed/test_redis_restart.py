"""Redis dies and comes back (append-only file on): calls that cannot be dispatched get a clear
error at once, the call in flight is followed to its end after the restart, new calls succeed,
and nothing stored is corrupted.

The Celery worker itself does not survive a broker restart while it holds unacked messages:
kombu's Redis channel crashes restoring them (``'NoneType' object has no attribute
'hostname'``, see docs/distributed.md); the worker finishes its running calls and exits (by
force if kombu's teardown hangs). So the test plays the supervisor (compose ``restart:``, a
Kubernetes Deployment) and restarts it, as production would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.helpers import assert_contiguous, async_wait_until
from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import STACK_ENV, Stack
from toolhub import CallResult, Session
from toolhub.distributed.codec import unpack
from toolhub.distributed.settings import Settings
from toolhub.store.redis import RedisStore


@pytest.fixture
def persistent_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    for key, value in STACK_ENV.items():
        monkeypatch.setenv(key, value)
    stack = Stack(workers=1, persistent=True).start()
    try:
        yield stack
    finally:
        stack.stop()


def test_redis_restart_mid_run(persistent_stack: Stack, tmp_path: Path):
    stack = persistent_stack
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(stack.url, CONFIG, ws, session_id="restart", builder=make_builder())
    store = RedisStore.from_settings(Settings.from_env(stack.url))
    cid = "in-flight"

    supervising = threading.Event()

    def supervise() -> None:
        while not supervising.wait(0.2):
            if stack.redis.proc is not None and stack.redis.proc.poll() is None:
                stack.heal()

    async def go():
        merged = await session.call("merge", {"item": "before"}, call_id="merge-before")
        assert not merged.is_error, merged.prompt_text
        in_flight = asyncio.ensure_future(
            session.call("ticks", {"n": 40, "delay_ms": 100}, call_id=cid)
        )
        await async_wait_until(lambda: (store.get_record(cid) or {}).get("seq", 0) >= 5, 10)
        stack.redis.kill()
        started = time.monotonic()
        refused = await session.call("noop", {}, call_id="during-outage")
        refused_after = time.monotonic() - started
        await asyncio.sleep(1.0)
        stack.redis.start()
        supervisor.start()
        result = await in_flight
        after = await session.call("merge", {"item": "after"}, call_id="merge-after")
        return refused, refused_after, result, after

    supervisor = threading.Thread(target=supervise, daemon=True)
    try:
        refused, refused_after, result, after = asyncio.run(asyncio.wait_for(go(), 60))
        assert refused.is_error and refused.error.code == "redis_unavailable"
        assert refused_after < 3.0
        assert isinstance(result, CallResult) and not result.is_error, result.prompt_text
        assert not after.is_error and after.output.value["count"] == 2, after.prompt_text
        # Stored data survived intact: session, state, and the in-flight call's record and
        # events (contiguous sequence numbers, one terminal).
        assert store.get_session("restart")["config_hash"]
        items = unpack(store.client.hget(store.keys.state("restart"), "test_items"))["items"]
        assert items == ["before", "after"]
        record = store.get_record(cid)
        assert record["status"] == "succeeded"
        events = store.read_events(cid)
        assert_contiguous(events)
        assert record["seq"] == events[-1].seq
        assert store.get_record("during-outage") is None
    finally:
        supervising.set()
        if supervisor.is_alive():
            supervisor.join(30)
        session.close()
        store.close()
