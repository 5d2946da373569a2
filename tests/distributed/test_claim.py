"""The claim's branches that write a terminal, against a real Redis: a call whose worker was
lost too often fails, a call with a cancel requested ends cancelled. The claim sends those
terminals only when the script asks for them (``terminal``), so these tests also check that a
claim without them changes nothing and that the worker's second claim finishes the job."""

from __future__ import annotations

import pytest

from tests.distributed.helpers import queued_call
from toolhub.distributed.codec import unpack

QUEUE = b"test.claim.unconsumed"


@pytest.fixture
def created(store):
    """A queued call (on a queue no worker consumes) and its message; removed afterwards."""
    made: list[str] = []

    def create(cid: str, max_attempts: int = 3) -> dict:
        made.append(cid)
        return queued_call(store, cid, QUEUE, max_attempts, on_lost="rerun")

    yield create
    for cid in made:
        store.client.delete(store.keys.call(cid), store.keys.events(cid))
        store.client.zrem(store.keys.leases, cid)
    store.client.delete(QUEUE)


def _lose(store, cid: str) -> None:
    """Its worker died: the lease ran out."""
    store.client.hset(store.keys.call(cid), "lease_until", "0")


def _bare_claim(store, message: dict) -> list:
    """The first claim a worker sends: the script with no terminals."""
    cid = message["call_id"]
    return store.records.scripts.claim(
        keys=store.records.call_keys(cid, "s"),
        args=[cid, "run-1", "w", 30, 600, b"", b"", b"", b""],
    )


def test_a_call_lost_too_often_fails_with_the_terminal_the_second_claim_brings(store, created):
    message = created("lost-often", max_attempts=2)
    assert store.records.claim(message, "w1").action == "run"
    _lose(store, "lost-often")
    store.client.hset(store.keys.call("lost-often"), "lost", 1)
    before = store.client.hgetall(store.keys.call("lost-often"))
    # Without the terminals, the script asks for them and changes nothing.
    assert _bare_claim(store, message)[0] == b"terminal"
    assert store.client.hgetall(store.keys.call("lost-often")) == before
    claim = store.records.claim(message, "w2")
    assert (claim.action, claim.attempt) == ("exhausted", 1)
    record = store.get_record("lost-often")
    assert record["status"] == "failed" and record["lost"] == 2
    error = record["result"]["error"]
    assert error["details"]["code"] == "worker_lost" and "lost 2 time(s)" in error["detail"]
    assert record["attempts"][-1]["outcome"] == "worker_lost"
    assert store.client.zscore(store.keys.leases, "lost-often") is None


def test_a_lost_call_with_attempts_left_runs_again_without_any_terminal(store, created):
    message = created("lost-once", max_attempts=3)
    assert store.records.claim(message, "w1").action == "run"
    _lose(store, "lost-once")
    reply = _bare_claim(store, message)
    assert (reply[0], int(reply[1]), int(reply[3])) == (b"run", 2, 1)
    assert store.get_record("lost-once")["status"] == "running"


@pytest.mark.parametrize("running", [False, True], ids=["queued", "lost while running"])
def test_a_call_with_a_cancel_requested_ends_cancelled(store, created, running):
    cid = f"cancel-requested-{running}"
    message = created(cid)
    if running:
        assert store.records.claim(message, "w1").action == "run"
        _lose(store, cid)
    store.client.hset(store.keys.call(cid), "cancel_requested", "1")
    before = store.client.hgetall(store.keys.call(cid))
    assert _bare_claim(store, message)[0] == b"terminal"
    assert store.client.hgetall(store.keys.call(cid)) == before
    assert store.records.claim(message, "w2").action == "cancelled"
    record = store.get_record(cid)
    assert record["status"] == "cancelled"
    assert record["result"]["error"]["kind"] == "cancelled"
    assert unpack(store.client.hget(store.keys.call(cid), "result"))["call_id"] == cid


def test_a_fresh_claim_needs_no_terminal(store, created):
    message = created("fresh")
    reply = _bare_claim(store, message)
    assert (reply[0], int(reply[1])) == (b"run", 1)
