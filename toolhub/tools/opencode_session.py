"""The OpenCode tools that are not file tools: ``bash``, ``todowrite`` and ``skill``, with
OpenCode's argument names over the backends the Main tools use.

* ``bash`` runs through ``run_foreground`` (the Main ``bash``'s code: the session's
  ``ProcessRunner`` and sandbox, its limits, streaming and cancellation). OpenCode's bash has no
  background mode, so this one is **foreground only**: it does not satisfy the requirement of
  ``task_output``/``wait_tasks``/``kill_task`` and ignores ``enabled_background``. ``workdir``
  is confined like any path.
* ``todowrite`` replaces the session's todo list (``State[TodoState]``, the one ``todo_write``
  keeps) through ``write_todos``; OpenCode's ``priority`` is kept on each item.
* ``skill`` is the Main ``skill`` under OpenCode's namespace: same catalog, same arguments.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, Field

from toolhub.backends.workspace import Workspace
from toolhub.core import Params, Progress, Tool, ToolContext, ToolError, ToolKind, closing

from .opencode import NAMESPACE, SameParamsAs
from .plan import ensure_not_planning
from .shell import (
    FOREGROUND_ONLY_HINT,
    BashOutput,
    BashParams,
    refuse_trailing_ampersand,
    run_foreground,
)
from .skills import Skill
from .todo import (
    TodoInput,
    TodoPriority,
    TodoState,
    TodoStatus,
    TodoWriteArgs,
    TodoWriteOutput,
    write_todos,
)


class BashArgsOC(BaseModel):
    command: str = Field(description="The command to execute.")
    timeout: int | None = Field(
        None,
        ge=0,
        description="Optional timeout in milliseconds (default ${{ default_timeout_ms }}, at "
        "most ${{ max_timeout_ms }}).",
    )
    workdir: str | None = Field(
        None,
        description="The directory to run the command in (default: the workspace). Use this "
        "instead of `cd`.",
    )
    description: str = Field(
        description="Clear, concise description of what this command does in 5-10 words."
    )


class BashOC(Tool[BashArgsOC, BashOutput]):
    id = "bash"
    namespace = NAMESPACE
    kind = ToolKind.EXECUTE
    params_model = BashParams
    requires = SameParamsAs(("Main:bash", "OpenCode:bash"))
    workload = "command"
    description_template = (
        "Execute a bash command in a fresh shell in the workspace, with an optional timeout "
        "(default ${{ default_timeout_ms }} ms, at most ${{ max_timeout_ms }} ms). Returns the "
        "exit code and the output (stdout and stderr together); a long output keeps its "
        "beginning and end. Commands run in the foreground only: nothing outlives the call."
        "${% set prefer = tools.by_kind | names('read', 'search', 'edit') %}"
        "${% if prefer %} Prefer ${{ prefer }} over cat, grep and sed.${% endif %}"
    )

    def template_extra(self, params: BaseModel | None) -> dict[str, Any]:
        p = params if isinstance(params, BashParams) else BashParams()
        return {
            "max_timeout_ms": p.max_timeout_ms,
            "default_timeout_ms": min(p.default_timeout_ms, p.max_timeout_ms),
        }

    async def execute(
        self, ctx: ToolContext, args: BashArgsOC
    ) -> AsyncIterator[Progress | BashOutput]:
        ensure_not_planning(ctx, "running commands")
        params = ctx.container.get_or_default(Params[BashParams])
        refuse_trailing_ampersand(args.command, FOREGROUND_ONLY_HINT)
        cwd = None
        if args.workdir:
            ws = ctx.container.require(Workspace)
            cwd = ws.resolve(args.workdir)
            if ws.kind(cwd) != "dir":
                raise ToolError.invalid_arguments(
                    f"`{ctx.param_name('workdir')}` {ws.display(cwd)} is not a directory"
                )
        async with closing(run_foreground(ctx, args.command, args.timeout, params, cwd)) as items:
            async for item in items:
                yield item


class TodoItemOC(BaseModel):
    id: str = Field(description="Unique identifier for the todo item.")
    content: str = Field(min_length=1, description="Brief description of the task.")
    status: TodoStatus = Field(
        description="Current status: pending, in_progress, completed or cancelled."
    )
    priority: TodoPriority = Field(description="Priority: high, medium or low.")


class TodoWriteArgsOC(BaseModel):
    todos: list[TodoItemOC] = Field(description="The updated todo list (replaces the old one).")


class TodoWriteOC(Tool[TodoWriteArgsOC, TodoWriteOutput]):
    id = "todowrite"
    namespace = NAMESPACE
    kind = ToolKind.PLAN
    state_models = (TodoState,)
    description_template = (
        "Create and manage a structured task list for the session: send the whole list each "
        "time, with each item's status and priority. Mark one item `in_progress` while you "
        "work on it and `completed` as soon as it is done."
    )

    def run(self, ctx: ToolContext, args: TodoWriteArgsOC) -> TodoWriteOutput:
        items = [TodoInput(id=t.id, content=t.content, status=t.status) for t in args.todos]
        priorities = {t.id: t.priority for t in args.todos}
        return write_todos(ctx, TodoWriteArgs(todos=items, merge=False), priorities)


class SkillOC(Skill):
    namespace = NAMESPACE
    requires = SameParamsAs(("Main:skill", "OpenCode:skill"))
    description_template = (
        "Load a skill by name: instructions (and helper files) for a specific kind of task, kept "
        "in the workspace. Load the matching skill before a task it covers, then follow it."
    )


TOOLS: list[type[Tool[Any, Any]]] = [BashOC, TodoWriteOC, SkillOC]
