"""The ``toolhub.execute`` task body: claim the call, run it through the tool pipeline, publish.

The pipeline is the embedded one, unchanged: ``ToolSet.prepare`` (lookup, remap, validate) and
then either ``ToolSet.execute_sync`` (plain sync tools, inline on the pool thread, as the
embedded fast path does) or the ``LocalExecutor`` stream (``ToolSet.execute`` raced against the
cancel token). Only the edges differ: the arguments come from the message, each item goes to
the call's Redis stream, and session state arrives with the claim (tools change it through
``Container.update``, which writes through to Redis with compare-and-set).

Cancellation never waits on the tool: a streaming call's executor answers ``cancelled`` at
once; for an inline sync call the cancel itself publishes the ``cancelled`` terminal (the tool's
late result is then refused by the record, which is no longer running).
"""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError

from toolhub.core import CallResult, Progress, ToolError
from toolhub.distributed.records import cancelled_result
from toolhub.distributed.recovery import announce_rerun
from toolhub.toolset import Prepared

from .emitter import Emitter
from .metrics import metrics, outcome, tool_label
from .runtime import HANDOFF, INTERNAL_REASONS, Running, WorkerRuntime
from .toolsets import SessionRuntime

logger = logging.getLogger("toolhub.worker")


def run_call(runtime: WorkerRuntime, message: dict[str, Any]) -> str:
    """Run one delivered message; returns what happened (for the worker log)."""
    running = runtime.register(message["call_id"])
    try:
        claim = runtime.records.claim(message, runtime.name)
        if claim.action == "lost_fail":
            runtime.recovery.fail_lost(running.call_id, message)
            logger.warning("call %s: its worker was lost; failed (policy: fail)", running.call_id)
            return claim.action
        if claim.action != "run":
            metrics.dropped.labels(claim.action).inc()
            logger.info(
                "call %s: %s (attempt %d); message dropped",
                running.call_id,
                claim.action,
                claim.attempt,
            )
            return claim.action
        running.attempt = claim.attempt
        with metrics.attempt(tool_label(message), claim.attempt) as attempt:
            emitter = Emitter(runtime, running, message["session_id"])
            if claim.attempt > 1:
                emitter.progress(retry_marker(claim.attempt))
            prepared = _prepare(runtime, message, claim.state or {})
            if isinstance(prepared, CallResult):
                result = prepared
            else:
                session, ready = prepared
                if ready.entry.handle.is_sync:
                    result = _run_inline(session, ready, running, emitter)
                else:
                    result = runtime.loop().run_until_complete(
                        _stream(session, ready, running, emitter)
                    )
            if claim.lost:
                result = announce_rerun(result, claim.attempt, int(message["max_attempts"]))
            settled = settle(runtime, running, emitter, result)
            attempt.outcome = outcome(running, settled, result)
            return settled
    finally:
        runtime.unregister(running)


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


def _prepare(
    runtime: WorkerRuntime, message: dict[str, Any], state: dict[bytes, bytes]
) -> CallResult | tuple[SessionRuntime, Prepared]:
    name, cid = message["name"], message["call_id"]
    try:
        session = runtime.toolsets.get(message["session_id"], message["config_hash"])
        session.state.apply(state, session.toolset.container)
        return session, session.toolset.prepare(name, message["arguments"], cid)
    except ToolError as err:
        return CallResult.failure(name, err, tool_id=message.get("tool"), call_id=cid)
    except RedisError as exc:
        return CallResult.failure(
            name,
            ToolError.custom("redis_unavailable", f"worker could not load the session: {exc}"),
            tool_id=message.get("tool"),
            call_id=cid,
        )


def _run_inline(
    session: SessionRuntime, prepared: Prepared, running: Running, emitter: Emitter
) -> CallResult:
    prepared.ctx.cancel = running.token

    def answer_cancel() -> None:
        if running.token.reason not in INTERNAL_REASONS:
            emitter.finish(
                cancelled_result(
                    prepared.name, running.call_id, prepared.entry.fq_id, running.token.reason
                )
            )

    remove = running.token.on_cancel(answer_cancel)
    try:
        return session.toolset.execute_sync(prepared)
    finally:
        remove()


async def _stream(
    session: SessionRuntime, prepared: Prepared, running: Running, emitter: Emitter
) -> CallResult:
    prepared.ctx.cancel = running.token
    result: CallResult | None = None
    async for item in session.executor.stream(prepared):
        if isinstance(item, CallResult):
            result = item
        else:
            emitter.progress(item)
    assert result is not None
    return result
