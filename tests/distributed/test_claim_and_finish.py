"""``CLAIM_AND_FINISH``, an optimistic run's claim and finish in one step, against a real Redis:
it takes only an untouched call whose session state is still the version the tool read, and
every refusal leaves the record exactly as it was (the worker then claims as usual)."""

from __future__ import annotations

import pytest

from tests.distributed.helpers import queued_call
from toolhub.core import CallResult

QUEUE = b"test.claim_and_finish.unconsumed"


@pytest.fixture
def created(store):
    made: list[str] = []

    def create(cid: str) -> dict:
        made.append(cid)
        return queued_call(store, cid, QUEUE, on_lost="rerun")

    yield create
    for cid in made:
        store.client.delete(store.keys.call(cid), store.keys.events(cid))
        store.client.zrem(store.keys.leases, cid)
    store.client.delete(QUEUE, store.keys.state("s"))


def _result(cid: str) -> CallResult:
    return CallResult(name="noop", prompt_text="ok", call_id=cid)


def _state_version(store) -> int:
    return int(store.client.hget(store.keys.state("s"), "__v") or 0)


def test_an_untouched_call_is_claimed_and_finished_as_attempt_one(store, created):
    message = created("one-step")
    seq = store.records.claim_and_finish(message, "w1", _state_version(store), 0.25, _result("x"))
    assert seq == 1
    record = store.get_record("one-step")
    assert record["status"] == "succeeded" and record["attempt"] == 1
    assert record["worker"] == "w1" and record["result"]["prompt_text"] == "ok"
    [attempt] = record["attempts"]
    assert attempt["worker"] == "w1" and attempt["outcome"] == "succeeded"
    # It started when the tool did, a quarter second before the step.
    assert attempt["finished_at"] - attempt["started_at"] == pytest.approx(0.25, abs=0.01)
    assert record["started_at"] == attempt["started_at"]
    assert "claim_by" not in record and "qkey" not in record
    assert store.client.zscore(store.keys.pending, "one-step") is None
    assert not store.client.exists(store.keys.call("one-step") + ":payload")


def _cancelled(store, cid: str) -> None:
    assert store.records.cancel(cid) == "cancelled"


def _claimed(store, cid: str) -> None:
    assert store.records.claim({"call_id": cid, "run_id": "run-1", "session_id": "s"}, "w2")


def _requested(store, cid: str) -> None:
    store.client.hset(store.keys.call(cid), "cancel_requested", "1")


@pytest.mark.parametrize(
    "meanwhile",
    [_cancelled, _claimed, _requested],
    ids=["cancelled while it ran", "claimed by another delivery", "cancel requested"],
)
def test_a_call_touched_meanwhile_is_refused_and_left_as_it_is(store, created, meanwhile):
    cid = f"touched-{meanwhile.__name__}"
    message = created(cid)
    meanwhile(store, cid)
    before = store.client.hgetall(store.keys.call(cid))
    assert store.records.claim_and_finish(message, "w1", 0, 0.0, _result(cid)) == -1
    assert store.client.hgetall(store.keys.call(cid)) == before


def test_another_message_of_the_call_is_refused(store, created):
    message = created("other-run")
    stray = {**message, "run_id": "run-0"}
    assert store.records.claim_and_finish(stray, "w1", 0, 0.0, _result("x")) == -1
    assert store.get_record("other-run")["status"] == "queued"


def test_a_state_moved_since_the_tool_read_it_is_refused_and_changes_nothing(store, created):
    message = created("state-moved")
    read = _state_version(store)
    store.client.hincrby(store.keys.state("s"), "__v", 1)  # another call wrote the state
    before = store.client.hgetall(store.keys.call("state-moved"))
    assert store.records.claim_and_finish(message, "w1", read, 0.0, _result("x")) == -2
    assert store.client.hgetall(store.keys.call("state-moved")) == before
    assert store.client.zscore(store.keys.pending, "state-moved") is not None
    # The claim that follows runs it, with the state as it is now.
    claim = store.records.claim(message, "w1")
    assert (claim.action, claim.attempt) == ("run", 1)
    assert int(claim.state[b"__v"]) == read + 1
