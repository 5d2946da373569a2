"""``bash``: run a shell command in the workspace, streaming its output while it runs.

Foreground commands stream ``output_delta`` progress the moment the process writes (the runner's
reader thread hands each chunk straight to the event loop), are bounded by a timeout clamped to
``max_timeout_ms``, and are killed — whole process group, TERM then KILL — on timeout or
cancellation. A timeout is an output (``exit: killed (timeout)``); a cancelled call ends with a
``cancelled`` error that still carries the output so far, and a command the kernel OOM-killed
at its memory limit (``memory_mb``, at most the operator's per-command ceiling) with a
``memory_limit`` error that does too. The result keeps the first and last
part of a long output and names the log file that has all of it. A log that could not be
written to the end (a full disk under ``$TOOLHUB_HOME``) ends the call with an
``output_log_incomplete`` error: the command's exit code, its first and last output, and how
many of its bytes the log holds; never an ``exit: 0`` whose log silently lacks the rest. A
command toolhub stopped reading (``reader_error``) ends with ``worker_failed`` (these errors:
``shell_errors.py``).
``is_background`` hands the command to the background-task backend instead and returns its
task id at once.

Versions: ``current`` keeps the head and the tail of a long output and says so
(``[truncated: ...]``); ``legacy-1`` keeps only the head and adds no note.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.disk_budget import DiskBudget
from toolhub.backends.limits import ResourceLimits
from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import CommandResult
from toolhub.backends.workspace import Workspace
from toolhub.core import (
    BehaviorVersion,
    ErrorKind,
    Params,
    Progress,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    closing,
)
from toolhub.core.requirements import IfParams, Kind, ParamIs
from toolhub.sandbox import SandboxSettings
from toolhub.tasks import BackgroundTasks

from .output_queue import post, queued_deltas
from .plan import ensure_not_planning
from .shell_errors import log_incomplete_error, memory_limit_error, reader_error
from .text import kind_name

LEGACY = "legacy-1"
BACKGROUND_MAX_MS = 10 * 3600 * 1000
_UNWAITED_AMPERSAND = re.compile(r"(?<![&|>])&\s*$")
_MB = 1 << 20
FOREGROUND_ONLY_HINT = "processes cannot outlive the call here"


class BashArgs(BaseModel):
    command: str = Field(description="The shell command to run (bash).")
    timeout: int | None = Field(
        None,
        ge=0,
        description="Timeout in milliseconds (default ${{ default_timeout_ms }}, at most "
        "${{ max_timeout_ms }}).",
    )
    description: str = Field(description="What the command does, in 5-10 words.")
    is_background: bool = Field(
        False,
        description="Run in the background and return a task id at once (servers, watchers, "
        "long builds).",
    )


class BashParams(BaseModel):
    enabled_background: bool = True
    default_timeout_ms: int = Field(120_000, ge=1)
    max_timeout_ms: int = Field(600_000, ge=1)
    output_limit_bytes: int = Field(30_000, ge=1000, description="Output kept for the model.")
    stream_limit_bytes: int = Field(4 * _MB, ge=0, description="Output streamed as progress.")
    cpu_seconds: int | None = Field(None, ge=1)
    address_space_mb: int | None = Field(8192, ge=64)
    max_processes: int | None = Field(
        512, ge=8, description="Processes and threads of one command (its pids cgroup)."
    )
    memory_mb: int | None = Field(
        1024, ge=16, description="Memory of one command, its processes together (its cgroup)."
    )
    sandbox: SandboxSettings | None = Field(
        None,
        description="The command sandbox of the session's commands (this tool, background "
        "commands, monitor, lsp): docs/sandbox.md. Unset: the process default (none, for now).",
    )

    def limits(self) -> ResourceLimits:
        return ResourceLimits(
            cpu_seconds=self.cpu_seconds,
            address_space_bytes=None
            if self.address_space_mb is None
            else self.address_space_mb * _MB,
            max_processes=self.max_processes,
            memory_bytes=None if self.memory_mb is None else self.memory_mb * _MB,
        )


class BashOutput(BaseModel):
    mode: Literal["foreground", "background"]
    exit_code: int | None = None
    output: str = ""
    killed: Literal["timeout", "cancelled", "killed"] | None = None
    signal: str | None = None
    total_bytes: int = 0
    omitted_bytes: int = 0
    truncation_note: str = ""
    log_path: str | None = None
    duration_ms: int = 0
    #: What the command used (None where the host does not count it).
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    task_id: str | None = None
    note: str = ""

    def model_text(self) -> str:
        if self.mode == "background":
            return self.note
        status = f"killed ({self.killed})" if self.killed else str(self.exit_code)
        head = f"exit: {status}"
        if self.truncation_note:
            head += f" {self.truncation_note}"
        return f"{head}\n{self.output}" if self.output else head


class Bash(Tool[BashArgs, BashOutput]):
    id = "bash"
    kind = ToolKind.EXECUTE
    description_template = (
        "Run a shell command (bash) in the workspace; returns its exit code and output (stdout "
        "and stderr together). Output streams while the command runs; a long output keeps its "
        "beginning and end and names the log file holding all of it. Default timeout "
        "${{ default_timeout_ms }} ms, at most ${{ max_timeout_ms }} ms via "
        "`${{ params.execute.timeout }}`."
        "${% if background %} For servers, watchers and long jobs set "
        "`${{ params.execute.is_background }}`: you get a task id back at once; read its output "
        "with `${{ tools.by_kind.background_task_action }}` and stop it with "
        "`${{ tools.by_kind.kill_task_action }}`.${% endif %}"
        "${% set prefer = tools.by_kind | names('read', 'search', 'edit') %}"
        "${% if prefer %} Prefer ${{ prefer }} over cat, grep and sed.${% endif %}"
    )
    requires = IfParams(
        ParamIs("enabled_background", True), Kind(ToolKind.BACKGROUND_TASK_ACTION)
    ) & IfParams(ParamIs("enabled_background", True), Kind(ToolKind.KILL_TASK_ACTION))
    versions = (
        BehaviorVersion("current", summary="long output: head and tail, with a truncation note"),
        BehaviorVersion(LEGACY, summary="long output: head only, no note"),
    )
    params_model = BashParams
    workload = "command"

    def template_extra(self, params: BaseModel | None) -> dict[str, Any]:
        p = params if isinstance(params, BashParams) else BashParams()
        return {
            "max_timeout_ms": p.max_timeout_ms,
            "default_timeout_ms": min(p.default_timeout_ms, p.max_timeout_ms),
            "background": p.enabled_background,
        }

    def adjust_schema(self, schema: dict[str, Any], params: BaseModel | None) -> dict[str, Any]:
        p = params if isinstance(params, BashParams) else BashParams()
        out = copy.deepcopy(schema)
        props = out.setdefault("properties", {})
        if "timeout" in props:
            props["timeout"]["maximum"] = p.max_timeout_ms
        if not p.enabled_background:
            props.pop("is_background", None)
            out["required"] = [r for r in out.get("required", []) if r != "is_background"]
        return out

    async def execute(
        self, ctx: ToolContext, args: BashArgs
    ) -> AsyncIterator[Progress | BashOutput]:
        ensure_not_planning(ctx, "running commands")
        params = ctx.container.get_or_default(Params[BashParams])
        if args.is_background:
            yield self._background(ctx, args, params)
            return
        hint = (
            f"set `{ctx.param_name('is_background')}` instead"
            if params.enabled_background
            else FOREGROUND_ONLY_HINT
        )
        refuse_trailing_ampersand(args.command, hint)
        async with closing(run_foreground(ctx, args.command, args.timeout, params)) as items:
            async for item in items:
                yield item

    def _background(self, ctx: ToolContext, args: BashArgs, params: BashParams) -> BashOutput:
        if not params.enabled_background:
            raise ToolError.invalid_arguments("background commands are disabled for this tool")
        tasks = ctx.container.require(BackgroundTasks)
        ws = ctx.container.require(Workspace)
        disk = ctx.container.get(DiskBudget)
        if disk is not None:
            disk.invalidate()
            disk.check()
        timeout = min(args.timeout, BACKGROUND_MAX_MS) if args.timeout else None
        task_id = tasks.start(
            args.command,
            cwd=str(ws.root),
            timeout_ms=timeout,
            owner_session=ctx.session_id,
            call_id=ctx.call_id,
        )
        snap = tasks.snapshot(task_id)
        others = [t.task_id for t in tasks.running(ctx.session_id) if t.task_id != task_id]
        reader = kind_name(ctx, ToolKind.BACKGROUND_TASK_ACTION, "task_output")
        killer = kind_name(ctx, ToolKind.KILL_TASK_ACTION, "kill_task")
        note = (
            f"Started background task {task_id}. Read its output with `{reader}` and stop it with "
            f"`{killer}`; you will also be told when it finishes."
        )
        if snap is not None and snap.log_path:
            note += f" Full log: {snap.log_path}"
        if others:
            note += (
                f"\nNote: {len(others)} other background task(s) still running: "
                f"{', '.join(others[:10])}. Kill the ones you no longer need with `{killer}`."
            )
        return BashOutput(
            mode="background",
            task_id=task_id,
            log_path=None if snap is None else snap.log_path,
            note=note,
        )


def refuse_trailing_ampersand(command: str, hint: str) -> None:
    """A command ending in a lone ``&`` is refused: its process would be killed when the call
    ends, so the model would think it left a server running. ``hint`` says what to do instead."""
    if _UNWAITED_AMPERSAND.search(command.strip()):
        raise ToolError.invalid_arguments(
            f"the command ends with `&`: its process would be killed when the call ends; {hint}"
        )


async def run_foreground(
    ctx: ToolContext,
    command: str,
    timeout_ms: int | None,
    params: BashParams,
    cwd: Path | None = None,
) -> AsyncIterator[Progress | BashOutput]:
    """Run ``command`` in the foreground: ``output_delta`` progress while it writes, then one
    ``BashOutput``; killed on timeout or cancellation. Shared by every bash-like tool, so each
    variant gets the same limits, streaming and cancellation."""
    runner = ctx.container.require(ProcessRunner)
    timeout_ms = min(timeout_ms or params.default_timeout_ms, params.max_timeout_ms)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    budget = [params.stream_limit_bytes]

    def on_output(chunk: bytes) -> None:
        if budget[0] <= 0:
            return
        chunk = chunk[: budget[0]]
        budget[0] -= len(chunk)
        post(loop, queue, chunk)

    disk = ctx.container.get(DiskBudget)
    running = runner.start(
        command,
        log_name=ctx.call_id or uuid.uuid4().hex,
        cwd=cwd,
        timeout_s=timeout_ms / 1000,
        keep_bytes=params.output_limit_bytes,
        on_output=on_output,
        limits=_within(params.limits(), disk),
    )
    running.add_done_callback(lambda _: post(loop, queue, None))

    def stop() -> None:
        running.kill("cancelled")

    unregister = ctx.cancel.on_cancel(stop)
    try:
        async with closing(queued_deltas(queue)) as deltas:
            async for item in deltas:
                yield item
    finally:
        unregister()
        if not running.done:
            running.kill("cancelled")
    result = running.result
    assert result is not None
    output = _foreground_output(ctx, result, params)
    if disk is not None:
        disk.invalidate()
    if ctx.cancel.cancelled:
        raise ToolError(
            ErrorKind.CANCELLED,
            f"The call was cancelled; the command was killed after "
            f"{result.duration_s:.1f} s.\n{output.model_text()}",
            {"log_path": output.log_path},
        )
    if result.oom_killed and result.killed is None:
        raise memory_limit_error(result, output)
    if result.reader_error is not None:
        raise reader_error(result, output)
    if disk is not None and result.exit_code != 0:
        disk.check(output.model_text())
    if result.output.log_cut is not None:
        raise log_incomplete_error(result, output)
    yield output


def _within(limits: ResourceLimits, disk: DiskBudget | None) -> ResourceLimits:
    """``limits`` with no file larger than what is left of the session's disk quota."""
    left = None if disk is None else disk.remaining()
    if left is None:
        return limits
    if limits.file_size_bytes is not None:
        left = min(left, limits.file_size_bytes)
    return dataclasses.replace(limits, file_size_bytes=left)


