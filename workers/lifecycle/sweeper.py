"""The sweep every worker runs from its lease keeper: calls whose worker was lost get an answer.

* Calls whose lease expired are re-enqueued as the next attempt, or failed with
  ``worker_lost`` when their policy on worker loss is ``fail`` (``distributed/recovery.py``);
  one whose lost attempt recorded a remote MCP task is re-enqueued under either policy, and
  the next attempt polls that task (``resume``).
* Queued calls past their claim deadline whose message left the queue unclaimed (a worker took
  it and died) are re-enqueued from the stored message, or failed once that happened
  ``max_attempts`` times.
* Calls awaiting approval past their expiry that no dispatcher ended (their caller and every
  approver gone) fail with ``approval_expired`` (docs/approvals.md).
* Command cgroups left behind by a dead process on this host are killed and removed, so no
  process of a lost attempt outlives it (``reap_leftovers``: on a thread of its own beside the
  lease keeper, since it may wait on stragglers).

Every step is idempotent across workers: the scripts move each deadline on as they act.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from toolhub.approvals.base import AWAITING, expired, with_decision
from toolhub.distributed.script_replies import RequeueOutcome
from toolhub.fences.celery import reserved_requests

if TYPE_CHECKING:
    from workers.calls.runtime import WorkerRuntime

logger = logging.getLogger("toolhub.worker.sweeper")


def sweep(runtime: WorkerRuntime) -> int:
    """One pass; returns how many calls were recovered (re-enqueued or failed)."""
    return requeue_expired(runtime) + requeue_unclaimed(runtime) + expire_approvals(runtime)


def reap_leftovers(runtime: WorkerRuntime) -> None:
    """Kill and remove the command cgroups a dead worker or holder left on this host. It may
    wait on stragglers (up to a second a cgroup), so it runs beside the lease keeper, never in
    its way: a renewal that waited on it could cost every call of this worker its lease."""
    try:
        reaped = runtime.cgroups.reap_stale()
    except OSError as exc:
        logger.warning("could not reap leftover command cgroups: %s", exc)
        return
    if reaped:
        logger.warning("killed the leftover processes of %d lost command(s)", reaped)


def requeue_expired(runtime: WorkerRuntime) -> int:
    count = 0
    for call_id in runtime.recovery.expired():
        found = runtime.recovery.requeue(call_id)
        if found is None:
            continue
        message, outcome = found
        try:
            if outcome is RequeueOutcome.FAIL:
                if runtime.recovery.fail_lost(call_id, message):
                    logger.warning("call %s lost its worker; failed (policy: fail)", call_id)
                    count += 1
                continue
            logger.warning("call %s lost its worker; re-enqueued (%s)", call_id, outcome)
            runtime.enqueue(message)
            count += 1
        except RedisError as exc:
            logger.warning("could not recover %s: %s", call_id, exc)
    return count


def requeue_unclaimed(runtime: WorkerRuntime) -> int:
    count = 0
    recovery = runtime.recovery
    for call_id in recovery.unclaimed():
        lost = recovery.sweep_unclaimed(call_id)
        if lost is None:
            continue
        try:
            if lost.requeued >= int(lost.message.get("max_attempts") or 1):
                if recovery.fail_unclaimed(lost):
                    logger.warning(
                        "call %s: taken and lost %d times; failed", call_id, lost.requeued
                    )
                    count += 1
                continue
            captured = runtime.capture(lost.message)
            if captured is not None:
                done = recovery.reenqueue(call_id, lost.message["run_id"], *captured)
            else:
                runtime.enqueue(lost.message)
                recovery.count_requeue(call_id)
                done = True
            if done:
                logger.warning(
                    "call %s: taken by a lost worker before its claim; re-enqueued", call_id
                )
                count += 1
        except RedisError as exc:
            logger.warning("could not re-enqueue %s: %s", call_id, exc)
    return count


def expire_approvals(runtime: WorkerRuntime) -> int:
    """End the approvals that expired with nobody left to end them; the script checks the
    expiry again by Redis's clock, so a call approved meanwhile is left alone."""
    approvals = runtime.store.approvals
    count = 0
    for call_id in approvals.due():
        try:
            record = approvals.record(call_id)
            if record is None or record.get("status") != AWAITING:
                approvals.client.zrem(approvals.keys.approvals_due, call_id)
                continue
            approval = with_decision(record.get("approval") or {}, "expired", "toolhub")
            result = expired(str(record.get("name", "")), call_id, record.get("tool"), approval)
            ended = approvals.end(
                call_id, str(record.get("session_id", "")), result, approval, due=True
            )
            if isinstance(ended, int) and ended > 0:
                logger.warning("call %s: its approval expired; failed", call_id)
                count += 1
        except RedisError as exc:
            logger.warning("could not end the expired approval of %s: %s", call_id, exc)
    return count


def reserved_unstarted(runtime: WorkerRuntime) -> list[tuple[str, str]]:
    """(call id, run id) of the messages this worker holds but has not claimed yet (prefetched
    while its threads are busy): the lease keeper keeps their claim deadline moving."""
    registered = {running.call_id for running in runtime.running()}
    calls: list[tuple[str, str]] = []
    for request in reserved_requests():
        kwargs = getattr(request, "kwargs", None) or {}
        cid, run_id = kwargs.get("call_id"), kwargs.get("run_id")
        if isinstance(cid, str) and isinstance(run_id, str) and cid not in registered:
            calls.append((cid, run_id))
    return calls
