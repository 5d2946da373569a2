"""One background command, the same whether the host's holder runs it or (with no holder) the
worker process itself: how it starts with its output streamed as ``output_delta`` items, and
the call result its end makes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import CommandResult, RunningCommand
from toolhub.core import CallResult, ErrorKind, OutputDeltas, ToolError, ToolOutput
from toolhub.errors import ErrorCode
from toolhub.tracing import carrier_of
from workers.calls.emitter import Emitter


def start_command(
    runner: ProcessRunner,
    message: dict[str, Any],
    emitter: Emitter,
    trace: Mapping[str, Any] | None = None,
) -> tuple[RunningCommand, Callable[[], None]]:
    """Start the message's command; its output goes to ``emitter`` as ``output_delta`` items
    from the command's reader thread. Returns the command and the flush to call once it ended.
    ``trace``: the worker's ``TRACEPARENT``/``TRACESTATE`` for the command (the holder does not
    trace; ``trace_env``), bounded as any carrier that comes in; None: this process's own."""
    deltas = OutputDeltas()

    def on_output(data: bytes) -> None:
        for item in deltas.feed(data):
            emitter.progress(item)

    def flush() -> None:
        for item in deltas.flush():
            emitter.progress(item)

    cwd = message.get("cwd")
    command = runner.start(
        message["command"],
        log_name=message["call_id"],
        cwd=Path(cwd) if cwd else None,
        timeout_s=float(message["timeout_s"]),
        on_output=on_output,
        trace_env=None if trace is None else trace_env(trace),
    )
    return command, flush


def trace_env(trace: Mapping[str, Any]) -> dict[str, str]:
    """The ``TRACEPARENT``/``TRACESTATE`` of a holder request's ``trace``: string values
    within the W3C carrier's bounds only (``toolhub.tracing.carrier_of``)."""
    if not isinstance(trace, Mapping):
        return {}
    carrier = carrier_of({str(name).lower(): value for name, value in trace.items()})
    return {name.upper(): value for name, value in carrier.items()}


def command_result(task_id: str, outcome: CommandResult) -> CallResult:
    details: dict[str, Any] = {
        "exit_code": outcome.exit_code,
        "duration_s": round(outcome.duration_s, 3),
        "cpu_seconds": None if outcome.cpu_seconds is None else round(outcome.cpu_seconds, 3),
        "peak_memory_bytes": outcome.peak_memory_bytes,
    }
    cut = outcome.output.log_cut
    if cut is not None:
        details.update(
            total_bytes=outcome.output.total_bytes,
            log_bytes_written=cut.written,
            reason=cut.reason,
        )
    if outcome.reader_error is not None:
        error = ToolError.custom(
            ErrorCode.WORKER_FAILED,
            f"toolhub stopped reading the background command's output ({outcome.reader_error}) "
            "and killed it; it may have partly run.",
            may_have_run=True,
            **details,
        )
        return CallResult.failure("background", error, call_id=task_id)
    if outcome.oom_killed and outcome.killed is None:
        limit = outcome.memory_limit_bytes
        error = ToolError.custom(
            ErrorCode.MEMORY_LIMIT,
            "The background command was killed by the kernel: it reached its memory limit"
            + (f" of {limit >> 20} MiB" if limit else "")
            + " (or its session's commands together reached theirs).",
            memory_limit_bytes=limit,
            **details,
        )
        return CallResult.failure("background", error, call_id=task_id)
    if outcome.killed == "timeout":
        error = ToolError(ErrorKind.TIMEOUT, "The background command timed out.", details)
        return CallResult.failure("background", error, call_id=task_id)
    if outcome.killed is not None:
        error = ToolError(ErrorKind.CANCELLED, "The background command was killed.", details)
        return CallResult.failure("background", error, call_id=task_id)
    if cut is not None:
        error = ToolError.custom(
            ErrorCode.OUTPUT_LOG_INCOMPLETE,
            f"The background command ran and exited {outcome.exit_code}, but this host could "
            f"not write its output log: {cut.describe(outcome.output.total_bytes)}.",
            may_have_run=True,
            **details,
        )
        return CallResult.failure("background", error, call_id=task_id)
    return CallResult(
        name="background",
        output=ToolOutput.dynamic(details),
        prompt_text=f"exit: {outcome.exit_code}",
        call_id=task_id,
    )


def start_failure(task_id: str, exc: BaseException) -> CallResult:
    error = ToolError.custom(
        ErrorCode.START_FAILED, f"The background command could not start: {exc}"
    )
    return CallResult.failure("background", error, call_id=task_id)
