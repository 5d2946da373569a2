"""``read_fleet`` on real Redis: a call queued where no worker serves shows in its queue's depth
and wait, the ids of a queue's backlog in its backlog and waiting count; a call running on a
real worker shows under that worker; index entries without a record, or with a record a caller
could not have written sanely, are skipped, never fatal."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.fixtures_stack import Stack
from tests.processes import seconds_until
from toolhub import Session
from toolhub.distributed.fleet_view import read_fleet
from toolhub.distributed.settings import ALL_QUEUES, Settings
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer

pytestmark = pytest.mark.timeout(120)

BASH = {"tools": [{"id": f"Main:{t}"} for t in ("bash", "task_output", "kill_task", "read_file")]}


def test_a_queued_call_shows_in_its_queue_with_its_wait(
    bare_redis: RedisServer, tmp_path: Path
) -> None:
    store = RedisStore.from_settings(Settings.from_env(bare_redis.url))
    keys = store.records.keys
    with Session.connect(bare_redis.url, BASH, tmp_path) as session:
        waiting = threading.Thread(
            target=session.call_sync, args=("read_file", {"path": "x"}), kwargs={"timeout": 60}
        )
        waiting.start()
        seconds_until(lambda: read_fleet(store.client, keys, ALL_QUEUES).queues[0].depth, 30)
        time.sleep(0.3)
        # Index entries that name no call, and a record with a time no clock could give.
        store.client.zadd(keys.pending, {"no-such-call": 1})
        store.client.zadd(keys.leases, {"gone-call": 1})
        store.client.hset(keys.call("odd"), mapping={"queue": "x\x1b[2J", "created_at": "soon"})
        store.client.zadd(keys.pending, {"odd": 2})
        store.client.lpush(keys.backlog("toolhub.command"), "b1", "b2")  # ids past the window
        view = read_fleet(store.client, keys, ALL_QUEUES)
        session.close()
        waiting.join(30)
    fast = {q.name: q for q in view.queues}["toolhub.fast"]
    assert (fast.depth, fast.sunk, fast.queued_calls) == (1, 0, 1)
    assert 0.3 <= fast.oldest_wait_s < 60
    command = {q.name: q for q in view.queues}["toolhub.command"]
    assert (command.depth, command.backlog, command.queued_calls) == (0, 2, 2)
    odd = {q.name: q for q in view.queues}["x\x1b[2J"]
    assert odd.queued_calls == 1 and odd.oldest_wait_s == 0.0
    assert view.running == []
    store.close()


def test_a_running_call_shows_under_its_worker(live: Stack, tmp_path: Path) -> None:
    store = RedisStore.from_settings(Settings.from_env(live.url))
    keys = store.records.keys
    with Session.connect(live.url, BASH, tmp_path) as session:
        running = threading.Thread(
            target=session.call_sync,
            args=("bash", {"command": "sleep 3", "description": "sleep"}),
        )
        running.start()

        def seen() -> bool:
            calls = read_fleet(store.client, keys, ALL_QUEUES).running
            return any(c.tool == "Main:bash" and c.session_id == session.session_id for c in calls)

        seconds_until(seen, 30)
        view = read_fleet(store.client, keys, ALL_QUEUES)
        running.join(60)
    mine = [c for c in view.running if c.session_id == session.session_id]
    assert len(mine) == 1 and mine[0].worker and mine[0].running_s >= 0
    assert mine[0] in view.by_worker()[mine[0].worker]
    store.close()
