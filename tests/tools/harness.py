"""Driving built-in tools the way the tool set does, without a Session.

A ``Harness`` owns a container with the local resources installed (workspace, process runner,
background tasks, answer box), persisted state registered, and a template renderer that knows the
default tool names, so hints name tools and renamed parameters as they would in a session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolhub.assembly import install_local_resources
from toolhub.core import (
    CancelToken,
    Container,
    ErasedTool,
    Outcome,
    Params,
    Progress,
    State,
    TemplateRenderer,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)
from toolhub.tools import BUILTIN_REMINDERS, BUILTIN_TOOLS

DEFAULT_NAMES = {
    "read": "read_file",
    "write": "write_file",
    "edit": "edit_file",
    "list_dir": "list_dir",
    "search": "grep",
    "execute": "bash",
    "background_task_action": "task_output",
    "wait_tasks_action": "wait_tasks",
    "kill_task_action": "kill_task",
    "search_tool": "search_tool",
    "use_tool": "use_tool",
}


@dataclass
class Result:
    """One finished call: progress seen, then the output (or the error)."""

    progress: list[Progress]
    outcome: Outcome

    @property
    def error(self) -> ToolError | None:
        return self.outcome.error

    @property
    def output(self) -> Any:
        assert self.outcome.error is None, self.outcome.error
        assert self.outcome.output is not None
        return self.outcome.output.model

    @property
    def text(self) -> str:
        assert self.outcome.error is None, self.outcome.error
        return self.outcome.text

    @property
    def tool_output(self) -> ToolOutput:
        assert self.outcome.output is not None
        return self.outcome.output


@dataclass
class Harness:
    root: Path
    session_dir: Path
    session_id: str = "s1"
    container: Container = field(default_factory=Container)
    renderer: TemplateRenderer = field(
        default_factory=lambda: TemplateRenderer(by_kind=dict(DEFAULT_NAMES))
    )
    _calls: int = 0

    def __post_init__(self) -> None:
        install_local_resources(
            self.container,
            workspace=self.root,
            session_dir=self.session_dir,
            session_id=self.session_id,
        )
        for tool in BUILTIN_TOOLS:
            for model in tool.state_models:
                self.container.register_persisted(State[model], model.resource_id)
        self.container.insert(self.renderer)

    def set_params(self, params: BaseModel) -> None:
        self.container.insert(params, Params[type(params)])

    def context(
        self,
        tool: type[Tool[Any, Any]],
        *,
        version: str | None = None,
        param_names: Mapping[str, str] | None = None,
        call_id: str | None = None,
        cancel: CancelToken | None = None,
    ) -> ToolContext:
        self._calls += 1
        return ToolContext(
            call_id=call_id or f"call-{self._calls}",
            container=self.container,
            renderer=self.renderer,
            client_name=tool.id,
            param_names=dict(param_names or {}),
            behavior_version=version,
            cancel=cancel or CancelToken(),
            session_id=self.session_id,
        )

    async def astream(
        self, tool: type[Tool[Any, Any]], args: Mapping[str, Any], **kw: Any
    ) -> Result:
        ctx = self.context(tool, **kw)
        erased = ErasedTool(tool())
        try:
            parsed = erased.parse_args(args, client_name=tool.id)
        except ToolError as err:
            return Result([], Outcome(error=err))
        progress: list[Progress] = []
        async for item in erased.stream(ctx, parsed):
            if isinstance(item, Progress):
                progress.append(item)
            else:
                return Result(progress, item)
        raise AssertionError("stream ended without an outcome")

    def call(self, tool: type[Tool[Any, Any]], args: Mapping[str, Any], **kw: Any) -> Result:
        return asyncio.run(self.astream(tool, args, **kw))

    def reminders(self, result: Result) -> list[str]:
        """What the cross-tool reminders add after this call."""
        notes: list[str] = []
        for reminder in BUILTIN_REMINDERS:
            notes += reminder.collect(self.container, result.tool_output)
        return notes


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: compare before and after a failed call."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
