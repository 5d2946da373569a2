"""The lease keeper on a real Redis: a run whose call another attempt took over (or a sweep
failed as lost) is stopped (``lease_lost``), a run whose call has a cancel requested is
cancelled, a renewed run goes on and its fence moves on, a run whose own attempt just finished
is left alone without a warning; and the keeper's thread ends when it is stopped."""

from __future__ import annotations

import dataclasses
import logging
import time

from tests.distributed.helpers import queued_call
from toolhub.core import CallResult, ToolOutput
from toolhub.core.tool import LEASE_LOST
from workers.calls.runtime import WorkerRuntime
from workers.lifecycle.leases import LeaseKeeper

QUEUE = b"test.leases"


def _running(runtime: WorkerRuntime, cid: str):  # type: ignore[no-untyped-def]
    message = queued_call(runtime.store, cid, QUEUE)
    running = runtime.register(cid)
    claim = runtime.records.claim(message, runtime.name)
    running.attempt = claim.attempt
    return running


def test_renew_stops_lost_runs_and_cancels_cancelled_ones(runtime: WorkerRuntime) -> None:
    kept = _running(runtime, "l-kept")
    lost = _running(runtime, "l-lost")
    cancelled = _running(runtime, "l-cancel")
    runtime.store.client.hset(runtime.store.keys.call("l-lost"), "attempt", "2")
    runtime.store.client.hset(runtime.store.keys.call("l-cancel"), "cancel_requested", "1")
    before = float(runtime.store.client.hget(runtime.store.keys.call("l-kept"), "lease_until"))
    time.sleep(0.05)
    LeaseKeeper(runtime).renew()
    assert not kept.token.cancelled
    after = float(runtime.store.client.hget(runtime.store.keys.call("l-kept"), "lease_until"))
    assert after > before
    assert lost.token.reason == LEASE_LOST
    assert cancelled.token.reason == "cancelled"


def test_unclaimed_runs_are_left_to_their_claim(runtime: WorkerRuntime) -> None:
    """A run registered but not claimed yet (attempt 0) has no lease to renew."""
    waiting = runtime.register("l-unclaimed")
    LeaseKeeper(runtime).renew()
    assert not waiting.token.cancelled


def test_the_keeper_stops_when_asked(runtime: WorkerRuntime) -> None:
    runtime.settings = dataclasses.replace(runtime.settings, lease_seconds=600.0)
    keeper = LeaseKeeper(runtime)
    keeper.start()
    keeper.stop()
    keeper.join(30)
    assert not keeper.is_alive()


def test_a_call_its_own_attempt_finished_is_not_lost(runtime: WorkerRuntime, caplog) -> None:  # type: ignore[no-untyped-def]
    """The renewal that races the finish: no ``lease lost`` warning, nothing stopped."""
    done = _running(runtime, "l-done")
    swept = _running(runtime, "l-swept")
    result = CallResult(
        name="noop", output=ToolOutput.dynamic({}), prompt_text="ok", call_id="l-done"
    )
    assert runtime.records.finish("l-done", "s", done.attempt, result) > 0
    # The other one was failed by a sweep as lost: its attempt must stop.
    call = runtime.store.keys.call("l-swept")
    runtime.store.client.hset(call, "lease_until", "1")
    assert runtime.recovery.fail_lost("l-swept", {"name": "noop", "session_id": "s"})
    with caplog.at_level(logging.WARNING, logger="toolhub.worker.leases"):
        LeaseKeeper(runtime).renew()
    assert not done.token.cancelled
    assert swept.token.reason == LEASE_LOST
    assert [r.getMessage() for r in caplog.records] == [
        "call l-swept: lease lost; stopping this attempt"
    ]


def test_a_confirmed_renewal_moves_the_runs_fence(runtime: WorkerRuntime) -> None:
    kept = _running(runtime, "l-fence")
    kept.leased_at = 0.0
    before = time.monotonic()
    LeaseKeeper(runtime).renew()
    assert kept.leased_at >= before
    # A run that gave its call up is not renewed again.
    kept.token.cancel(LEASE_LOST)
    kept.leased_at = 0.0
    LeaseKeeper(runtime).renew()
    assert kept.leased_at == 0.0
