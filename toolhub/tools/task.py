"""``task``: delegate a prompt to a sub-agent, in the foreground or as a background task.

toolhub runs no model, so the sub-agent comes from the host: a ``SubagentRunner`` in the
container (``toolhub.subagents``); without one the call is refused with an error that says what
the host must provide. The tool's own job is everything that must hold whoever runs the agent:
``cwd`` is confined to the workspace like every path, ``isolation: worktree`` gives the
sub-agent a private git worktree (refused outside a git repository), the depth limit (a
sub-agent at ``max_depth`` cannot delegate further) and the concurrency limit
(``max_concurrent`` running sub-agents) are checked before anything starts, and the sub-agent
runs under ``subagent_mode`` (``read_write`` by default: edits, no commands, no ``task``).

In the foreground its progress streams as ``output_delta`` items and the call ends with its
answer; a cancel of the call cancels the sub-agent. In the background (the default) it is a
background task like a ``bash`` command: ``task_output``, ``wait_tasks`` and ``kill_task``
work on it and the completion reminder announces it. Either way it has a sub-agent id that
``resume_from`` continues.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.session_info import SessionInfo
from toolhub.backends.workspace import Workspace
from toolhub.backends.worktrees import GitWorktrees
from toolhub.core import (
    CapabilityMode,
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
from toolhub.errors import ErrorCode
from toolhub.subagents.as_task import SubagentTask
from toolhub.subagents.base import (
    SubagentDepth,
    SubagentRequest,
    SubagentRun,
    SubagentRunner,
    depth_exceeded,
    runner_missing,
    unknown_subagent,
)
from toolhub.tasks import BackgroundTasks
from toolhub.tasks.base import HostsSubagents

from .output_queue import post, queued_deltas
from .plan import planning
from .text import kind_name


class TaskArgs(BaseModel):
    prompt: str = Field(
        min_length=1,
        description="The task, with all the context the sub-agent needs: it sees nothing of "
        "this conversation.",
    )
    description: str = Field(min_length=1, description="What the task is, in 3-5 words.")
    subagent_type: str = Field("general-purpose", min_length=1, description="Kind of sub-agent.")
    run_in_background: bool = Field(
        True, description="Run it as a background task and return its task id at once."
    )
    isolation: Literal["none", "worktree"] = Field(
        "none",
        description="`worktree`: the sub-agent works in a private git worktree of the workspace.",
    )
    resume_from: str | None = Field(
        None, description="A sub-agent id from an earlier task, to continue that sub-agent."
    )
    cwd: str | None = Field(None, description="Directory (in the workspace) it works in.")


class SubagentParams(BaseModel):
    enabled_background: bool = True
    max_concurrent: int = Field(4, ge=1, le=32, description="Sub-agents running at once.")
    max_depth: int = Field(
        1, ge=1, le=3, description="How deep delegation goes: 1 = sub-agents cannot delegate."
    )
    subagent_mode: CapabilityMode = Field(
        CapabilityMode.READ_WRITE, description="The capability mode of the sub-agents' tools."
    )


class TaskToolOutput(BaseModel):
    mode: Literal["foreground", "background"]
    subagent_id: str
    status: Literal["running", "completed", "cancelled"]
    text: str = ""
    task_id: str | None = None
    worktree: str | None = None
    turn: int = 1
    duration_ms: int = 0
    note: str = ""

    def model_text(self) -> str:
        if self.mode == "background":
            return self.note
        head = f"Sub-agent {self.subagent_id} {self.status}"
        if self.duration_ms:
            head += f" in {self.duration_ms / 1000:.1f}s"
        parts = [head + ".", self.text] if self.text else [head + "."]
        if self.note:
            parts.append(self.note)
        return "\n".join(parts)


class Task(Tool[TaskArgs, TaskToolOutput]):
    id = "task"
    kind = ToolKind.TASK
    description_template = (
        "Delegate a self-contained task to a sub-agent that works with its own tools in the "
        "workspace and reports back. Give it the whole context in the prompt."
        "${% if background %} By default it runs in the background: you get a task id at once; "
        "read its progress and answer with `${{ tools.by_kind.background_task_action }}` and "
        "stop it with `${{ tools.by_kind.kill_task_action }}`; you are told when it finishes. "
        "Set `${{ params.task.run_in_background }}` to false to wait for the answer."
        "${% endif %} Continue an earlier sub-agent with `${{ params.task.resume_from }}`; "
        "`${{ params.task.isolation }}`=worktree gives it a private git worktree. At most "
        "${{ max_concurrent }} sub-agents run at once."
    )
    requires = IfParams(
        ParamIs("enabled_background", True), Kind(ToolKind.BACKGROUND_TASK_ACTION)
    ) & IfParams(ParamIs("enabled_background", True), Kind(ToolKind.KILL_TASK_ACTION))
    params_model = SubagentParams
    workload = "command"

    def template_extra(self, params: BaseModel | None) -> dict[str, Any]:
        p = params if isinstance(params, SubagentParams) else SubagentParams()
        return {"background": p.enabled_background, "max_concurrent": p.max_concurrent}

    def adjust_schema(self, schema: dict[str, Any], params: BaseModel | None) -> dict[str, Any]:
        """Without background sub-agents the flag is not offered (every call waits)."""
        p = params if isinstance(params, SubagentParams) else SubagentParams()
        if p.enabled_background:
            return schema
        out = copy.deepcopy(schema)
        out.get("properties", {}).pop("run_in_background", None)
        out["required"] = [r for r in out.get("required", []) if r != "run_in_background"]
        return out

    async def execute(
        self, ctx: ToolContext, args: TaskArgs
    ) -> AsyncIterator[Progress | TaskToolOutput]:
        params = ctx.container.get_or_default(Params[SubagentParams])
        depth = ctx.container.get(SubagentDepth)
        if depth is not None and depth.depth >= params.max_depth:
            raise depth_exceeded(depth.depth, params.max_depth)
        runner = ctx.container.get(SubagentRunner)
        if runner is None:
            raise runner_missing()
        background = args.run_in_background and params.enabled_background
        explicit = "run_in_background" in args.model_fields_set
        if args.run_in_background and explicit and not params.enabled_background:
            raise ToolError.invalid_arguments(
                f"background sub-agents are disabled here; leave out "
                f"`{ctx.param_name('run_in_background')}`"
            )
        request, worktree = _request(ctx, args, params, runner, depth)
        try:
            started = _background(ctx, request, runner, params, worktree) if background else None
        except ToolError:
            _discard(ctx, worktree)  # refused (the concurrency limit): leave nothing behind
            raise
        if started is not None:
            yield started
            return
        async with closing(_foreground(ctx, request, runner, params, worktree)) as items:
            async for item in items:
                yield item


def _request(
    ctx: ToolContext,
    args: TaskArgs,
    params: SubagentParams,
    runner: SubagentRunner,
    depth: SubagentDepth | None,
) -> tuple[SubagentRequest, str | None]:
    """The request, every argument checked: confined ``cwd``, a known ``resume_from``, the
    worktree made (only once all else passed, so a refused call leaves nothing behind)."""
    ws = ctx.container.require(Workspace)
    cwd = ws.resolve(args.cwd, what=ctx.param_name("cwd"))
    if not cwd.is_dir():
        raise ToolError.invalid_arguments(
            f"`{ctx.param_name('cwd')}` {ws.display(cwd)} is not a directory in the workspace"
        )
    resume = (args.resume_from or "").strip() or None
    if resume is not None and not runner.knows(resume):
        raise unknown_subagent(resume, [])
    subagent_id = resume or f"agent-{uuid.uuid4().hex[:12]}"
    root, worktree = ws.root, None
    if args.isolation == "worktree" and resume is None:
        made = ctx.container.require(GitWorktrees).add(subagent_id)
        root, worktree = made, str(made)
        cwd = made / cwd.relative_to(ws.root)
    # Plan mode binds the caller's delegates too: they may read and research, not edit.
    mode = CapabilityMode.READ_ONLY if planning(ctx) else params.subagent_mode
    request = SubagentRequest(
        prompt=args.prompt,
        description=args.description,
        subagent_type=args.subagent_type,
        workspace=str(root),
        cwd=str(cwd),
        capability_mode=mode,
        parent_session=ctx.session_id,
        parent_call=ctx.call_id,
        depth=(depth.depth if depth is not None else 0) + 1,
        max_depth=params.max_depth,
        subagent_id=None if resume else subagent_id,
        resume_from=resume,
    )
    return request, worktree


def _discard(ctx: ToolContext, worktree: str | None) -> None:
    if worktree is not None:
        ctx.container.require(GitWorktrees).remove(Path(worktree))


def _id_of(request: SubagentRequest) -> str:
    found = request.resume_from or request.subagent_id
    assert found is not None
    return found


def _log_path(ctx: ToolContext, name: str) -> Path | None:
    info = ctx.container.get(SessionInfo)
    return None if info is None else info.session_dir / "terminal" / f"{name}.log"


def _background(
    ctx: ToolContext,
    request: SubagentRequest,
    runner: SubagentRunner,
    params: SubagentParams,
    worktree: str | None,
) -> TaskToolOutput:
    tasks = ctx.container.require(BackgroundTasks)
    sid = _id_of(request)
    label = f"sub-agent {sid} ({request.subagent_type}): {request.description}"
    if isinstance(tasks, HostsSubagents):
        # A fleet: the sub-agent is a durable task a worker runs (and re-runs when it is lost).
        task_id = tasks.start_subagent(
            request.model_dump(mode="json"),
            label=label,
            owner_session=ctx.session_id,
            call_id=ctx.call_id,
            max_concurrent=params.max_concurrent,
        )
    else:
        adopt = getattr(tasks, "adopt", None)
        if adopt is None:
            raise ToolError.custom(
                ErrorCode.NOT_CONFIGURED,
                f"this session's background tasks ({type(tasks).__name__}) cannot run "
                "sub-agents; run it in the foreground",
            )
        run = runner.start(
            request, log_path=_log_path(ctx, sid), max_concurrent=params.max_concurrent
        )
        task_id = adopt(label, SubagentTask(run), owner_session=ctx.session_id, call_id=ctx.call_id)
    reader = kind_name(ctx, ToolKind.BACKGROUND_TASK_ACTION, "task_output")
    killer = kind_name(ctx, ToolKind.KILL_TASK_ACTION, "kill_task")
    note = (
        f"Started sub-agent {sid} as background task {task_id}. Read its progress and answer "
        f"with `{reader}`, stop it with `{killer}`; you will be told when it finishes. Continue "
        f"it later with `{ctx.param_name('resume_from')}`={sid}."
    )
    if worktree:
        note += f" It works in the git worktree {worktree}."
    return TaskToolOutput(
        mode="background", subagent_id=sid, status="running", task_id=task_id,
        worktree=worktree, note=note,
    )  # fmt: skip


async def _foreground(
    ctx: ToolContext,
    request: SubagentRequest,
    runner: SubagentRunner,
    params: SubagentParams,
    worktree: str | None,
) -> AsyncIterator[Progress | TaskToolOutput]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def on_progress(text: str) -> None:
        post(loop, queue, text.encode())

    try:
        run = runner.start(
            request,
            on_progress=on_progress,
            log_path=_log_path(ctx, _id_of(request)),
            max_concurrent=params.max_concurrent,
        )
    except ToolError:
        _discard(ctx, worktree)
        raise
    run.add_done_callback(lambda _: post(loop, queue, None))

    def stop() -> None:
        run.cancel("cancelled")

    unregister = ctx.cancel.on_cancel(stop)
    try:
        async with closing(queued_deltas(queue)) as deltas:
            async for item in deltas:
                yield item
    finally:
        unregister()
        if run.result is None:
            run.cancel("cancelled")
    yield _foreground_output(ctx, run, worktree)


def _foreground_output(ctx: ToolContext, run: SubagentRun, worktree: str | None) -> TaskToolOutput:
    result = run.result
    assert result is not None
    resume = f"`{ctx.param_name('resume_from')}`={result.subagent_id}"
    if ctx.cancel.cancelled or result.status == "cancelled":
        raise ToolError(
            ErrorKind.CANCELLED,
            f"The call was cancelled; sub-agent {result.subagent_id} was stopped after "
            f"{result.duration_s:.1f} s (continue it with {resume}).",
            {"subagent_id": result.subagent_id},
        )
    if result.status == "failed":
        raise ToolError(
            ErrorKind.EXECUTION,
            f"Sub-agent {result.subagent_id} failed: {result.error} (continue it with {resume}).",
            {"code": ErrorCode.SUBAGENT_FAILED.value, "subagent_id": result.subagent_id},
        )
    return TaskToolOutput(
        mode="foreground",
        subagent_id=result.subagent_id,
        status="completed",
        text=result.text,
        worktree=worktree,
        turn=result.turn,
        duration_ms=int(result.duration_s * 1000),
        note=f"Continue this sub-agent with {resume}."
        + (f" Its changes are in the git worktree {worktree}." if worktree else ""),
    )


TOOLS: list[type[Tool[Any, Any]]] = [Task]
