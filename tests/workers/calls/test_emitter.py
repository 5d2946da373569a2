"""An attempt's events on a real Redis: the terminal is published once, an attempt that no
longer owns its call is fenced off and stops, and one that loses Redis for longer than
``follow_outage_seconds`` gives up instead of hanging."""

from __future__ import annotations

import dataclasses
import time

from tests.distributed.helpers import queued_call
from toolhub.core import CallResult, CancelToken, Progress, ToolOutput
from toolhub.core.tool import LEASE_LOST, REDIS_LOST
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer
from workers.calls.emitter import Emitter
from workers.calls.running import Running

QUEUE = b"test.emitter"


def _claimed(store: RedisStore, cid: str) -> Running:
    message = queued_call(store, cid, QUEUE)
    claim = store.records.claim(message, "test-worker")
    assert claim.action == "run"
    return Running(cid, CancelToken(), claim.attempt)


def _ok(cid: str) -> CallResult:
    return CallResult(
        name="noop", output=ToolOutput.dynamic({"ok": True}), prompt_text="ok", call_id=cid
    )


def test_progress_then_one_terminal(bare_store: RedisStore) -> None:
    running = _claimed(bare_store, "e-ok")
    emitter = Emitter(bare_store, running, "s")
    emitter.progress(Progress.custom("step", {"n": 1}))
    assert emitter.finish(_ok("e-ok")) is True
    assert emitter.finish(_ok("e-ok")) is False  # a racing cancel finds it finished
    events = bare_store.read_events("e-ok")
    assert len(events) == 2 and events[0].item.subkind == "step"
    assert not running.token.cancelled


def test_an_attempt_that_lost_its_call_is_fenced_off(bare_store: RedisStore) -> None:
    running = _claimed(bare_store, "e-fenced")
    bare_store.client.hset(bare_store.keys.call("e-fenced"), "attempt", "2")  # another owns it
    emitter = Emitter(bare_store, running, "s")
    emitter.progress(Progress.custom("step", {"n": 1}))
    assert emitter.stopped and running.token.reason == LEASE_LOST
    assert emitter.finish(_ok("e-fenced")) is False
    assert bare_store.read_events("e-fenced") == []


def test_an_attempt_gives_up_when_redis_stays_away(bare_settings: Settings) -> None:
    server = RedisServer().start()
    settings = dataclasses.replace(bare_settings, redis_url=server.url, follow_outage_seconds=0.5)
    store = RedisStore.from_settings(settings)
    try:
        running = _claimed(store, "e-outage")
        emitter = Emitter(store, running, "s")
        server.stop()
        started = time.monotonic()
        assert emitter.finish(_ok("e-outage")) is False
        assert running.token.reason == REDIS_LOST and emitter.stopped
        assert time.monotonic() - started < 60
    finally:
        store.close()
        server.stop()
