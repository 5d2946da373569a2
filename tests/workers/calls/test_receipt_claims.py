"""A claim written as its message arrives (``workers/calls/receipt_claims.py``), on a real
Redis: written only for a message that will start at once and pass its pool thread's checks,
read by that pool thread in place of its own claim, and never left holding a call or a
connection when the message is refused after all. The signal's request is a stand-in with the
three attributes Celery's ``Request`` gives it; end to end, every call of the distributed
suite's real workers goes this way when a thread is free."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from tests.distributed.helpers import queued_call
from toolhub.core import CallResult, ToolOutput
from toolhub.distributed.celery_app import BACKGROUND_TASK, EXECUTE_TASK, make_celery
from toolhub.distributed.settings import Settings
from toolhub.distributed.signing import FleetKey, FleetKeys
from workers.calls.claimed import Claimed, run_claimed
from workers.calls.outcomes import Ended
from workers.calls.refusals import Refusals
from workers.calls.runtime import WorkerRuntime
from workers.lifecycle.metrics import metrics

QUEUE = b"test.receipt"


def _request(
    message: dict[str, Any], *, name: str = EXECUTE_TASK, priority: Any = 0, eta: Any = None
) -> Any:
    return SimpleNamespace(name=name, kwargs=message, delivery_info={"priority": priority}, eta=eta)


def _status(runtime: WorkerRuntime, cid: str) -> str:
    record = runtime.store.get_record(cid)
    assert record is not None
    return str(record["status"])


def _finish(attempt: Claimed) -> Ended:
    cid = attempt.running.call_id
    result = CallResult(
        name="noop", output=ToolOutput.dynamic({"ok": True}), prompt_text="ok", call_id=cid
    )
    return attempt.settle(result)


def test_a_call_claimed_at_receipt_runs_once_on_that_claim(runtime: WorkerRuntime) -> None:
    message = queued_call(runtime.store, "rc-1", QUEUE)
    refusals = Refusals(runtime.store, runtime.name, None)
    before = metrics.claims_at_receipt._value.get()
    runtime.receipts.received(runtime, refusals, _request(message), threads=4)
    assert metrics.claims_at_receipt._value.get() == before + 1
    # Registered at once: a cancel from now on finds its token, the lease keeper renews it.
    assert [run.call_id for run in runtime.running()] == ["rc-1"]
    attempts: list[int] = []

    def work(attempt: Claimed) -> Ended:
        attempts.append(attempt.claim.attempt)
        return _finish(attempt)

    ended = run_claimed(runtime, message, work)
    assert ended == Ended("finished") and attempts == [1]
    assert _status(runtime, "rc-1") == "succeeded"
    assert runtime.running() == [] and len(runtime.receipts) == 0
    # The connection came back with its reply read (Redis did not know the script yet: the
    # pool thread claimed again, which loaded it): the next claim on it reads its own.
    again = queued_call(runtime.store, "rc-2", QUEUE)
    runtime.receipts.received(runtime, refusals, _request(again), threads=4)
    assert run_claimed(runtime, again, work) == Ended("finished") and attempts == [1, 1]
    record = runtime.store.get_record("rc-2")
    assert record is not None and record["attempt"] == 1


def test_only_a_message_that_starts_at_once_is_claimed_at_receipt(runtime: WorkerRuntime) -> None:
    refusals = Refusals(runtime.store, runtime.name, None)
    cases = {
        "rc-sunk": {"priority": 9},  # past its tenant's share: the level gate may hold it
        "rc-background": {"name": BACKGROUND_TASK},  # claimed by its pool thread, as before
        "rc-eta": {"eta": datetime.now(UTC)},  # Celery runs it later: nothing would renew a claim
    }
    for cid, how in cases.items():
        message = queued_call(runtime.store, cid, QUEUE)
        runtime.receipts.received(runtime, refusals, _request(message, **how), threads=4)
    busy = runtime.register("rc-busy")  # the one pool thread runs another call
    message = queued_call(runtime.store, "rc-waits", QUEUE)
    runtime.receipts.received(runtime, refusals, _request(message), threads=1)
    runtime.unregister(busy)
    time.sleep(0.1)  # a claim written would have run by now
    for cid in (*cases, "rc-waits"):
        assert runtime.receipts.take(cid) is None
        assert _status(runtime, cid) == "queued"
    assert runtime.running() == []


def test_an_unsigned_message_is_left_to_its_pool_threads_refusal(runtime: WorkerRuntime) -> None:
    keys = FleetKeys(FleetKey("k" * 43))
    refusals = Refusals(runtime.store, runtime.name, keys)
    unsigned = queued_call(runtime.store, "rc-unsigned", QUEUE)
    runtime.receipts.received(runtime, refusals, _request(unsigned), threads=4)
    assert runtime.receipts.take("rc-unsigned") is None and runtime.running() == []
    assert _status(runtime, "rc-unsigned") == "queued"
    signed = keys.sign_message(
        {**queued_call(runtime.store, "rc-signed", QUEUE), "iat": int(time.time())}
    )
    runtime.store.client.script_load(runtime.records.scripts.claim.script)  # as after a claim
    runtime.receipts.received(runtime, refusals, _request(signed), threads=4)
    assert len(runtime.receipts) == 1
    runtime.receipts.discard(runtime, "rc-signed")  # as if its pool thread refused it after all
    assert len(runtime.receipts) == 0 and runtime.running() == []
    # The claim ran: the call is its attempt's until the lease lapses, then the sweep's.
    assert _status(runtime, "rc-signed") == "running"


def test_a_malformed_message_is_not_claimed_and_nothing_is_raised(runtime: WorkerRuntime) -> None:
    refusals = Refusals(runtime.store, runtime.name, None)
    runtime.receipts.received(runtime, refusals, _request({"no": "call id"}), threads=4)
    runtime.receipts.received(runtime, refusals, SimpleNamespace(name=EXECUTE_TASK), threads=4)
    assert len(runtime.receipts) == 0 and runtime.running() == []


@pytest.fixture
def short_lease(bare_settings: Settings) -> Iterator[WorkerRuntime]:
    """A worker runtime whose leases last 0.3 s."""
    settings = dataclasses.replace(bare_settings, lease_seconds=0.3)
    worker_runtime = WorkerRuntime(settings, make_celery(settings, main="t"), None)
    worker_runtime.store.client.script_load(worker_runtime.records.scripts.claim.script)
    yield worker_runtime
    worker_runtime.close()


def test_a_claim_read_late_is_renewed_and_run_on(short_lease: WorkerRuntime) -> None:
    """Nothing renewed its lease while it waited (a busy machine): the pool thread renews it,
    fenced by its attempt, and runs the call once, as that attempt."""
    runtime = short_lease
    message = queued_call(runtime.store, "rc-late", QUEUE)
    refusals = Refusals(runtime.store, runtime.name, None)
    runtime.receipts.received(runtime, refusals, _request(message), threads=4)
    time.sleep(0.15)  # past a third of the lease
    ran: list[int] = []

    def work(attempt: Claimed) -> Ended:
        ran.append(attempt.claim.attempt)
        return _finish(attempt)

    assert run_claimed(runtime, message, work) == Ended("finished") and ran == [1]
    assert _status(runtime, "rc-late") == "succeeded"


def test_a_late_claim_another_attempt_took_over_is_not_run(short_lease: WorkerRuntime) -> None:
    """Its lease lapsed and another worker claimed the call: the renewal is refused, the pool
    thread claims again (``duplicate``: the other attempt holds it) and runs nothing."""
    runtime = short_lease
    message = queued_call(runtime.store, "rc-taken", QUEUE)
    refusals = Refusals(runtime.store, runtime.name, None)
    runtime.receipts.received(runtime, refusals, _request(message), threads=4)
    time.sleep(0.35)  # past the whole lease
    other = runtime.records.claim(message, "another-worker")
    assert other.action == "run" and other.attempt == 2
    ran: list[int] = []
    ended = run_claimed(runtime, message, lambda attempt: ran.append(1) or _finish(attempt))
    assert ended.said == "duplicate" and ran == [] and runtime.running() == []


def test_a_claim_no_pool_thread_took_up_is_dropped_after_a_lease(
    short_lease: WorkerRuntime,
) -> None:
    runtime = short_lease
    refusals = Refusals(runtime.store, runtime.name, None)
    first = queued_call(runtime.store, "rc-orphan", QUEUE)
    runtime.receipts.received(runtime, refusals, _request(first), threads=4)
    time.sleep(0.35)
    second = queued_call(runtime.store, "rc-next", QUEUE)
    runtime.receipts.received(runtime, refusals, _request(second), threads=4)
    assert runtime.receipts.take("rc-orphan") is None
    assert [run.call_id for run in runtime.running()] == ["rc-next"]
    assert run_claimed(runtime, second, _finish) == Ended("finished")
