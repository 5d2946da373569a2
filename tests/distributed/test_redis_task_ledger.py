"""The ledger of remote MCP tasks against a real Redis, under a prefix of its own (no worker
sweeps it): a task is recorded only by the attempt that owns the call with a live lease, with
the call record's TTL; a lost attempt that left one is resumed even under the ``fail`` policy
(the claim says so and counts it); one that left none fails as before; the terminal moves the
record's TTL on and a new call under the same id drops it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from tests.fixtures_stack import Stack
from toolhub import CallResult, ToolError
from toolhub.backends.remote_task_ledger import CallAttempt, RemoteTask
from toolhub.distributed.codec import pack
from toolhub.distributed.keys import Keys
from toolhub.distributed.recovery import Recovery
from toolhub.distributed.redis_task_ledger import RedisRemoteTaskLedger
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore, connect
from toolhub.ports import free_port

pytestmark = pytest.mark.timeout(120)

TASK = RemoteTask("far", "ticks", "task_abc", attempt=1, poll_interval_ms=500)


@pytest.fixture
def own(live: Stack) -> Iterator[RedisStore]:
    settings = dataclasses.replace(Settings.from_env(live.url), prefix="t-remote:")
    store = RedisStore.from_settings(settings)
    yield store
    for key in store.client.scan_iter("t-remote:*"):
        store.client.delete(key)
    store.close()


def _running(store: RedisStore, cid: str, on_lost: str = "fail", run_id: str = "run-1") -> dict:
    """A call claimed by attempt 1, as a dispatcher and a worker leave it."""
    message = {
        "call_id": cid,
        "run_id": run_id,
        "session_id": "s",
        "name": "use_tool",
        "tool": "Main:use_tool",
        "max_attempts": 3,
    }
    fields = {
        "session_id": "s",
        "name": "use_tool",
        "tool": "Main:use_tool",
        "max_attempts": 3,
        "on_lost": on_lost,
        "message": pack(message),
    }
    assert store.records.create(cid, run_id, fields) == 1
    claim = store.records.claim(message, "w-lost")
    assert claim.action == "run" and claim.attempt == 1 and not claim.resumed
    return message


def _lose(store: RedisStore, cid: str) -> None:
    """The lease of the running attempt runs out (its worker died)."""
    store.client.hset(store.keys.call(cid), "lease_until", "0")
    store.client.zadd(store.keys.leases, {cid: 0})


def test_only_the_owning_attempt_records_a_task_with_the_call_records_ttl(own) -> None:
    ledger = RedisRemoteTaskLedger(own.client, own.keys)
    _running(own, "c1")
    assert ledger.current("c1") == CallAttempt(1, 3, None, 0)
    assert not ledger.remember("c1", 2, TASK)  # not the attempt that owns the call
    assert ledger.remember("c1", 1, TASK)
    found = ledger.current("c1")
    assert found == CallAttempt(1, 3, TASK, 0) and found.inherited is None
    call_ttl = own.client.pttl(own.keys.call("c1"))
    assert abs(own.client.pttl(own.keys.remote_task("c1")) - call_ttl) < 2_000
    _lose(own, "c1")
    assert not ledger.remember("c1", 1, TASK)  # a zombie past its lease plants nothing
    # A call id with no running record (a dispatcher's own external call) has no ledger entry.
    assert ledger.current("never-dispatched") is None


def test_a_lost_attempt_with_a_task_is_resumed_even_under_the_fail_policy(own) -> None:
    ledger, recovery = RedisRemoteTaskLedger(own.client, own.keys), Recovery(own.records)
    message = _running(own, "c2", on_lost="fail")
    assert ledger.remember("c2", 1, TASK)
    _lose(own, "c2")
    assert "c2" in recovery.expired()
    requeued = recovery.requeue("c2")
    assert requeued is not None and requeued[1] == "resume"
    claim = own.records.claim(message, "w-next")
    assert (claim.action, claim.attempt, claim.lost, claim.resumed) == ("run", 2, 1, True)
    found = ledger.current("c2")
    assert found is not None and found.inherited == TASK and found.lost == 1
    record = own.get_record("c2")
    assert record["resumed"] == 1
    assert [a.get("outcome") for a in record["attempts"]] == ["worker_lost", None]


def test_a_lost_attempt_without_a_task_keeps_its_policy(own) -> None:
    recovery = Recovery(own.records)
    message = _running(own, "c3", on_lost="fail")
    _lose(own, "c3")
    requeued = recovery.requeue("c3")
    assert requeued is not None and requeued[1] == "fail"
    assert recovery.fail_lost("c3", message)
    error = own.get_record("c3")["result"]["error"]
    assert error["details"]["code"] == "worker_lost" and error["details"]["may_have_run"] is True
    # A redelivered message finds the same: no task, policy `fail`.
    _running(own, "c4", on_lost="fail")
    _lose(own, "c4")
    assert own.records.claim({**message, "call_id": "c4"}, "w-next").action == "lost_fail"


def test_the_terminal_keeps_the_task_as_long_as_the_record_and_a_new_call_drops_it(own) -> None:
    ledger = RedisRemoteTaskLedger(own.client, own.keys)
    _running(own, "c5")
    assert ledger.remember("c5", 1, TASK)
    result = CallResult(name="use_tool", prompt_text="done", call_id="c5")
    assert own.records.finish("c5", "s", 1, result) > 0
    ttl = own.settings.record_ttl_seconds
    assert ttl - 5 <= own.client.ttl(own.keys.remote_task("c5")) <= ttl
    assert ledger.current("c5") is None  # finished: nothing to resume
    _running(own, "c5", run_id="run-2")  # the id reused by a new call (a run of its own)
    assert own.client.exists(own.keys.remote_task("c5")) == 0


def test_an_unreachable_redis_is_a_typed_error_never_a_guess_of_no_task() -> None:
    """Guessing "no earlier task" while Redis cannot say would call the tool a second time: the
    attempt answers ``redis_unavailable`` and does not call it (a real client, nothing listening
    on the port)."""
    client = connect(f"redis://127.0.0.1:{free_port()}/0")
    ledger = RedisRemoteTaskLedger(client, Keys("t-remote:"))
    with pytest.raises(ToolError) as caught:
        ledger.current("c-unreachable")
    assert caught.value.code == "redis_unavailable"
    assert "the tool was not called" in caught.value.detail
    assert ledger.remember("c-unreachable", 1, TASK) is False
