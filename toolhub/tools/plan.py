"""Plan mode: a session-wide switch that makes every mutating tool refuse until the model exits.

The switch is persisted state (``State[PlanMode]``), so it survives a restart and is seen by
every worker of a distributed session. Mutating tools call ``ensure_not_planning`` first; the
refusal is ``permission_denied`` because the call was well-formed but is not allowed now.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from toolhub.core import State, Tool, ToolContext, ToolError, ToolKind
from toolhub.core.requirements import Tool as NeedTool
from toolhub.errors import ErrorCode


class PlanMode(BaseModel):
    resource_id: ClassVar[str] = "main.plan_mode"

    active: bool = False


class NoArgs(BaseModel):
    pass


class PlanModeOutput(BaseModel):
    active: bool
    changed: bool

    def model_text(self) -> str:
        if self.active:
            if not self.changed:
                return "Plan mode is already on."
            return (
                "Plan mode is on. Explore and read freely; writing, editing, deleting or moving "
                "files and running commands are refused until you exit plan mode. Present your "
                "plan, then exit plan mode to carry it out."
            )
        if not self.changed:
            return "Plan mode was not on."
        return "Plan mode is off. You may now edit files and run commands to carry out the plan."


def planning(ctx: ToolContext) -> bool:
    state = ctx.container.get(State[PlanMode])
    return state is not None and state.active


def ensure_not_planning(ctx: ToolContext, action: str) -> None:
    """Refuse a mutating call while plan mode is on."""
    if planning(ctx):
        raise ToolError.permission_denied(
            f"Plan mode is on: {action} is not allowed while planning. Finish the plan and exit "
            "plan mode first.",
            code=ErrorCode.PLAN_MODE,
        )


def _switch(ctx: ToolContext, on: bool) -> PlanModeOutput:
    before: list[bool] = []

    def apply(state: PlanMode) -> PlanMode:
        before[:] = [state.active]
        return state.model_copy(update={"active": on})

    ctx.container.update(State[PlanMode], apply)
    return PlanModeOutput(active=on, changed=before[-1] != on)


class EnterPlanMode(Tool[NoArgs, PlanModeOutput]):
    id = "enter_plan_mode"
    kind = ToolKind.PLAN
    read_only = True
    description_template = (
        "Switch to plan mode before a large or risky change: explore with read-only tools and "
        "work out a plan first. While plan mode is on, every tool that writes files or runs "
        "commands refuses. Call the exit tool when the plan is ready."
    )
    requires = NeedTool("Main", "exit_plan_mode")
    state_models = (PlanMode,)

    def run(self, ctx: ToolContext, args: NoArgs) -> PlanModeOutput:
        return _switch(ctx, True)


class ExitPlanMode(Tool[NoArgs, PlanModeOutput]):
    id = "exit_plan_mode"
    kind = ToolKind.PLAN
    read_only = True
    description_template = (
        "Leave plan mode once your plan is ready, so that files can be changed and commands run "
        "again."
    )
    requires = NeedTool("Main", "enter_plan_mode")
    state_models = (PlanMode,)

    def run(self, ctx: ToolContext, args: NoArgs) -> PlanModeOutput:
        return _switch(ctx, False)


TOOLS: list[type[Tool[Any, Any]]] = [EnterPlanMode, ExitPlanMode]
