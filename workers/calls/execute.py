"""The ``toolhub.execute`` task body: claim the call, run it through the tool pipeline, publish.

The pipeline is the embedded one, unchanged: ``ToolSet.prepare_canonical`` (lookup and
validation of the canonical arguments the dispatcher sent; remapping happened there) and
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

from toolhub.backends.capture import io_reason
from toolhub.core import CallResult, ToolError, drain
from toolhub.core.tool import INTERNAL_REASONS
from toolhub.distributed.records import cancelled_result
from toolhub.distributed.recovery import announce_rerun
from toolhub.errors import ErrorCode
from toolhub.toolset import Prepared
from toolhub.tracing.worker import running as traced_run

from .claimed import Claimed, run_claimed
from .emitter import Emitter
from .outcomes import Ended
from .running import Running
from .runtime import WorkerRuntime
from .toolsets import SessionRuntime

logger = logging.getLogger("toolhub.worker")


def run_call(runtime: WorkerRuntime, message: dict[str, Any]) -> Ended:
    """Run one delivered message; returns what happened (for the worker log and Flower)."""
    return run_claimed(runtime, message, _execute)


def _execute(attempt: Claimed) -> Ended:
    message = attempt.message
    with attempt.runtime.toolsets.in_use(message["session_id"], message.get("config_hash", "")):
        return _execute_in(attempt)


def _execute_in(attempt: Claimed) -> Ended:
    runtime, message, claim = attempt.runtime, attempt.message, attempt.claim
    prepared = _prepare(runtime, message, claim.state or {})
    if isinstance(prepared, CallResult):
        result = prepared
    else:
        session, ready = prepared
        with traced_run(attempt.running.call_id):
            if ready.entry.handle.is_sync:
                result = _run_inline(session, ready, attempt.running, attempt.emitter)
            else:
                result = runtime.loop().run_until_complete(
                    _stream(session, ready, attempt.running, attempt.emitter)
                )
    if claim.lost and not claim.resumed:
        result = announce_rerun(result, claim.attempt, int(message["max_attempts"]))
    return attempt.settle(result)


def _prepare(
    runtime: WorkerRuntime, message: dict[str, Any], state: dict[bytes, bytes]
) -> CallResult | tuple[SessionRuntime, Prepared]:
    name, cid = message["name"], message["call_id"]
    try:
        session = runtime.toolsets.get(message["session_id"], message["config_hash"])
        session.state.apply(state, session.toolset.container)
        return session, session.toolset.prepare_canonical(name, message["arguments"], cid)
    except ToolError as err:
        return CallResult.failure(name, err, tool_id=message.get("tool"), call_id=cid)
    except RedisError as exc:
        return CallResult.failure(
            name,
            ToolError.custom(
                ErrorCode.REDIS_UNAVAILABLE, f"worker could not load the session: {exc}"
            ),
            tool_id=message.get("tool"),
            call_id=cid,
        )
    except OSError as exc:  # the session's files under $TOOLHUB_HOME: a full or failing disk
        error = ToolError.custom(
            ErrorCode.START_FAILED,
            f"The call was not started: this worker could not set up the session's files "
            f"({io_reason(exc)}). Nothing ran. Try again later.",
            reason=io_reason(exc),
            may_have_run=False,
        )
        return CallResult.failure(name, error, tool_id=message.get("tool"), call_id=cid)


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
    return await drain(session.executor.stream(prepared), emitter.progress)
