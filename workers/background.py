"""The ``toolhub.background`` task body: one durable background command.

The worker claims the call (attempt N) and hands the command to its host's background holder
(``holder.py``), which runs it under the session's workspace through the same ``ProcessRunner``
the embedded backend uses, streams its output as ``output_delta`` events, keeps its lease and
writes its terminal. The task returns as soon as the holder says ``started``, so the command
does not depend on this worker process: a worker that dies takes nothing with it. Until the
holder has the command the worker keeps the lease like any call's.

When the holder's host is lost, its commands die with it and their leases expire: the sweep
restarts the command on another worker as the next attempt, after a ``retry`` marker in the
stream. With ``TOOLHUB_HOLDER=0``, or when no holder can be reached, the command runs in this
worker process as before (and then dies with it).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from toolhub.backends.process import ProcessRunner
from toolhub.core import CallResult, ToolError

from . import holder
from .claimed import Claimed, run_claimed
from .emitter import Emitter
from .runtime import Running, WorkerRuntime

logger = logging.getLogger("toolhub.worker.background")

#: What ``run_background`` returns when the holder took the command.
HELD = "held"


def run_background(runtime: WorkerRuntime, message: dict[str, Any]) -> str:
    return run_claimed(runtime, message, _start)


def _start(attempt: Claimed) -> str:
    runtime, message, running = attempt.runtime, attempt.message, attempt.running
    place = _place(runtime, message)
    if isinstance(place, CallResult):
        return attempt.settle(place)
    workspace, log_dir = place
    handed = _hand_over(runtime, running, message, workspace, log_dir)
    if handed is not None:
        attempt.metric.outcome = handed
        return handed
    return attempt.settle(_run(message, running, attempt.emitter, workspace, log_dir))


def _place(runtime: WorkerRuntime, message: dict[str, Any]) -> CallResult | tuple[Path, Path]:
    """The session's workspace and the directory of the command's log."""
    sid = message["session_id"]
    try:
        workspace = runtime.toolsets.workspace(sid)
    except ToolError as err:
        return CallResult.failure("background", err, call_id=message["call_id"])
    return workspace, runtime.toolsets.session_dir(sid) / "terminal"


def _hand_over(
    runtime: WorkerRuntime,
    running: Running,
    message: dict[str, Any],
    workspace: Path,
    log_dir: Path,
) -> str | None:
    """Give the attempt to this host's holder. Returns what became of it, or None when no
    holder could take it (the caller then runs it in this process)."""
    if not holder.enabled():
        return None
    client = holder.HolderClient(runtime.settings)
    reply = client.hand_over(
        {
            "op": "start",
            "message": message,
            "attempt": running.attempt,
            "workspace": str(workspace),
            "log_dir": str(log_dir),
            "worker": runtime.name,
        }
    )
    if reply is None:
        logger.warning(
            "call %s: no background holder answered (%s); running it in this worker",
            running.call_id,
            client.paths.socket,
        )
        return None
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


def _run(
    message: dict[str, Any], running: Running, emitter: Emitter, workspace: Path, log_dir: Path
) -> CallResult:
    """The command in this worker process (no holder): it dies with this process."""
    task_id = message["call_id"]
    runner = ProcessRunner(workspace, log_dir)
    try:
        command, flush = holder.start_command(runner, message, emitter)
    except Exception as exc:
        return holder.start_failure(task_id, exc)

    def kill() -> None:
        command.kill("killed")

    running.token.on_cancel(kill)
    result = command.wait()
    assert result is not None
    flush()
    return holder.command_result(task_id, result)
