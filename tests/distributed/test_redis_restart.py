"""Redis dies and comes back (append-only file on): calls that cannot be dispatched get a clear
error at once, the call in flight is followed to its end after the restart, new calls succeed,
and nothing stored is corrupted.

The worker itself survives too, even while it holds an unacked message (a running call with
late acks): kombu 5.7's Redis channel used to crash restoring it (``'NoneType' object has no
attribute 'hostname'``), which ``toolhub/fences/kombu.py`` works around (docs/distributed.md).
The first test still plays the supervisor (compose ``restart:``, a Kubernetes Deployment), as
production has one; the second checks that no restart is needed and that the kombu ``unacked``
entry the lost ack leaves behind is swept.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.helpers import assert_contiguous, async_wait_until, wait_until
from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import STACK_ENV, Stack
from toolhub import CallResult, Session
from toolhub.distributed.codec import unpack
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore


@pytest.fixture
def persistent_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    for key, value in STACK_ENV.items():
        monkeypatch.setenv(key, value)
    stack = Stack(workers=1, persistent=True).start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.mark.long  # run by `make test-long`; make test keeps a call held through a restart
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


def test_worker_holding_a_call_survives_a_redis_restart(persistent_stack: Stack, tmp_path: Path):
    stack = persistent_stack
    worker = stack.workers[0]
    pid = worker.pid
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(stack.url, CONFIG, ws, session_id="survive", builder=make_builder())
    store = RedisStore.from_settings(Settings.from_env(stack.url))
    cid = "held"

    async def go() -> tuple[CallResult, CallResult, float]:
        in_flight = asyncio.ensure_future(
            session.call("ticks", {"n": 30, "delay_ms": 100}, call_id=cid)
        )
        await async_wait_until(lambda: (store.get_record(cid) or {}).get("seq", 0) >= 5, 10)
        # The worker holds the message in memory only (late acks without kombu's ack
        # emulation): the call's record and lease are what recover it, not a kombu entry.
        assert store.client.exists("unacked", "unacked_index") == 0
        stack.redis.kill()
        await asyncio.sleep(1.0)
        stack.redis.start()
        restarted = time.time()
        result = await in_flight
        after = await session.call("noop", {}, call_id="after-restart")
        return result, after, restarted

    try:
        result, after, restarted = asyncio.run(asyncio.wait_for(go(), 60))
        assert not result.is_error, result.prompt_text
        assert store.get_record(cid)["status"] == "succeeded"
        # The same process ran a new call after the restart: it reconnected and consumes.
        assert not after.is_error, after.prompt_text
        assert worker.alive and worker.pid == pid, worker.tail()
        assert str(store.get_record("after-restart")["worker"]).endswith(f":{pid}")
        # The held call's ack could not reach Redis (its channel died with the connection):
        # it is dropped locally, and nothing is left behind in Redis.
        assert store.client.exists("unacked", "unacked_index") == 0
        # The heartbeat thread kept beating through it all and still says ready.
        wait_until(lambda: worker.heartbeat.stat().st_mtime > restarted, 15, every=0.1)
        assert worker.heartbeat.read_text().strip() == "ready"
        assert worker.alive and worker.pid == pid
        log = worker.log_path.read_text(errors="replace")
        assert "Traceback" not in log, worker.tail(80)
        assert "AttributeError" not in log, worker.tail(80)
        assert "Unrecoverable error" not in log, worker.tail(80)
    finally:
        session.close()
        store.close()


def test_kombu_guard_is_idempotent_and_degrades_without_its_attributes(
    monkeypatch: pytest.MonkeyPatch,
):
    from kombu.transport import redis as transport

    from toolhub.fences import kombu as fence

    # Whatever this test does to kombu's classes is undone afterwards.
    monkeypatch.setattr(transport.Channel, "_connparams", transport.Channel._connparams)
    monkeypatch.setattr(transport.QoS, "ack", transport.QoS.ack)
    monkeypatch.setattr(transport.QoS, "reject", transport.QoS.reject)
    assert fence.guard_detached_channels()
    patched = transport.Channel._connparams
    assert fence.guard_detached_channels()
    assert transport.Channel._connparams is patched
    assert issubclass(fence.ChannelDetached, transport.Transport.connection_errors)
    # A kombu without the patched attribute: nothing is patched, the worker still starts.
    monkeypatch.delattr(transport.Channel, "_connparams")
    assert not fence.guard_detached_channels()
