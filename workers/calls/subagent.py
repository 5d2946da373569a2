"""A background sub-agent on a worker: the ``toolhub.background`` message of a ``task`` call.

The sub-agent runs in this worker process through the ``SubagentRunner`` of the session's tool
set on this worker (a plugin provides it: ``builder.provide(SubagentRunner, factory)``); its
progress becomes ``output_delta`` events of the task's record as it is reported, so
``task_output``, ``wait_tasks`` and ``kill_task`` see it from any dispatcher, and a kill is a
cancel of the run. The worker holds the attempt's lease while it runs (a sub-agent is Python in
this process, so the background holder cannot keep it alive): when the worker dies the lease
expires and the sweep re-runs the task on another worker as the next attempt, after a ``retry``
marker, with the same sub-agent id — a runner that stored the transcript resumes it (the turn
under way is run again), and once the attempts are used up the task fails with
``worker_lost``. It is never left ``running``.
"""

from __future__ import annotations

import threading

from toolhub.core import CallResult, OutputDeltas, ToolError
from toolhub.errors import ErrorCode
from toolhub.subagents.as_task import command_result
from toolhub.subagents.base import HOW_TO_PROVIDE, SubagentRequest, SubagentRunner
from workers.holder import background_command

from .claimed import Claimed
from .outcomes import Ended

#: How long a cancelled or timed-out run may take to report its end.
SETTLE_S = 5.0


def run_subagent(attempt: Claimed) -> Ended:
    message = attempt.message
    task_id = message["call_id"]
    runner = _runner(attempt)
    if isinstance(runner, CallResult):
        return attempt.settle(runner)
    try:
        request = SubagentRequest.model_validate(message["subagent"])
    except ValueError as exc:
        return attempt.settle(background_command.start_failure(task_id, exc))
    deltas = OutputDeltas()
    lock = threading.Lock()

    def on_progress(text: str) -> None:
        with lock:
            for item in deltas.feed(text.encode()):
                attempt.emitter.progress(item)

    try:
        run = runner.start(request, on_progress=on_progress)
    except ToolError as err:
        return attempt.settle(CallResult.failure("background", err, call_id=task_id))

    def kill() -> None:
        run.cancel("killed")

    attempt.running.token.on_cancel(kill)
    result = run.wait(float(message.get("timeout_s") or 0) or None)
    if result is None:
        run.cancel("timed out")
        result = run.wait(SETTLE_S)
    with lock:
        for item in deltas.flush():
            attempt.emitter.progress(item)
    if result is None:  # a runner that does not end its run on cancel
        error = ToolError.custom(ErrorCode.SUBAGENT_FAILED, "the sub-agent did not stop")
        return attempt.settle(CallResult.failure("background", error, call_id=task_id))
    outcome = command_result(result, run.output())
    return attempt.settle(background_command.command_result(task_id, outcome))


def _runner(attempt: Claimed) -> SubagentRunner | CallResult:
    message = attempt.message
    task_id = message["call_id"]
    config_hash = message.get("config_hash")
    if not config_hash:  # its runner comes from the session's tool set: none, no run
        error = ToolError.custom(
            ErrorCode.SESSION_UNKNOWN, "background sub-agent without its session's config hash"
        )
        return CallResult.failure("background", error, call_id=task_id)
    try:
        session = attempt.runtime.toolsets.get(message["session_id"], config_hash)
    except ToolError as err:
        return CallResult.failure("background", err, call_id=task_id)
    runner = session.toolset.container.get(SubagentRunner)
    if runner is None:
        error = ToolError.custom(
            ErrorCode.NO_SUBAGENT_RUNNER,
            f"worker {attempt.runtime.name} has no sub-agent runner: {HOW_TO_PROVIDE}",
            resource="SubagentRunner",
        )
        return CallResult.failure("background", error, call_id=task_id)
    return runner
