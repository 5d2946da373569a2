"""Around every task body: the claim decides, on a real Redis, whether the work runs at all,
and what it returns (or raises) becomes the call's one terminal."""

from __future__ import annotations

from typing import Any

from tests.distributed.helpers import queued_call
from toolhub.core import CallResult, ToolOutput
from workers.calls.claimed import Claimed, run_claimed
from workers.calls.outcomes import Ended
from workers.calls.runtime import WorkerRuntime

QUEUE = b"test.claimed"


def _ok(cid: str) -> CallResult:
    return CallResult(
        name="noop", output=ToolOutput.dynamic({"ok": True}), prompt_text="ok", call_id=cid
    )


class Work:
    def __init__(self, outcome: CallResult | Exception) -> None:
        self.outcome = outcome
        self.attempts: list[int] = []

    def __call__(self, attempt: Claimed) -> Ended:
        self.attempts.append(attempt.claim.attempt)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return attempt.settle(self.outcome)


def _message(runtime: WorkerRuntime, cid: str) -> dict[str, Any]:
    return queued_call(runtime.store, cid, QUEUE)


def test_a_claimed_call_runs_once_and_publishes_its_result(runtime: WorkerRuntime) -> None:
    message = _message(runtime, "c-ok")
    work = Work(_ok("c-ok"))
    ended = run_claimed(runtime, message, work)
    assert ended == Ended("finished") and work.attempts == [1]
    record = runtime.store.get_record("c-ok")
    assert record is not None and record["status"] == "succeeded"
    events = runtime.store.read_events("c-ok")
    assert events[-1].item.output is not None  # the terminal, once
    assert runtime.running() == []  # unregistered after the attempt
    again = run_claimed(runtime, message, work)  # a duplicate delivery: nothing runs
    assert again.said == "finished" and again.kind is None and work.attempts == [1]


def test_a_worker_crash_is_answered_once_and_never_retried(runtime: WorkerRuntime) -> None:
    message = _message(runtime, "c-crash")
    ended = run_claimed(runtime, message, Work(RuntimeError("boom")))
    assert ended.kind == "custom" and ended.code == "worker_failed"
    record = runtime.store.get_record("c-crash")
    assert record is not None and record["status"] == "failed"
    error = runtime.store.read_events("c-crash")[-1].item.error
    assert error is not None and "RuntimeError: boom" in error.detail


def test_a_call_cancelled_while_queued_never_runs(runtime: WorkerRuntime) -> None:
    message = _message(runtime, "c-cancel")
    assert runtime.records.cancel("c-cancel") == "cancelled"
    work = Work(_ok("c-cancel"))
    ended = run_claimed(runtime, message, work)
    assert ended.kind == "cancelled" and work.attempts == []
