"""One bad queue item no longer kills workers (issue 13, item 7): each kind of poison pushed
straight onto a queue list goes to the dead-letter list with its metric and one log line, the
workers stay up (same processes; a good call right after succeeds), nothing is redelivered,
and nothing stored is lost. Real redis-server, two real ``toolhub worker`` processes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from tests.distributed.helpers import CALL_MESSAGE, NO_WORKFLOW, follow_all, queue_item, wait_until
from tests.fixtures_stack import REPO, STACK_ENV
from tests.observability.metrics_scrape import moved, scrape_all
from toolhub.distributed.deadletter import MAX_RAW_BYTES

pytestmark = pytest.mark.timeout(60)

DEADLETTERED = "toolhub_worker_messages_deadlettered_total"
QUEUE = "toolhub.fast"


def _body(kwargs: Any, embed: Any = None) -> bytes:
    return bytes(msgpack.packb([[], kwargs, NO_WORKFLOW if embed is None else embed]))


#: kind → (the raw item, the reason it is dead-lettered for).
POISON: dict[str, Callable[[], tuple[bytes, str]]] = {
    "not UTF-8": lambda: (b"\xff\xfe\xfd not utf-8", "undecodable"),
    "not JSON": lambda: (b"\x00 not json {", "undecodable"),
    "JSON, not an envelope": lambda: (b"[1, 2, 3]", "malformed"),
    "body not base64 msgpack": lambda: (queue_item(body=b"\xc1\xc1\xc1"), "undecodable"),
    "msgpack body of the wrong shape": lambda: (
        queue_item(body=bytes(msgpack.packb(42))),
        "malformed",
    ),
    "kwargs not a call message": lambda: (queue_item({"call_id": "x", "n": 1}), "malformed"),
    "a task toolhub does not run": lambda: (queue_item(task="celery.ping"), "malformed"),
    "Celery callbacks in the body": lambda: (
        queue_item(body=_body(CALL_MESSAGE, {**NO_WORKFLOW, "callbacks": [{"task": "x"}]})),
        "malformed",
    ),
    "a header Celery would choke on": lambda: (
        queue_item(headers={"timelimit": "soon"}),
        "malformed",
    ),
    "a lone surrogate in a header": lambda: (
        queue_item(headers={"kwargsrepr": "\ud800"}),
        "undecodable",
    ),
    "an item above the kept size": lambda: (b"{" * (MAX_RAW_BYTES + 10), "undecodable"),
}


def _entry(store, raw: bytes) -> dict[str, Any] | None:
    digest = hashlib.sha256(raw).hexdigest()
    for line in store.client.lrange(store.keys.deadletter, 0, -1):
        entry = json.loads(line)
        if entry["sha256"] == digest:
            return entry
    return None


@pytest.mark.parametrize("kind", sorted(POISON))
def test_a_poison_item_is_dead_lettered_and_the_workers_stay_up(live, connect, store, kind):
    session = connect()
    earlier = session.call_sync("ticks", {"n": 2}, call_id=f"poison-earlier-{kind}")
    assert not earlier.is_error, earlier.prompt_text
    stored = store.get_record(f"poison-earlier-{kind}"), store.read_events(f"poison-earlier-{kind}")
    session_record = store.get_session(session.session_id)
    pids = [worker.pid for worker in live.workers]
    offsets = [worker.log_path.stat().st_size for worker in live.workers]
    before = scrape_all(live)
    raw, reason = POISON[kind]()
    started = time.time()

    store.client.lpush(QUEUE, raw)

    entry = wait_until(lambda: _entry(store, raw), 10)
    assert entry["reason"] == reason and entry["queue"] == QUEUE and entry["size"] == len(raw)
    assert entry["why"] and started - 1 <= entry["at"] <= time.time() + 1
    assert base64.b64decode(entry["raw_b64"]) == raw[:MAX_RAW_BYTES]
    assert entry["truncated"] == (len(raw) > MAX_RAW_BYTES)
    wait_until(lambda: moved(before, scrape_all(live), DEADLETTERED, reason=reason) == 1, 5)
    # The workers stay up: the same processes, and a good call right after succeeds.
    after = session.call_sync("noop", {}, call_id=f"poison-after-{kind}")
    assert not after.is_error, after.prompt_text
    assert [worker.pid for worker in live.workers] == pids
    assert all(worker.alive for worker in live.workers)
    # Never redelivered: nothing of it in kombu's unacked hash, dead-lettered once.
    assert store.client.llen(QUEUE) == 0
    assert not any(raw[:200] in value for value in store.client.hvals("unacked"))
    time.sleep(0.3)
    lines = store.client.lrange(store.keys.deadletter, 0, -1)
    assert sum(json.loads(line)["sha256"] == entry["sha256"] for line in lines) == 1
    # Nothing stored is lost.
    assert store.get_record(f"poison-earlier-{kind}") == stored[0]
    assert [e.item.to_dict() for e in store.read_events(f"poison-earlier-{kind}")] == [
        e.item.to_dict() for e in stored[1]
    ]
    assert store.get_session(session.session_id) == session_record
    # One log line, no traceback, no "Unrecoverable error".
    logs = _logged_since(live, offsets)
    assert logs.count(f"refused a queue item from {QUEUE} ({reason}:") == 1, logs
    assert "Unrecoverable" not in logs and "Traceback" not in logs, logs


def _logged_since(live, offsets: list[int]) -> str:
    out = []
    for worker, offset in zip(live.workers, offsets, strict=True):
        with worker.log_path.open("rb") as log:
            log.seek(offset)
            out.append(log.read().decode(errors="replace"))
    return "".join(out)


def test_a_refused_item_answers_the_queued_call_it_names(live, store):
    """A malformed message that names a queued call (call id and run id) fails that call with
    ``message_refused``, so its caller does not wait; a stray copy naming another run of a
    call leaves the call alone."""
    fields = {"session_id": "poison-s", "tool": "Test:noop", "name": "noop", "queue": QUEUE}
    assert store.records.create("poison-named", "run-1", {**fields, "max_attempts": 3})
    assert store.records.create("poison-stray", "run-2", {**fields, "max_attempts": 3})
    named = queue_item({"call_id": "poison-named", "run_id": "run-1", "session_id": "poison-s"})
    stray = queue_item({"call_id": "poison-stray", "run_id": "run-9", "arguments": 7})

    store.client.lpush(QUEUE, named, stray)

    events = asyncio.run(asyncio.wait_for(follow_all(store, "poison-named"), 10))
    assert [e.seq for e in events] == [1]
    error = events[0].item.error
    assert error is not None and error.code == "message_refused"
    assert "call message has no 'config_hash'" in error.detail and "did not run" in error.detail
    assert store.get_record("poison-named")["status"] == "failed"
    wait_until(lambda: _entry(store, stray), 10)
    assert _entry(store, named)["call_id"] == "poison-named"
    assert store.get_record("poison-stray")["status"] == "queued"
    assert store.records.cancel("poison-stray") == "cancelled"


INSPECT_FROM_A_SCREENED_PROCESS = """
import json, workers.app as worker_app
from toolhub.fences import kombu
assert worker_app.app.connection().transport.Channel._brpop_read is kombu._screened_brpop_read
print(json.dumps(sorted(worker_app.app.control.inspect(timeout=3).ping() or {})))
"""


def test_control_replies_pass_the_screen(live, store):
    """A process with the screen installed (Flower loads ``workers.app``) still gets the
    workers' answers to its ``inspect``: pidbox reply queues are not task queues."""
    before = store.client.llen(store.keys.deadletter)
    env = {
        **os.environ,
        **STACK_ENV,
        "TOOLHUB_REDIS_URL": live.url,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", INSPECT_FROM_A_SCREENED_PROCESS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answered = json.loads(done.stdout.strip().splitlines()[-1])
    assert {f"toolhub-{worker.pid}" for worker in live.workers} == {
        name.split("@")[0] for name in answered
    }
    assert store.client.llen(store.keys.deadletter) == before
    assert "refused a queue item" not in done.stderr
