"""Background-task tools: ``task_output``, ``wait_tasks``, ``kill_task``, and the reminder that
announces finished tasks.

A session sees only its own tasks. Each finished task is reported to the model exactly once:
whichever shows it first — one of these tools, or the completion reminder after any call — wins
``claim_completion``, and the reminder stays silent about tasks already claimed.

Waits are event-driven (the backend wakes the waiter when a task ends), capped, and end at once
when the call is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

from toolhub.backends.session_info import SessionInfo
from toolhub.core import Container, Params, Tool, ToolContext, ToolError, ToolKind, ToolOutput
from toolhub.core.requirements import Expr, ParamIs
from toolhub.core.requirements import Tool as NeedTool
from toolhub.tasks import BackgroundTasks, TaskSnapshot, WaitMode

MAX_IDS = 20
MAX_WAIT_MS = 600_000
KILL_SETTLE_S = 3.0
REMINDER_OUTPUT_BYTES = 4000

NEEDS_BACKGROUND: Expr = (
    NeedTool("Main", "bash", if_params=ParamIs("enabled_background", True))
    | NeedTool("Main", "monitor")
    | NeedTool("Main", "task", if_params=ParamIs("enabled_background", True))
)


def _ids(value: Any) -> list[str]:
    """Models send one id, a list, or a comma-separated string: accept all, trim, de-duplicate."""
    items = value if isinstance(value, list) else [value] if value is not None else []
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip().strip("\"'")
            if part and part not in out:
                out.append(part)
    if not out:
        raise ValueError("give at least one task id")
    if len(out) > MAX_IDS:
        raise ValueError(f"at most {MAX_IDS} task ids per call")
    return out


class TaskIdsArgs(BaseModel):
    task_ids: list[str] = Field(
        validation_alias=AliasChoices("task_ids", "task_id"),
        min_length=1,
        max_length=MAX_IDS,
        description="Task ids, as returned when the task was started.",
    )

    @field_validator("task_ids", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> list[str]:
        return _ids(value)


class TaskOutputArgs(TaskIdsArgs):
    timeout_ms: int | None = Field(
        None,
        ge=0,
        description="Wait up to this long (ms, at most ${{ max_wait_ms }}) for the tasks to "
        "finish; 0 or omitted returns their state now.",
    )


class WaitTasksArgs(TaskIdsArgs):
    mode: Literal["wait_any", "wait_all"] = Field(
        "wait_all", description="Return when any task finishes, or when all have."
    )
    timeout_ms: int | None = Field(
        None, ge=0, description="Longest wait in ms (default and maximum ${{ max_wait_ms }})."
    )


class TaskParams(BaseModel):
    max_wait_ms: int = Field(MAX_WAIT_MS, ge=0)
    output_bytes: int = Field(8000, ge=200, description="Output shown per task.")


class TasksOutput(BaseModel):
    tasks: list[TaskSnapshot] = Field(default_factory=list)
    not_found: list[str] = Field(default_factory=list)
    known: list[str] = Field(default_factory=list)
    output_bytes: int = 8000
    timed_out: bool = False

    def model_text(self) -> str:
        blocks = [describe(t, self.output_bytes) for t in self.tasks]
        if self.not_found:
            known = ", ".join(self.known) if self.known else "none"
            blocks.append(f"Task(s) not found: {', '.join(self.not_found)}. Known tasks: {known}.")
        if self.timed_out:
            blocks.append("The wait timed out; tasks shown as running are still running.")
        return "\n\n".join(blocks)


def describe(task: TaskSnapshot, limit: int) -> str:
    """A task as the model reads it: status, command, the tail of its output, the log path."""
    if not task.finished:
        state = task.status_text
    elif task.status == "exited":
        state = f"exited (exit code {task.exit_code})"
    else:
        state = f"{task.status} (exit code {task.exit_code})"
    lines = [f"Task {task.task_id}: {state}", f"Command: {task.command}"]
    if task.duration_s is not None:
        lines[-1] += f" | Duration: {task.duration_s:.1f}s"
    text = task.output
    data = text.encode()
    if len(data) > limit:
        text = data[-limit:].decode("utf-8", "ignore")
    shown = len(text.encode())
    log = f"; full log: {task.log_path}" if task.log_path else ""
    if task.restart_note:
        lines.append(task.restart_note)
    if task.error:
        lines.append(f"It failed: {task.error}")
    if not task.output_bytes:
        lines.append(f"(no output yet{log})" if not task.finished else f"(no output{log})")
    elif shown < task.output_bytes:
        lines.append(f"Output (last {shown} of {task.output_bytes} bytes{log}):\n{text}")
    else:
        lines.append(f"Output ({task.output_bytes} bytes{log}):\n{text}")
    if task.status == "running":
        lines.append("Still running; you will be told when it finishes.")
    elif task.status == "lost":
        lines.append(_lost_note(task))
    return "\n".join(lines)


def _lost_note(task: TaskSnapshot) -> str:
    if task.attempt < task.max_attempts:
        then = (
            "it will restart from the beginning on another worker (attempt "
            f"{task.attempt + 1} of {task.max_attempts})"
        )
    else:
        then = "it has no attempts left and will end as failed"
    return (
        f"Its host stopped responding, so it is not running now: {then}. "
        "You will be told when it finishes."
    )


def _visible(
    ctx: ToolContext, tasks: BackgroundTasks, ids: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The ids this session may see, and the ones it may not (unknown or another session's)."""
    found: list[str] = []
    missing: list[str] = []
    for task_id in ids:
        snap = tasks.snapshot(task_id)
        (found if snap is not None and snap.owner_session == ctx.session_id else missing).append(
            task_id
        )
    return found, missing


