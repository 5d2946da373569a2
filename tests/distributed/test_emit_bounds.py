"""Redis keeps a bounded number of progress bytes per call and per session (``emit.lua``),
against a real Redis: older progress is trimmed from the front of a stream, a reader sees the
marker saying how much, and the terminal is never lost. The fleet path (a real worker running
a command that prints 4 MiB) is in ``tests/workers/test_stream_flood.py``."""

from __future__ import annotations

import pytest

from tests.distributed.helpers import queued_call
from toolhub.core import CallResult, Progress
from toolhub.core.trimmed import TRIMMED
from toolhub.distributed.codec import encode_item
from toolhub.distributed.records import StreamBounds

QUEUE = b"test.emit.unconsumed"
CHUNK = 64 << 10


@pytest.fixture
def running(store):
    """Calls claimed by a stand-in worker (attempt 1), removed afterwards with the session's
    stream keys."""
    made: list[str] = []

    def claim(cid: str) -> str:
        made.append(cid)
        message = queued_call(store, cid, QUEUE)
        assert store.records.claim(message, "w").action == "run"
        return cid

    yield claim
    keys = [store.keys.session_streams("s"), store.keys.session_stream_bytes("s")]
    for cid in made:
        keys += [store.keys.call(cid), store.keys.events(cid)]
        store.client.zrem(store.keys.leases, cid)
    store.client.delete(*keys)
    store.client.delete(QUEUE)


def _chunk(i: int) -> bytes:
    return encode_item(Progress.of_text(f"{i:06d}" + "x" * (CHUNK - 6)), 1)


def _held(store, cid: str) -> int:
    return sum(len(f[b"d"]) for _, f in store.client.xrange(store.keys.events(cid)))


def test_a_call_keeps_at_most_its_cap_and_readers_see_the_marker(store, running):
    cid = running("emit-flood")
    bounds = StreamBounds(per_call=256 << 10, per_session=16 << 20)
    for i in range(64):  # 4 MiB
        assert store.records.emit(cid, 1, [_chunk(i)], sid="s", bounds=bounds) == i + 1
    held = _held(store, cid)
    assert 0 < held <= bounds.per_call
    events = store.read_events(cid, 0)
    marker = events[0].item
    assert isinstance(marker, Progress) and marker.subkind == TRIMMED
    assert marker.payload["bytes"] + held == sum(len(_chunk(i)) for i in range(64))
    assert "trimmed" in marker.payload["text"] and "task_output" in marker.payload["text"]
    # The marker takes the last trimmed number: the events after it follow on, up to the last.
    assert [e.seq for e in events] == list(range(events[0].seq, 65))
    assert events[-1].item.text.startswith("000063")
    # A reader that already saw past the trimmed part reads no marker.
    assert store.read_events(cid, 63)[0].seq == 64 and len(store.read_events(cid, 63)) == 1
    # The terminal still lands and is read after the kept progress.
    result = CallResult(name="noop", prompt_text="done", call_id=cid)
    assert store.records.finish(cid, "s", 1, result) == 65
    assert store.read_events(cid, 0)[-1].item.prompt_text == "done"


def test_a_session_keeps_at_most_its_cap_oldest_calls_trimmed_first(store, running):
    bounds = StreamBounds(per_call=1 << 20, per_session=1 << 20)
    first, second = running("emit-old"), running("emit-new")
    for i in range(12):
        store.records.emit(first, 1, [_chunk(i)], sid="s", bounds=bounds)
    for i in range(12):
        store.records.emit(second, 1, [_chunk(i)], sid="s", bounds=bounds)
    total = _held(store, first) + _held(store, second)
    assert total <= bounds.per_session
    # The older call gave up its progress first (its newest entry stays); the newer kept most.
    assert _held(store, first) <= len(_chunk(0)) < _held(store, second)
    assert (
        int(store.client.hget(store.keys.session_stream_bytes("s"), "total")) <= bounds.per_session
    )
    assert store.read_events(first, 0)[0].item.subkind == TRIMMED


def test_an_oldest_call_with_nothing_counted_leaves_the_session_count_as_is(store, running):
    """The session's count of a call can be gone (it expired, or was all trimmed away): taking
    0 from the total must not fail the emit (Lua's ``-0`` reaches Redis as ``"-0"``)."""
    bounds = StreamBounds(per_call=1 << 20, per_session=256 << 10)
    first, second = running("emit-uncounted"), running("emit-after")
    store.records.emit(first, 1, [_chunk(0)], sid="s", bounds=bounds)
    store.client.hdel(store.keys.session_stream_bytes("s"), store.keys.call(first))
    for i in range(8):
        assert store.records.emit(second, 1, [_chunk(i)], sid="s", bounds=bounds) == i + 1
    assert _held(store, second) <= bounds.per_session
