"""Optimistic runs: a fresh call of a read-only, synchronous tool runs before its claim.

Every call costs its worker a claim, a Redis round trip before the tool starts: it hands over
the session state, marks the call running, counts the attempt, and stops a cancelled call or
a second delivery. For a short read-only call that round trip is a large share of the call's
time. Here the tool runs first, on
the session state this worker already holds, and one script then claims and finishes the
call together (``CLAIM_AND_FINISH``), only if nothing happened meanwhile: the call is still
queued under this message, never attempted, no cancel asked, and the session state is still
the version the tool read. On any other answer the worker claims the call as usual and runs
it again, which a read-only tool can afford: its first run changed nothing.

Which calls: the tool is synchronous (no progress, no event loop), read-only, may be re-run
when its worker is lost (``on_worker_lost: rerun``, the default for read-only tools), and
declares no session state; and the worker has the session's tool set built and its state
loaded already. A run that wrote the session's state after all (a reminder of its set may:
the skill reminder records which skills it announced) cannot be run again unseen: the call is
claimed as usual after it, and the run's result kept, as for a call claimed first. Every
other call, and every call under ``TOOLHUB_OPTIMISTIC_SECONDS=0``, is claimed first.

What it changes for a caller: nothing in the answer. The record shows ``queued`` while such a
run lasts, at most ``optimistic_seconds`` (0.2 s): a run still going then is claimed while it
runs (``late_claims.py``), and is an ordinary attempt from there on. A worker that dies
during an optimistic run leaves the call queued with its message taken; the sweep re-enqueues
it as it does any message taken and never claimed, and fails it after repeated takes (a
poison message).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from toolhub.core import CallResult, ToolError
from toolhub.distributed.records import Claim
from toolhub.state.redis import VERSION_FIELD
from toolhub.toolset import Entry, Prepared
from workers.lifecycle.metrics import metrics, outcome, tool_label

from .claimed import Claimed, run_attempt
from .emitter import Emitter
from .late_claims import Speculation
from .outcomes import Ended
from .runtime import WorkerRuntime
from .toolsets import SessionRuntime


def rerunnable(entry: Entry) -> bool:
    """Whether a call of ``entry`` may run before its claim: a second run is harmless, and
    its answer does not hang on the session state (it declares none to read)."""
    tool = entry.tool
    return (
        tool is not None
        and entry.handle.is_sync
        and entry.read_only
        and entry.on_worker_lost == "rerun"
        and not type(tool).state_models
    )


def run_optimistic(
    runtime: WorkerRuntime, message: dict[str, Any], rerun: Callable[[Claimed], Ended]
) -> Ended | None:
    """Run ``message``'s call before its claim when it qualifies; None when it does not (the
    caller claims it as usual). ``rerun``: the ordinary task body, for a claimed attempt that
    must run the tool again."""
    if runtime.settings.optimistic_seconds <= 0:
        return None
    sid, config_hash = message["session_id"], message.get("config_hash", "")
    with runtime.toolsets.in_use(sid, config_hash):
        session = runtime.toolsets.cached(sid, config_hash)
        if session is None or session.state.version < 0:
            return None
        # Looked up before anything is validated: a call that does not qualify is prepared
        # once, by the ordinary path.
        entry = session.toolset.entries.get(message["name"])
        if entry is None or not rerunnable(entry):
            return None
        try:
            ready = session.toolset.prepare_canonical(
                message["name"], message["arguments"], message["call_id"]
            )
        except ToolError:
            return None  # the ordinary path answers it, with the claim it needs for that
        return _speculate(runtime, message, session, ready, rerun)


def _speculate(
    runtime: WorkerRuntime,
    message: dict[str, Any],
    session: SessionRuntime,
    ready: Prepared,
    rerun: Callable[[Claimed], Ended],
) -> Ended:
    running = runtime.register(message["call_id"])
    try:
        started = time.perf_counter()
        speculation = Speculation(
            message,
            running,
            ready.name,
            ready.entry.fq_id,
            due=time.monotonic() + runtime.settings.optimistic_seconds,
        )
        version, writes = session.state.version, session.state.writes_here()
        result = _run(runtime, session, ready, speculation)
        wrote = session.state.writes_here() != writes
        concluded = _conclude(runtime, speculation, version, started, result, wrote)
        if isinstance(concluded, Ended):
            return concluded
        claim, emitter = concluded

        def settle_or_rerun(attempt: Claimed) -> Ended:
            same = wrote or _version(attempt.claim) == version
            if result is not None and attempt.claim.attempt == 1 and same:
                return attempt.settle(result)
            return rerun(attempt)

        return run_attempt(
            runtime, message, running, claim, settle_or_rerun, emitter=emitter, started=started
        )
    finally:
        runtime.unregister(running)


def _run(
    runtime: WorkerRuntime, session: SessionRuntime, ready: Prepared, speculation: Speculation
) -> CallResult | None:
    """The tool's run, claimed by the late claimer if it outlasts its window; None when it
    raised (the ordinary attempt runs it again, and answers what it raises then)."""
    token = speculation.running.token
    ready.ctx.cancel = token
    remove = token.on_cancel(speculation.answer_cancel)
    runtime.speculations.add(speculation)
    metrics.in_flight.inc()  # the attempt's own count starts only once it is claimed
    try:
        return session.toolset.execute_sync(ready)
    except Exception:
        return None
    finally:
        metrics.in_flight.dec()
        runtime.speculations.discard(speculation)
        remove()


def _conclude(
    runtime: WorkerRuntime,
    speculation: Speculation,
    version: int,
    started: float,
    result: CallResult | None,
    wrote: bool,
) -> Ended | tuple[Claim, Emitter | None]:
    """Claim and finish in one step when the run is still this thread's to claim. Otherwise
    the claim to settle under: the late claimer's, or this thread's own, made now (the one
    step was refused, the run raised or wrote session state, or its token was cancelled: the
    ordinary settle then hands the call back or drops it)."""
    message, running = speculation.message, speculation.running
    if not speculation.take():
        claim, emitter = speculation.late_claim()
        return claim or runtime.records.claim(message, runtime.name), emitter
    if wrote:
        metrics.optimistic.labels("wrote_state").inc()
    elif result is not None and not running.token.cancelled:
        try:
            seq = runtime.records.claim_and_finish(
                message, runtime.name, version, time.perf_counter() - started, result
            )
        except RedisError:
            seq = -1  # written or not: the claim below tells
        if seq > 0:
            metrics.optimistic.labels("finished").inc()
            ran = time.perf_counter() - started
            metrics.count_run(tool_label(message), outcome(running, "finished", result), ran)
            return Ended.settled("finished", result)
        metrics.optimistic.labels("refused").inc()
    return runtime.records.claim(message, runtime.name), None


def _version(claim: Claim) -> int:
    return int((claim.state or {}).get(VERSION_FIELD, b"0"))
