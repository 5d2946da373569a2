"""The ``toolhub.background`` task body: one durable background command.

The worker claims the call (attempt N) and hands the command to its host's background holder
(``workers/holder/server.py``), which runs it under the session's workspace through the same
``ProcessRunner`` the embedded backend uses, streams its output as ``output_delta`` events, keeps
its lease and writes its terminal. The task returns as soon as the holder says ``started``, so the
command does not depend on this worker process: a worker that dies takes nothing with it. Until the
holder has the command the worker keeps the lease like any call's.

When the holder's host is lost, its commands die with it and their leases expire: the sweep
restarts the command on another worker as the next attempt, after a ``retry`` marker in the
stream. With ``TOOLHUB_HOLDER=0``, or when no holder lives and none can be started, the command
runs in this worker process (and then dies with it), after the worker took the attempt in
Redis (``start_fence.lua``). A holder that lives but does not answer is waited for, never run
around: the worker keeps asking, then withdraws the attempt and answers that nothing ran
(``workers/holder/hand_over.py`` says why).
"""

from __future__ import annotations

import logging
from typing import Any

from toolhub.backends.process import ProcessRunner
from toolhub.core import CallResult, ToolError
from toolhub.core.tool import HANDOFF, INTERNAL_REASONS
from toolhub.distributed.script_replies import StartFenceReply
from toolhub.errors import ErrorCode
from toolhub.tracing import command_env
from workers.holder.background_command import command_result, start_command, start_failure
from workers.holder.client import HolderClient
from workers.holder.client import enabled as holder_enabled
from workers.holder.hand_over import Unreached, hand_over, start_wait_seconds
from workers.holder.places import Place

from .claimed import Claimed, run_claimed
from .emitter import Emitter
from .outcomes import Ended
from .running import Running
from .runtime import WorkerRuntime
from .subagent import run_subagent

logger = logging.getLogger("toolhub.worker.background")

#: What ``run_background`` returns when the holder took the command.
HELD = "held"
WORKER, WITHDRAWN = StartFenceReply.WORKER, StartFenceReply.WITHDRAWN


def run_background(runtime: WorkerRuntime, message: dict[str, Any]) -> Ended:
    return run_claimed(runtime, message, _start)


def _start(attempt: Claimed) -> Ended:
    if attempt.message.get("subagent") is not None:
        return run_subagent(attempt)  # a background sub-agent of `task`
    runtime, message, running = attempt.runtime, attempt.message, attempt.running
    place = _place(runtime, message)
    if isinstance(place, CallResult):
        return attempt.settle(place)
    handed = _hand_over(runtime, running, message)
    if isinstance(handed, CallResult):
        return attempt.settle(handed)
    if handed is None:
        # Nobody else may run this attempt: take it in Redis before running it here.
        handed = _elsewhere(runtime.records.fence_start(running.call_id, running.attempt, WORKER))
    if handed is not None:
        attempt.metric.outcome = handed
        # The holder ends the call (its lease, its terminal), or another attempt has it.
        return Ended(handed)
    return attempt.settle(_run(message, running, attempt.emitter, place))


def _place(runtime: WorkerRuntime, message: dict[str, Any]) -> CallResult | Place:
    sid, config_hash = message["session_id"], message.get("config_hash")
    if not config_hash:
        # Its sandbox comes from the session's config; a command without one does not run.
        error = ToolError.custom(
            ErrorCode.SESSION_UNKNOWN, "background command without its session's config hash"
        )
        return CallResult.failure("background", error, call_id=message["call_id"])
    try:
        session = runtime.toolsets.get(sid, config_hash)
    except ToolError as err:
        return CallResult.failure("background", err, call_id=message["call_id"])
    runner = session.toolset.container.get(ProcessRunner)
    sandbox = runner.sandbox if runner is not None else None
    pin = runner.pin if runner is not None else None
    return Place(session.workspace, runtime.toolsets.session_dir(sid) / "terminal", sandbox, pin)


def _hand_over(
    runtime: WorkerRuntime,
    running: Running,
    message: dict[str, Any],
) -> str | CallResult | None:
    """Give the attempt to this host's holder. Returns what became of it; None when no holder
    lives and none could be started (the caller then runs it in this process); a failure to
    answer when a live holder never answered and the attempt was withdrawn (nothing ran). The
    request names the call and its session only: the holder derives the workspace and sandbox
    itself."""
    if not holder_enabled():
        return None
    client = HolderClient(runtime.settings)
    payload = {
        "op": "start",
        "message": message,
        "attempt": running.attempt,
        "worker": runtime.name,
        # The command's TRACEPARENT: the holder does not trace, the worker's span is the parent.
        "trace": command_env(),
    }
    reply = hand_over(client, payload, give_up=lambda: running.token.cancelled)
    if reply is Unreached.GONE:
        logger.warning(
            "call %s: no background holder lives or can start (%s); running it in this worker",
            running.call_id,
            client.paths.socket,
        )
        return None
    if reply is Unreached.SILENT:
        # The holder may still read a request: give the attempt up in Redis first.
        owner = runtime.records.fence_start(running.call_id, running.attempt, WITHDRAWN)
        if owner is WITHDRAWN:
            return _not_started(running)
        return _elsewhere(owner)
    if not reply.get("ok"):
        # This attempt no longer owns the call (another one does), or the holder could not
        # reach Redis: either way the lease decides what happens next, not this worker.
        logger.warning("call %s: holder refused it: %s", running.call_id, reply.get("error"))
        return "lease_lost" if reply.get("error") == "lease_lost" else "refused"
    logger.info(
        "call %s: attempt %d %s by holder %s",
        running.call_id,
        running.attempt,
        reply.get("state"),
        reply.get("holder"),
    )
    return HELD


def _elsewhere(owner: StartFenceReply) -> str | None:
    """What this worker does with an attempt ``owner`` has: None when it is this worker's."""
    if owner is WORKER:
        return None
    if owner is StartFenceReply.HOLDER:
        return HELD
    return "lease_lost"  # the call moved on to another attempt, or ended


def _not_started(running: Running) -> CallResult:
    """The answer when the holder lived but never answered and the attempt was withdrawn: the
    attempt is handed back or lost when that is why the wait ended (``settle`` reads the
    token), else the call fails saying nothing ran."""
    reason = running.token.reason if running.token.cancelled else None
    if reason is not None and reason not in INTERNAL_REASONS and reason != HANDOFF:
        error = ToolError.cancelled(f"The call was cancelled ({reason}) before it started.")
        return CallResult.failure("background", error, call_id=running.call_id)
    error = ToolError.custom(
        ErrorCode.START_FAILED,
        "The background command was not started: this host's background holder is alive but "
        f"did not answer for {start_wait_seconds():.0f} s (frozen or overloaded). Nothing ran "
        "and nothing was written; starting it again is safe.",
        may_have_run=False,
    )
    return CallResult.failure("background", error, call_id=running.call_id)


def _run(message: dict[str, Any], running: Running, emitter: Emitter, place: Place) -> CallResult:
    """The command in this worker process (no holder): it dies with this process."""
    task_id = message["call_id"]
    runner = place.runner()
    try:
        command, flush = start_command(runner, message, emitter)
    except Exception as exc:
        return start_failure(task_id, exc)

    def kill() -> None:
        command.kill("killed")

    running.token.on_cancel(kill)
    result = command.wait()
    assert result is not None
    flush()
    return command_result(task_id, result)