def _known(ctx: ToolContext, tasks: BackgroundTasks) -> list[str]:
    return [f"{t.task_id} ({t.status_text})" for t in tasks.list(ctx.session_id)][-20:]


async def _wait(
    ctx: ToolContext, tasks: BackgroundTasks, ids: Sequence[str], mode: WaitMode, timeout_s: float
) -> list[TaskSnapshot]:
    """Wait for the tasks, but stop at once if the call is cancelled."""
    waiting = asyncio.ensure_future(tasks.wait_async(ids, mode, timeout_s))
    cancelled = asyncio.ensure_future(ctx.cancel.wait())
    done, pending = await asyncio.wait({waiting, cancelled}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if waiting not in done:
        raise ToolError.cancelled()
    return waiting.result()


def _report(
    ctx: ToolContext,
    tasks: BackgroundTasks,
    snaps: list[TaskSnapshot],
    missing: list[str],
    params: TaskParams,
    *,
    timed_out: bool = False,
) -> TasksOutput:
    for snap in snaps:
        if snap.finished:
            tasks.claim_completion(snap.task_id)
    return TasksOutput(
        tasks=snaps,
        not_found=missing,
        known=_known(ctx, tasks) if missing else [],
        output_bytes=params.output_bytes,
        timed_out=timed_out,
    )


def _max_wait_extra(self: Any, params: BaseModel | None) -> dict[str, Any]:
    """The wait cap, for the descriptions of the tools that wait on tasks."""
    p = params if isinstance(params, TaskParams) else TaskParams()
    return {"max_wait_ms": p.max_wait_ms}


class TaskOutput(Tool[TaskOutputArgs, TasksOutput]):
    id = "task_output"
    kind = ToolKind.BACKGROUND_TASK_ACTION
    read_only = True
    description_template = (
        "Show the state and latest output of background tasks. With "
        "`${{ params.background_task_action.timeout_ms }}` it first waits (up to "
        "${{ max_wait_ms }} ms) for them to finish."
    )
    requires = NEEDS_BACKGROUND
    params_model = TaskParams

    template_extra = _max_wait_extra

    async def run(self, ctx: ToolContext, args: TaskOutputArgs) -> TasksOutput:
        tasks = ctx.container.require(BackgroundTasks)
        params = ctx.container.get_or_default(Params[TaskParams])
        found, missing = _visible(ctx, tasks, args.task_ids)
        timeout_ms = min(args.timeout_ms or 0, params.max_wait_ms)
        if found and timeout_ms > 0:
            snaps = await _wait(ctx, tasks, found, "wait_all", timeout_ms / 1000)
        else:
            snaps = [s for s in (tasks.snapshot(i) for i in found) if s is not None]
        timed_out = timeout_ms > 0 and any(not s.finished for s in snaps)
        return _report(ctx, tasks, snaps, missing, params, timed_out=timed_out)


class WaitTasks(Tool[WaitTasksArgs, TasksOutput]):
    id = "wait_tasks"
    kind = ToolKind.WAIT_TASKS_ACTION
    read_only = True
    description_template = (
        "Wait for background tasks to finish: `wait_any` returns when the first one ends, "
        "`wait_all` when all have (default). Waits at most ${{ max_wait_ms }} ms."
    )
    requires = NEEDS_BACKGROUND
    params_model = TaskParams

    template_extra = _max_wait_extra

    async def run(self, ctx: ToolContext, args: WaitTasksArgs) -> TasksOutput:
        tasks = ctx.container.require(BackgroundTasks)
        params = ctx.container.get_or_default(Params[TaskParams])
        found, missing = _visible(ctx, tasks, args.task_ids)
        timeout_ms = min(args.timeout_ms or params.max_wait_ms, params.max_wait_ms)
        snaps = await _wait(ctx, tasks, found, args.mode, timeout_ms / 1000) if found else []
        done = [s.finished for s in snaps]
        satisfied = any(done) if args.mode == "wait_any" else all(done)
        return _report(ctx, tasks, snaps, missing, params, timed_out=bool(snaps) and not satisfied)


class KillTaskArgs(BaseModel):
    task_id: str = Field(description="The id of the background task to stop.")


class KillTaskOutput(BaseModel):
    task_id: str
    outcome: Literal["killed", "already_exited", "not_found"]
    task: TaskSnapshot | None = None
    known: list[str] = Field(default_factory=list)

    def model_text(self) -> str:
        if self.outcome == "not_found":
            known = ", ".join(self.known) if self.known else "none"
            return f"Task {self.task_id} not found. Known tasks: {known}."
        head = (
            f"Killed task {self.task_id}."
            if self.outcome == "killed"
            else f"Task {self.task_id} had already finished."
        )
        return head if self.task is None else f"{head}\n{describe(self.task, 2000)}"


class KillTask(Tool[KillTaskArgs, KillTaskOutput]):
    id = "kill_task"
    kind = ToolKind.KILL_TASK_ACTION
    description_template = (
        "Stop a background task (its whole process group: SIGTERM, then SIGKILL after a grace "
        "period)."
    )
    requires = NEEDS_BACKGROUND

    async def run(self, ctx: ToolContext, args: KillTaskArgs) -> KillTaskOutput:
        tasks = ctx.container.require(BackgroundTasks)
        task_id = args.task_id.strip()
        found, _ = _visible(ctx, tasks, [task_id])
        if not found:
            return KillTaskOutput(task_id=task_id, outcome="not_found", known=_known(ctx, tasks))
        outcome = tasks.kill(task_id)
        if outcome == "not_found":
            return KillTaskOutput(task_id=task_id, outcome=outcome, known=_known(ctx, tasks))
        snaps = await _wait(ctx, tasks, [task_id], "wait_all", KILL_SETTLE_S)
        snap = snaps[0] if snaps else None
        if snap is not None and snap.finished:
            tasks.claim_completion(task_id)
        return KillTaskOutput(task_id=task_id, outcome=outcome, task=snap)


class TaskCompletionReminder:
    """After any call: announce this session's tasks that finished and nobody reported yet.

    Only active when something can start background tasks, so tool sets without them pay
    nothing for it on every call."""

    requires: Expr = NEEDS_BACKGROUND

    def collect(self, container: Container, output: ToolOutput) -> list[str]:
        tasks = container.get(BackgroundTasks)
        if tasks is None:
            return []
        info = container.get(SessionInfo)
        session = info.session_id if info is not None else ""
        notes: list[str] = []
        for snap in tasks.unreported(session):
            if tasks.claim_completion(snap.task_id):
                what = "completed" if snap.status == "exited" else f"ended ({snap.status})"
                if snap.attempt > 1:
                    what += (
                        " after restarting from the beginning when its host was lost "
                        f"(attempt {snap.attempt} of {snap.max_attempts})"
                    )
                notes.append(
                    f'Background task "{snap.task_id}" {what} (exit code: {snap.exit_code}).\n'
                    + describe(snap, REMINDER_OUTPUT_BYTES).split("\n", 1)[1]
                )
        return notes


TOOLS: list[type[Tool[Any, Any]]] = [TaskOutput, WaitTasks, KillTask]
REMINDERS = [TaskCompletionReminder()]
