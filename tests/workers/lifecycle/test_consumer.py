"""Task events leave a worker in batches (``workers/lifecycle/consumer.py``): the dispatcher holds
them until the consumer's flush window ends instead of publishing from whichever thread sent the
24th, and every event still arrives, in order."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from celery import Celery
from celery.events.dispatcher import EventDispatcher
from redis import Redis

from tests.fixtures_stack import Stack
from toolhub.distributed.celery_app import make_celery
from toolhub.distributed.settings import Settings
from workers.lifecycle.consumer import EVENT_BUFFER_LIMIT, BatchingDispatcher

#: The host name this file's event dispatchers send as.
HOSTNAME = "w@test"


@pytest.fixture
def app(live: Stack) -> Iterator[Celery]:
    app = make_celery(Settings.from_env(live.url), events="workers.lifecycle.consumer:WorkerEvents")
    yield app
    app.close()


def published_batches(live: Stack, publish: Any) -> list[list[dict[str, Any]]]:
    """The task event messages of ``w@test`` (this file's dispatchers) Redis carried while
    ``publish()`` ran, each as its list of events: the live workers' heartbeats go to another
    topic, and their task events (a call another test left finishing) are another host's."""
    client = Redis.from_url(live.url)
    listener = client.pubsub(ignore_subscribe_messages=True)
    listener.psubscribe("*celeryev*")
    listener.get_message(timeout=1)
    publish()
    batches = []
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        message = listener.get_message(timeout=0.1)
        if message is not None and b"celeryev/task" in message["channel"]:
            envelope = msgpack.unpackb(base64.b64decode(_body(message["data"])))
            events = envelope if isinstance(envelope, list) else [envelope]
            ours = [e for e in events if e.get("hostname") == HOSTNAME]
            if ours:
                batches.append(ours)
    listener.close()
    client.close()
    return batches


def _body(data: bytes) -> bytes:
    return json.loads(data)["body"].encode()


def _send(dispatcher: EventDispatcher, n: int) -> None:
    for i in range(n):
        dispatcher.send("task-succeeded", uuid=f"task-{i}", result="'finished'", runtime=0.001)


def test_the_worker_dispatcher_holds_a_burst_for_one_flush(live: Stack, app: Celery) -> None:
    assert issubclass(app.events.Dispatcher, BatchingDispatcher)
    with app.connection_for_write() as conn:
        dispatcher = app.events.Dispatcher(conn, hostname=HOSTNAME, buffer_group=["task"])
        assert dispatcher.buffer_limit == EVENT_BUFFER_LIMIT
        before = published_batches(live, lambda: _send(dispatcher, 100))
        after = published_batches(live, dispatcher.flush)
        dispatcher.close()
    assert before == []
    assert [len(batch) for batch in after] == [100]
    assert [e["uuid"] for e in after[0]] == [f"task-{i}" for i in range(100)]


def test_celery_stock_dispatcher_would_publish_every_24(live: Stack, app: Celery) -> None:
    """What the batching replaces: the same burst costs the sending threads four publishes."""
    with app.connection_for_write() as conn:
        dispatcher = EventDispatcher(conn, hostname=HOSTNAME, buffer_group=["task"], app=app)
        before = published_batches(live, lambda: _send(dispatcher, 100))
        dispatcher.close()
    assert [len(batch) for batch in before] == [24, 24, 24, 24]


def test_every_event_of_a_burst_reaches_a_receiver_in_order(live, connect) -> None:  # type: ignore[no-untyped-def]
    session = connect()
    app = session.executor.app
    captured: dict[str, list[str]] = {}
    calls = 60

    def listen() -> None:
        deadline = time.monotonic() + 15
        with app.connection_for_read() as conn:

            def on_event(event: dict[str, Any]) -> None:
                if event.get("type", "").startswith("task-"):
                    captured.setdefault(event["uuid"], []).append(event["type"])
                done = sum(1 for k in captured.values() if "task-succeeded" in k)
                if done >= calls or time.monotonic() > deadline:
                    receiver.should_stop = True

            receiver = app.events.Receiver(conn, handlers={"*": on_event})
            receiver.capture(limit=None, timeout=None, wakeup=True)

    async def go() -> list[Any]:
        listener = asyncio.ensure_future(asyncio.to_thread(listen))
        await asyncio.sleep(0.5)
        results = await asyncio.gather(
            *(session.call("noop", {}, call_id=f"burst-{i}") for i in range(calls))
        )
        await asyncio.wait_for(listener, 15)
        return results

    results = asyncio.run(asyncio.wait_for(go(), 30))
    assert all(not r.is_error for r in results)
    ours = [kinds for kinds in captured.values() if "task-received" in kinds]
    assert len(ours) == calls
    assert all(k == ["task-received", "task-started", "task-succeeded"] for k in ours), ours
