"""What every task body does around its work: claim the call, then run it as that attempt.

``toolhub.execute`` and ``toolhub.background`` differ only in the work itself. Both register the
call before claiming it (so a cancel that lands right after the claim finds its token), drop a
message the claim says not to run (a duplicate, a finished or stale call; a ``replayed`` one
goes back to the task, which refuses it as ``refusals.py`` refuses a bad signature), fail one
whose policy on worker loss says so, count the attempt in the metrics, and put a ``retry``
marker in the stream when an earlier attempt was lost. ``settle`` publishes what the work
returned. The work runs inside the attempt's usage meter (``usage.py``). What the message
came to is an ``Ended`` (``outcomes.py``): what Flower is told about it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from toolhub.core import CallResult, Progress, ToolError
from toolhub.core.tool import HANDOFF, INTERNAL_REASONS
from toolhub.core.usage import metering
from toolhub.distributed.celery_app import BACKGROUND_TASK
from toolhub.distributed.claims import Claim
from toolhub.distributed.script_replies import ClaimAction
from toolhub.errors import ErrorCode
from toolhub.hooks import after_for_message
from toolhub.tracing import worker as tracing
from workers.lifecycle.metrics import Attempt, metrics, outcome, tool_label

from .emitter import Emitter
from .outcomes import CANCELLED, Ended
from .refusals import REPLAYED
from .running import Running
from .runtime import WorkerRuntime
from .usage import AttemptUsage

logger = logging.getLogger("toolhub.worker")


@dataclass(slots=True)
class Claimed:
    """One attempt this worker owns: its token, its claim, where its events go."""

    runtime: WorkerRuntime
    message: dict[str, Any]
    running: Running
    claim: Claim
    emitter: Emitter
    metric: Attempt

    def settle(self, result: CallResult) -> Ended:
        with tracing.phase(self.running.call_id, "toolhub.deliver"):
            settled = settle(self.runtime, self.running, self.emitter, result)
        self.metric.outcome = outcome(self.running, settled, result)
        return Ended.settled(settled, result)


def run_claimed(
    runtime: WorkerRuntime, message: dict[str, Any], work: Callable[[Claimed], Ended]
) -> Ended:
    """Claim ``message``'s call and hand the attempt to ``work``; returns what happened (for
    the worker log and Flower)."""
    sent = runtime.receipts.take(message["call_id"])  # claimed at receipt (``receipt_claims.py``)
    if sent is not None:
        running = sent.running
    else:
        running = runtime.register(
            message["call_id"], background=message.get("task") == BACKGROUND_TASK
        )

    def take() -> Claim:
        replied = runtime.receipts.reply(sent, runtime.records) if sent is not None else None
        return runtime.records.claim(message, runtime.name, replied=replied)

    try:
        claim = tracing.claim(running.call_id, take)
        return run_attempt(runtime, message, running, claim, work)
    finally:
        runtime.unregister(running)


def run_attempt(
    runtime: WorkerRuntime,
    message: dict[str, Any],
    running: Running,
    claim: Claim,
    work: Callable[[Claimed], Ended],
) -> Ended:
    """Act on ``claim``, made for ``running``: drop the message, fail the call, or run
    ``work`` as the claimed attempt."""
    if claim.action is ClaimAction.LOST_FAIL:
        runtime.recovery.fail_lost(running.call_id, message)
        logger.warning("call %s: its worker was lost; failed (policy: fail)", running.call_id)
        return Ended.custom(claim.action, ErrorCode.WORKER_LOST)
    if claim.action is ClaimAction.REPLAYED:
        return Ended(REPLAYED)  # refused by the task (``celery_tasks.py``, ``refusals.py``)
    if claim.action is not ClaimAction.RUN:
        metrics.dropped.labels(claim.action).inc()
        logger.info(
            "call %s: %s (attempt %d); message dropped",
            running.call_id,
            claim.action,
            claim.attempt,
        )
        return dropped(runtime, running.call_id, claim)
    running.attempt = claim.attempt
    if not runtime.replication.confirm(runtime.name):
        metrics.claims_unreplicated.inc()
    usage = AttemptUsage.of(message)
    with (
        metrics.attempt(tool_label(message), claim.attempt) as metric,
        metering(usage.metered.meter),
    ):
        emitter = Emitter(
            runtime, running, message["session_id"], usage, after_for_message(message)
        )
        if claim.attempt > 1:
            emitter.progress(retry_marker(claim.attempt))
        attempt = Claimed(runtime, message, running, claim, emitter, metric)
        try:
            return work(attempt)
        except Exception as exc:
            # Not a lost worker: retrying would fail the same way, attempt after attempt.
            logger.exception("call %s: the worker failed handling it", running.call_id)
            return attempt.settle(worker_failed(message, exc))


def dropped(runtime: WorkerRuntime, call_id: str, claim: Claim) -> Ended:
    """A message the claim said not to run. ``cancelled`` and ``exhausted``: the claim wrote
    the call's terminal (cancelled; failed, its worker lost too often). ``finished`` before any
    attempt ran: the call ended while queued, usually cancelled (one read tells). Any other
    drop (a duplicate delivery, a stale or gone call) did not end the call."""
    if claim.action is ClaimAction.CANCELLED:
        return Ended(claim.action, CANCELLED)
    if claim.action is ClaimAction.EXHAUSTED:
        return Ended.custom(claim.action, ErrorCode.WORKER_LOST)
    if claim.action is ClaimAction.FINISHED and claim.attempt == 0:
        try:
            record = runtime.store.get_record(call_id) or {}
        except RedisError:
            record = {}
        if record.get("status") == "cancelled":
            return Ended(claim.action, CANCELLED)
    return Ended(claim.action)


def worker_failed(message: dict[str, Any], exc: Exception) -> CallResult:
    """The answer to a call the worker itself failed on: typed, said once, never retried."""
    error = ToolError.custom(
        ErrorCode.WORKER_FAILED,
        f"the worker failed handling this call ({type(exc).__name__}: {exc}); it is not "
        "retried, and what it started may have partly run",
        may_have_run=True,
    )
    return CallResult.failure(
        message.get("name", "call"), error, tool_id=message.get("tool"), call_id=message["call_id"]
    )


def retry_marker(attempt: int) -> Progress:
    """Tells the consumer that what follows comes from a new attempt (its worker was lost)."""
    return Progress.custom("retry", {"attempt": attempt})


def settle(runtime: WorkerRuntime, running: Running, emitter: Emitter, result: CallResult) -> str:
    """Publish the terminal, or hand the call back / leave it to its new owner."""
    reason = running.token.reason if running.token.cancelled else None
    if reason == HANDOFF:
        message = runtime.records.handoff(running.call_id, running.attempt)
        if message is not None:
            runtime.enqueue(message)
            logger.info("call %s: handed back to the queue", running.call_id)
        return "handed_back"
    if reason in INTERNAL_REASONS:
        return str(reason)
    if emitter.finished:
        return "cancelled"
    return "finished" if emitter.finish(result) else "abandoned"
