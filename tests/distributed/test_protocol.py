"""The Redis protocol as consumers see it: replay from any sequence number, no subscription
left behind, records that expire, msgpack only, and what Flower is shown."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import time
from pathlib import Path

import pytest
from kombu import Connection, Exchange, Producer

from tests.distributed.helpers import assert_contiguous, follow_all, wait_until
from toolhub import CallResult
from toolhub.distributed.codec import unpack
from toolhub.distributed.store import CallNotFound


def test_late_and_resuming_followers_see_no_gap_and_no_duplicate(live, connect, store):
    session = connect()
    cid = "replay"

    async def go():
        # Following before the dispatch: the call may not exist yet when it starts.
        early = asyncio.ensure_future(follow_all(store, cid, must_exist=False))
        result = await session.call("ticks", {"n": 30, "delay_ms": 5}, call_id=cid)
        late = await follow_all(store, cid)
        resumed = await follow_all(store, cid, after_seq=17)
        return result, await early, late, resumed

    result, early, late, resumed = asyncio.run(asyncio.wait_for(go(), 30))
    assert not result.is_error
    assert_contiguous(early)
    assert [e.seq for e in late] == [e.seq for e in early] == list(range(1, 32))
    assert_contiguous(resumed, first=18)
    assert [e.item.to_dict() for e in resumed] == [e.item.to_dict() for e in early[17:]]
    assert isinstance(resumed[-1].item, CallResult)


def test_follow_unknown_call_raises(live, store):
    async def go():
        return [e async for e in store.follow("no-such-call")]

    with pytest.raises(CallNotFound):
        asyncio.run(go())


def test_no_subscription_is_left_behind_and_records_expire(live, connect, store):
    session = connect()
    ids = [f"subs-{i}" for i in range(20)]

    async def go():
        return await asyncio.gather(*(session.call("noop", {}, call_id=c) for c in ids))

    results = asyncio.run(asyncio.wait_for(go(), 30))
    assert all(not r.is_error for r in results)
    pubsub = session.executor.store.pubsub
    wait_until(lambda: pubsub.channels() == [], 5)
    channels = [store.keys.channel(c) for c in ids]
    wait_until(lambda: all(n == 0 for _, n in store.client.pubsub_numsub(*channels)), 5)
    for cid in ids:
        assert 0 < store.client.ttl(store.keys.call(cid)) <= store.settings.record_ttl_seconds
        # No progress, no stream: the record's result is the terminal event (retention).
        assert not store.client.exists(store.keys.events(cid))
        (terminal,) = store.read_events(cid)
        assert terminal.terminal and terminal.seq == 1 and not terminal.item.is_error
    # A call with progress keeps its stream, with the same TTL.
    assert not session.call_sync("ticks", {"n": 2}, call_id="subs-ticks").is_error
    assert (
        0 < store.client.ttl(store.keys.events("subs-ticks")) <= store.settings.record_ttl_seconds
    )
    assert [e.seq for e in store.read_events("subs-ticks")] == [1, 2, 3]


def test_a_reused_call_id_starts_a_fresh_record(live, connect, store):
    session = connect()
    first = session.call_sync("ticks", {"n": 3}, call_id="reused")
    second = session.call_sync("ticks", {"n": 1}, call_id="reused")
    assert not first.is_error and not second.is_error
    assert [e.seq for e in store.read_events("reused")] == [1, 2]
    assert store.get_record("reused")["attempts"][0]["attempt"] == 1


def test_pickle_messages_are_never_accepted(live, store, tmp_path: Path):
    """A pickled message on a toolhub queue is refused unread: nothing runs, no record; it is
    in the dead-letter list (the queue screen, ``workers/guards/poison.py``)."""
    marker = tmp_path / "pickled.txt"
    message = {
        "call_id": "pickled",
        "run_id": "x",
        "session_id": "s",
        "config_hash": "h",
        "name": "ticks",
        "tool": "Test:ticks",
        "arguments": {"marker": str(marker)},
    }
    with Connection(live.url) as conn:
        producer = Producer(
            conn,
            exchange=Exchange("toolhub.command", type="direct"),
            routing_key="toolhub.command",
            serializer="pickle",
        )
        producer.publish(
            [(), message, {}],
            headers={"task": "toolhub.execute", "id": "pickled-task", "lang": "py"},
        )
    wait_until(lambda: store.client.llen("toolhub.command") == 0, 5)
    time.sleep(0.5)
    assert not marker.exists()
    assert store.get_record("pickled") is None
    entries = [json.loads(e) for e in store.client.lrange(store.keys.deadletter, 0, -1)]
    (entry,) = [e for e in entries if b"pickled-task" in base64.b64decode(e["raw_b64"])]
    assert entry["reason"] == "malformed" and "content type" in entry["why"]
    assert entry["queue"] == "toolhub.command"


def test_flower_sees_tool_and_call_but_not_arguments(live, connect, store):
    """The worker's ``task-received`` event (what Flower lists a call by) carries the call in
    ``kwargsrepr``; arguments stay redacted by default. The dispatcher sends no ``task-sent``
    (it would cost every call a publish), and the call still reaches its terminal event: here
    ``task-failed`` (the marker's directory does not exist), whose exception names the error
    kind and never the detail that quotes the path."""
    session = connect()
    captured: list[dict] = []
    app = session.executor.app

    def listen() -> None:
        deadline = time.monotonic() + 10
        with app.connection_for_read() as conn:

            def on_event(event: dict) -> None:
                if event.get("type", "").startswith("task-"):
                    captured.append(event)
                uuids = {e["uuid"] for e in captured if "'flower'" in str(e.get("kwargs"))}
                ends = ("task-succeeded", "task-failed")
                done = any(e["type"] in ends and e["uuid"] in uuids for e in captured)
                if done or time.monotonic() > deadline:
                    receiver.should_stop = True

            receiver = app.events.Receiver(conn, handlers={"*": on_event})
            receiver.capture(limit=None, timeout=None, wakeup=True)

    async def go():
        listener = asyncio.ensure_future(asyncio.to_thread(listen))
        await asyncio.sleep(0.5)
        result = await session.call("ticks", {"n": 1, "marker": "/secret/path"}, call_id="flower")
        await asyncio.wait_for(listener, 10)
        return result

    result = asyncio.run(asyncio.wait_for(go(), 20))
    assert result.error is not None and "/secret/path" in result.error.detail
    received = [e for e in captured if "'flower'" in str(e.get("kwargs"))]
    assert received, captured
    assert [e["type"] for e in received] == ["task-received"]
    shown = str(received[0]["kwargs"])
    assert "Test:ticks" in shown and "<redacted>" in shown and "/secret/path" not in shown
    assert received[0]["name"] == "toolhub.execute"
    assert "/secret/path" not in str(captured)
    of_call = [e["type"] for e in captured if e["uuid"] == received[0]["uuid"]]
    assert of_call[0] == "task-received" and of_call[-1] == "task-failed"
    (failed,) = [
        e for e in captured if e["uuid"] == received[0]["uuid"] and e["type"] == "task-failed"
    ]
    assert failed["exception"] == f"ToolError({result.error.kind.value!r})"
    assert "task-sent" not in of_call


def test_an_undispatched_call_ends_for_every_follower(live, store):
    """A call whose message could not be enqueued is failed with a terminal event, so a
    follower in another process (the gateway) is not left waiting."""
    from toolhub import ToolError

    assert store.records.create("undispatched", "run", {"session_id": "s", "name": "noop"})
    failure = CallResult.failure("noop", ToolError.custom("broker_unavailable", "down"))
    store.records.mark_failed_dispatch("undispatched", "s", failure)
    events = asyncio.run(asyncio.wait_for(follow_all(store, "undispatched"), 5))
    assert [e.seq for e in events] == [1]
    assert events[0].item.error.code == "broker_unavailable"
    assert store.get_record("undispatched")["status"] == "failed"


def test_the_one_round_trip_dispatch_pushes_what_kombu_would_push(live, connect, store):
    """The dispatcher pushes the record and the Celery message in one script; the message is
    byte for byte what ``send_task`` would have pushed (but for ids and delivery tag)."""
    import json

    from toolhub.distributed.enqueue import capture_send_task

    app = connect().executor.app
    options = {"kwargs": {"call_id": "x", "n": 1}, "queue": "bench.scratch", "kwargsrepr": "r"}
    captured = capture_send_task(app, "toolhub.execute", task_id="same", **options)
    assert captured is not None
    key, payload = captured
    assert key == b"bench.scratch"
    app.send_task("toolhub.execute", task_id="same", **options)
    pushed = store.client.rpop("bench.scratch")
    ours, theirs = json.loads(payload), json.loads(pushed)
    for envelope in (ours, theirs):
        envelope["properties"].pop("delivery_tag")
    assert ours == theirs
    assert ours["content-type"] == "application/x-msgpack"


def test_the_message_template_rebuilds_the_captured_message(live, connect, store):
    """The per-queue template re-fills id, kwargs and kwargsrepr; the rest is kombu's own."""
    import json

    from toolhub.distributed.enqueue import MessageTemplate, capture_send_task

    app = connect().executor.app
    template = MessageTemplate.make(app, "toolhub.execute", "toolhub.fast", ignore_result=True)
    assert template is not None
    kwargs = {"call_id": "t", "arguments": {"a": [1, "b"]}}
    ours = json.loads(template.build("tid", kwargs, "shown"))
    captured = capture_send_task(
        app,
        "toolhub.execute",
        task_id="tid",
        queue="toolhub.fast",
        kwargs=kwargs,
        kwargsrepr="shown",
        ignore_result=True,
    )
    assert captured is not None and captured[0] == template.key == b"toolhub.fast"
    theirs = json.loads(captured[1])
    assert ours["properties"].pop("delivery_tag") != theirs["properties"].pop("delivery_tag")
    assert ours == theirs


def test_a_retried_dispatch_queues_its_message_once(live, store):
    """The record-and-enqueue script is idempotent per run id (redis-py retries a command
    whose connection dropped), and refuses an id held by a live call."""
    fields = {"session_id": "s", "name": "noop"}
    key = b"bench.retried"
    store.client.delete(key)
    store.client.set(store.keys.config("h"), "{}")
    create = functools.partial(store.records.create_and_enqueue, tenant="t")
    assert create("retried", "run-1", fields, key, b"m1", config_hash="h") == 1
    assert create("retried", "run-1", fields, key, b"m1", config_hash="h") == 1
    assert create("retried", "run-2", fields, key, b"m2", config_hash="h") == 0
    assert store.client.lrange(key, 0, -1) == [b"m1"]
    store.client.delete(key, store.keys.call("retried"), store.keys.config("h"))


def test_an_expired_session_config_is_stored_again_on_the_next_call(live, connect, store):
    """Session keys expire when unused (refreshed by every call); a session that outlived its
    config's TTL stores it again instead of sending calls no worker can build."""
    session = connect()
    config_key = store.keys.config(session.executor.config_hash)
    assert 0 < store.client.ttl(config_key) <= session.executor.settings.session_ttl_seconds
    assert store.client.ttl(store.keys.session(session.session_id)) > 0
    store.client.delete(config_key)
    assert create_rejects_expired(store, session.session_id, session.executor.config_hash)
    result = session.call_sync("noop", {})
    assert not result.is_error, result.prompt_text
    assert store.client.ttl(config_key) > 0


def test_a_sessions_keys_are_refreshed_when_a_call_finds_them_aging(live, connect, store):
    """A call refreshes the session's four keys when less than their TTL less a minute (or a
    hundredth of it) is left, not with every call: a busy session rewrites them about once a
    minute. Each key's TTL stays within that minute of the full TTL while the session is used."""
    session = connect()
    full = session.executor.settings.session_ttl_seconds
    keys = [
        store.keys.config(session.executor.config_hash),
        store.keys.session(session.session_id),
        store.keys.state(session.session_id),
        store.keys.session_tasks(session.session_id),
    ]
    keys = [key for key in keys if store.client.exists(key)]  # state, tasks: once written
    assert len(keys) >= 2
    slack = min(60, full / 100)
    # Fresh enough: left alone.
    for key in keys:
        store.client.expire(key, int(full - slack / 2))
    assert not session.call_sync("noop", {}).is_error
    assert all(store.client.ttl(key) <= full - slack / 2 for key in keys)
    # Aging: all four are set to the full TTL again.
    for key in keys:
        store.client.expire(key, int(full - slack - 5))
    assert not session.call_sync("noop", {}).is_error
    assert all(store.client.ttl(key) > full - slack for key in keys), [
        store.client.ttl(key) for key in keys
    ]


def test_a_tenants_usage_hour_gets_its_ttl_from_its_first_call(live, connect, store):
    """The hour's usage hash is written only by a call's finish, which sets its TTL when the
    call is the hour's first: a later call leaves it, and the totals still count every call."""
    session = connect()
    assert not session.call_sync("noop", {}).is_error
    [hour] = [k for k in store.client.scan_iter(match=store.keys.prefix + "usage:*")]
    first = store.client.ttl(hour)
    assert first > 0
    calls = int(store.client.hget(hour, "calls"))
    store.client.expire(hour, first - 100)
    assert not session.call_sync("noop", {}).is_error
    assert 0 < store.client.ttl(hour) <= first - 100
    assert int(store.client.hget(hour, "calls")) == calls + 1


def test_a_finished_call_keeps_none_of_a_live_calls_fields(live, connect, store):
    """The finish removes what only a live call needs, naming only the fields a claimed call
    can still have (the queue's went at the claim): none is left, and no index holds it."""
    session = connect()
    assert not session.call_sync("noop", {}, call_id="finished-record-fields").is_error
    raw = store.client.hgetall(store.keys.call("finished-record-fields"))
    live_only = {b"message", b"qkey", b"qpos", b"claim_by", b"lease_until", b"handoff", b"fair"}
    live_only |= {b"quota_held", b"waited", b"trace"}
    assert raw[b"status"] == b"succeeded" and not live_only & set(raw), sorted(raw)
    assert int(raw[b"seq"]) == 1 and b"usage" in raw
    assert store.client.zscore(store.keys.pending, "finished-record-fields") is None
    assert store.client.zscore(store.keys.leases, "finished-record-fields") is None


def create_rejects_expired(store, sid: str, config_hash: str) -> bool:
    fields = {"session_id": sid, "name": "noop"}
    code = store.records.create_and_enqueue(
        "expired-probe", "run", fields, b"bench.expired", b"m", config_hash=config_hash, tenant="t"
    )
    queued = store.client.llen(b"bench.expired")
    store.client.delete(b"bench.expired", store.keys.call("expired-probe"))
    return code == 2 and queued == 0


def test_arguments_travel_under_their_canonical_names(live, connect, store):
    """The dispatcher remaps once; the message carries canonical names and the worker only
    validates them (a client name on the wire would be refused as an unknown argument)."""
    config = {
        "tools": [
            {"id": "Test:ticks", "rename": {"n": "count", "delay_ms": "pause"}},
            {"id": "Test:noop"},
        ]
    }
    session = connect(config)

    async def go():
        stream = session.stream("ticks", {"count": 3, "pause": 300}, call_id="canonical")
        first = await anext(stream)
        message = unpack(store.client.hget(store.keys.call("canonical"), "message"))
        rest = [item async for item in stream]
        return first, message, rest

    _, message, rest = asyncio.run(asyncio.wait_for(go(), 30))
    assert message["arguments"] == {"n": 3, "delay_ms": 300}
    assert not rest[-1].is_error and rest[-1].output.value["total"] == 3
