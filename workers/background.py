"""The ``toolhub.background`` task body: one durable background command.

The command runs under the session's workspace through the same ``ProcessRunner`` the embedded
backend uses (own process group, bounded, killable). Its output becomes ``output_delta``
events in the task's stream as it is produced; a kill (``kill_task``) or a hand-back fires the
token, which kills the process group. If this worker dies, the lease sweep restarts the
command on another worker as the next attempt, after a ``retry`` marker in the stream.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from toolhub.backends.process import CommandResult, ProcessRunner
from toolhub.core import CallResult, ErrorKind, OutputDeltas, ToolError, ToolOutput

from .calls import retry_marker, settle
from .emitter import Emitter
from .metrics import metrics, outcome, tool_label
from .runtime import WorkerRuntime

logger = logging.getLogger("toolhub.worker.background")


def run_background(runtime: WorkerRuntime, message: dict[str, Any]) -> str:
    running = runtime.register(message["call_id"])
    try:
        claim = runtime.records.claim(message, runtime.name)
        if claim.action != "run":
            metrics.dropped.labels(claim.action).inc()
            return claim.action
        running.attempt = claim.attempt
        with metrics.attempt(tool_label(message), claim.attempt) as attempt:
            emitter = Emitter(runtime, running, message["session_id"])
            if claim.attempt > 1:
                emitter.progress(retry_marker(claim.attempt))
            result = _run(runtime, message, running.token, emitter)
            settled = settle(runtime, running, emitter, result)
            attempt.outcome = outcome(running, settled, result)
            return settled
    finally:
        runtime.unregister(running)


def _run(
    runtime: WorkerRuntime, message: dict[str, Any], token: Any, emitter: Emitter
) -> CallResult:
    task_id, sid = message["call_id"], message["session_id"]
    try:
        workspace = runtime.toolsets.workspace(sid)
    except ToolError as err:
        return CallResult.failure("background", err, call_id=task_id)
    runner = ProcessRunner(workspace, runtime.toolsets.session_dir(sid) / "terminal")
    deltas = OutputDeltas()

    def on_output(data: bytes) -> None:
        for item in deltas.feed(data):
            emitter.progress(item)

    cwd = message.get("cwd")
    command = runner.start(
        message["command"],
        log_name=task_id,
        cwd=Path(cwd) if cwd else None,
        timeout_s=float(message["timeout_s"]),
        on_output=on_output,
    )
    token.on_cancel(lambda: command.kill("killed"))
    outcome = command.wait()
    assert outcome is not None
    for item in deltas.flush():
        emitter.progress(item)
    return _result(task_id, outcome)


def _result(task_id: str, outcome: CommandResult) -> CallResult:
    details = {"exit_code": outcome.exit_code, "duration_s": round(outcome.duration_s, 3)}
    if outcome.killed == "timeout":
        error = ToolError(ErrorKind.TIMEOUT, "The background command timed out.", details)
        return CallResult.failure("background", error, call_id=task_id)
    if outcome.killed is not None:
        error = ToolError(ErrorKind.CANCELLED, "The background command was killed.", details)
        return CallResult.failure("background", error, call_id=task_id)
    return CallResult(
        name="background",
        output=ToolOutput.dynamic(details),
        prompt_text=f"exit: {outcome.exit_code}",
        call_id=task_id,
    )
