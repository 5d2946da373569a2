"""A ``Session``'s tools as OpenAI Agents SDK ``FunctionTool`` objects.

    agent = Agent(name="coder", tools=function_tools(session, on_stream=show))

Progress: the SDK has no stream event a tool can emit (its open request is
openai/openai-agents-python#1333); the tools it ships that stream — ``Agent.as_tool`` and
``codex_tool`` — take an ``on_stream`` callback, sync or async, receiving one event per update
with the originating tool call. These tools do the same: ``on_stream`` receives a
``ToolhubStreamEvent`` for every ``Progress`` item while the call runs, embedded or on a
worker. A callback that raises is logged and the call goes on, as the SDK does for its own.

Approvals: a call the session's permission rules ask about (docs/approvals.md) is the SDK's
``needs_approval``, so the run stops with it among ``result.interruptions``; once the app
approves it (``state.approve(item)``) and resumes, the tool runs and toolhub records the
approval as ``openai-agents``; a rejection never reaches toolhub (the SDK answers the model).

The model reads ``prompt_text`` (reminders included; a failed call is a result, never an
exception that ends the run), with any inline images beside it. When the SDK gives up on a
tool (``FunctionTool.timeout_seconds``, a cancelled run), the toolhub call is cancelled too.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolhub.approvals.base import AWAITING_SUBKIND
from toolhub.core import CallResult, Progress, new_call_id
from toolhub.integrations._shared import INSTALL_HINT, function_definitions, images, run_call

try:
    from agents import FunctionTool, RunContextWrapper, Tool, ToolOutputImage, ToolOutputText
    from agents.tool_context import ToolContext
except ImportError as exc:
    raise ImportError(
        f"toolhub.integrations.openai_agents needs openai-agents; {INSTALL_HINT}"
    ) from exc

if TYPE_CHECKING:
    from toolhub.session import Session

__all__ = ["ToolhubStreamEvent", "function_tools"]

logger = logging.getLogger("toolhub.integrations.openai_agents")


@dataclass(frozen=True, slots=True)
class ToolhubStreamEvent:
    """One progress update of a running call, shaped like the SDK's own tool stream events."""

    progress: Progress
    """The update itself: text, content blocks or a custom subkind with its payload."""
    tool_name: str
    """The tool's client name, as the model called it."""
    tool_call_id: str
    """The model's id for this tool call (``context.tool_call_id``)."""
    call_id: str
    """toolhub's id for the call: ``session.record`` / ``session.follow`` / ``session.cancel``."""
    context: ToolContext[Any]
    """The tool call's run context: ``context.context`` is the app's own object."""


#: Who toolhub records as approving a call the SDK's run approved.
APPROVER = "openai-agents"

OnStream = Callable[[ToolhubStreamEvent], Awaitable[None] | None]
ToolResult = str | list[ToolOutputText | ToolOutputImage]


def function_tools(
    session: Session,
    *,
    on_stream: OnStream | None = None,
    strict: bool = False,
    timeout: float | None = None,
    include_external: bool = True,
) -> list[Tool]:
    """One ``FunctionTool`` per tool the session lists now (client names, client-named
    parameters). ``strict`` asks toolhub for its strict-form schemas, and a tool is strict
    exactly when toolhub marks its definition so; otherwise schemas go as they are and no tool
    is strict (the SDK's own strict rewrite would make every optional parameter required).
    ``timeout`` bounds each call."""
    return [
        _function_tool(session, definition, on_stream, timeout)
        for definition in function_definitions(
            session, strict=strict, include_external=include_external
        )
    ]


def _function_tool(
    session: Session,
    definition: dict[str, Any],
    on_stream: OnStream | None,
    timeout: float | None,
) -> FunctionTool:
    name = definition["name"]

    async def invoke(context: ToolContext[Any], arguments: str) -> ToolResult:
        call_id = new_call_id()

        async def report(progress: Progress) -> None:
            if progress.kind == "custom" and progress.subkind == AWAITING_SUBKIND:
                # The SDK invokes a tool that needs approval only once the app approved it.
                await asyncio.to_thread(session.approve, call_id, principal=APPROVER)
                return
            if on_stream is None:
                return
            event = ToolhubStreamEvent(progress, name, context.tool_call_id, call_id, context)
            try:
                outcome = on_stream(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("on_stream failed for %s (call %s)", name, call_id)

        result = await run_call(
            session, name, arguments, call_id=call_id, timeout=timeout, on_progress=report
        )
        return _model_view(result)

    async def needs_approval(
        context: RunContextWrapper[Any], arguments: dict[str, Any], tool_call_id: str
    ) -> bool:
        return session.needs_approval(name, arguments)  # no I/O: validation and matching

    return FunctionTool(
        name=name,
        description=definition.get("description", ""),
        params_json_schema=definition["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=definition.get("strict") is True,
        needs_approval=needs_approval,
    )


def _model_view(result: CallResult) -> ToolResult:
    """``prompt_text`` alone, or followed by the result's images as data URLs."""
    pictures = images(result)
    if not pictures:
        return result.prompt_text
    return [
        ToolOutputText(text=result.prompt_text),
        *(ToolOutputImage(image_url=f"data:{mime};base64,{data}") for mime, data in pictures),
    ]
