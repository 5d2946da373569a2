"""A sub-agent run seen as a background task, so ``task_output``, ``wait_tasks``, ``kill_task``
and the completion reminder need nothing new for it.

The task machinery speaks of commands: an output, a kill, an exit code. A sub-agent maps onto
that without loss of what the model needs: its output is its progress followed by its answer,
``kill`` is a cancel, and its exit code is 0 when it completed, 1 when it failed (the reason is
the last line of its output), none when it was cancelled (status ``killed``).
"""

from __future__ import annotations

from collections.abc import Callable

from toolhub.backends.capture import CapturedOutput
from toolhub.backends.running import CommandResult, KillReason

from .base import SubagentResult, SubagentRun

EXIT_COMPLETED = 0
EXIT_FAILED = 1


class SubagentTask:
    """Adapts a ``SubagentRun`` to ``tasks.local.TaskProcess``."""

    __slots__ = ("run",)

    def __init__(self, run: SubagentRun) -> None:
        self.run = run

    def output(self) -> CapturedOutput:
        return self.run.output()

    def kill(self, reason: KillReason = "killed") -> bool:
        return self.run.cancel(reason)

    def add_done_callback(self, callback: Callable[[CommandResult], None]) -> None:
        def done(result: SubagentResult) -> None:
            callback(command_result(result, self.run.output()))

        self.run.add_done_callback(done)


def command_result(result: SubagentResult, output: CapturedOutput) -> CommandResult:
    if result.status == "cancelled":
        return CommandResult(None, output, result.duration_s, killed="killed")
    code = EXIT_COMPLETED if result.status == "completed" else EXIT_FAILED
    return CommandResult(code, output, result.duration_s)