def _foreground_output(ctx: ToolContext, result: CommandResult, params: BashParams) -> BashOutput:
    captured = result.output
    limit = params.output_limit_bytes
    note = ""
    if ctx.behavior_version == LEGACY:
        text, omitted = captured.first(limit)
    else:
        text, omitted = captured.head_and_tail(limit)
        if omitted:
            shown = captured.total_bytes - omitted
            where = (
                f"full output at: {captured.log_path}"
                if captured.log_cut is None
                else captured.log_cut.describe(captured.total_bytes)
            )
            note = (
                f"[truncated: showing the first and last {shown // 2} of {captured.total_bytes} "
                f"bytes - {where}]"
            )
    if captured.log_cut is not None and not omitted:
        note = f"[{captured.log_cut.describe(captured.total_bytes)}]"
    return BashOutput(
        mode="foreground",
        exit_code=result.exit_code,
        output=text,
        killed=result.killed,
        signal=result.signal,
        total_bytes=captured.total_bytes,
        omitted_bytes=omitted,
        truncation_note=note,
        log_path=None if captured.log_path is None else str(captured.log_path),
        duration_ms=int(result.duration_s * 1000),
        cpu_seconds=None if result.cpu_seconds is None else round(result.cpu_seconds, 3),
        peak_memory_bytes=result.peak_memory_bytes,
    )


TOOLS: list[type[Tool[Any, Any]]] = [Bash]
