"""A ``Session``'s tools as a Pydantic AI toolset.

    agent = Agent(model, toolsets=[ToolhubToolset(session)])

Progress: Pydantic AI's own channel for it is ``RunContext.emit`` with a ``CustomEvent``
(the answer to pydantic/pydantic-ai#1175). Every ``Progress`` item of a running call, embedded
or on a worker, is emitted as a ``ToolhubProgressEvent`` (event name ``toolhub.progress``,
stamped with the tool call's id and name) as it arrives, so it reaches the run's
``event_stream_handler``, ``Agent.run_stream_events``, ``Agent.iter`` streams and the UI
adapters, and never the model's context.

Approvals: a call the session's permission rules ask about (docs/approvals.md) is a deferred
tool call needing approval (``ApprovalRequired``): the run ends with ``DeferredToolRequests``
among its outputs, and the app answers with ``DeferredToolResults`` on the next run; an
approved call runs once and toolhub records the approval as ``pydantic-ai``, a denied one never
reaches toolhub.

The tool list is read from the session at every run step, so external tools registered or
removed mid-run show up at the next step. The model reads ``prompt_text`` (reminders included;
a failed call is an ordinary tool result, not a retry or an exception), with any inline images
beside it.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import SchemaValidator, core_schema

from toolhub.approvals.base import AWAITING_SUBKIND
from toolhub.core import CallResult, Progress, new_call_id
from toolhub.integrations._shared import (
    INSTALL_HINT,
    PROGRESS_EVENT,
    function_definitions,
    images,
    run_call,
)

try:
    from pydantic_ai import BinaryContent, CustomEvent, RunContext
    from pydantic_ai.exceptions import ApprovalRequired
    from pydantic_ai.tools import AgentDepsT, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:
    raise ImportError(
        f"toolhub.integrations.pydantic_ai needs pydantic-ai; {INSTALL_HINT}"
    ) from exc

if TYPE_CHECKING:
    from toolhub.session import Session

__all__ = ["ToolhubProgressEvent", "ToolhubToolset"]

#: toolhub validates every call itself (and answers a bad one with an error the model reads),
#: so Pydantic AI only needs the arguments to be a JSON object.
_OBJECT = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)


#: Who toolhub records as approving a call the app approved through Pydantic AI.
APPROVER = "pydantic-ai"


@dataclass(kw_only=True)
class ToolhubProgressEvent(CustomEvent, name=PROGRESS_EVENT):
    """One progress update of a running toolhub call; ``tool_call_id`` and ``tool_name`` are
    stamped by ``RunContext.emit``. Plain JSON fields, so it serializes for UI adapters and
    durable runs as it is."""

    call_id: str
    """toolhub's id for the call: ``session.record`` / ``session.follow`` / ``session.cancel``."""
    progress: dict[str, Any]
    """``Progress.to_dict()``; ``item`` gives the ``Progress`` back."""

    @property
    def item(self) -> Progress:
        return Progress.from_dict(self.progress)


class ToolhubToolset(AbstractToolset[AgentDepsT]):
    """Every tool the session lists, by client name. ``strict`` asks toolhub for its
    strict-form schemas, and a definition is strict when toolhub marks it so; otherwise
    ``strict`` is left unset and the model decides (Pydantic AI's default). ``timeout`` bounds
    each call; ``max_retries`` counts only the model's malformed JSON, since toolhub answers
    everything else with a result."""

    def __init__(
        self,
        session: Session,
        *,
        strict: bool = False,
        timeout: float | None = None,
        include_external: bool = True,
        max_retries: int = 1,
        id: str | None = None,
    ) -> None:
        self.session = session
        self.strict = strict
        self.timeout = timeout
        self.include_external = include_external
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        definitions = function_definitions(
            self.session, strict=self.strict, include_external=self.include_external
        )
        return {
            d["name"]: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=d["name"],
                    description=d.get("description"),
                    parameters_json_schema=d["parameters"],
                    strict=True if d.get("strict") is True else None,
                ),
                max_retries=self.max_retries,
                args_validator=_OBJECT,
            )
            for d in definitions
        }

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        if not ctx.tool_call_approved and self.session.needs_approval(name, tool_args):
            raise ApprovalRequired()
        call_id = new_call_id()

        async def report(progress: Progress) -> None:
            if progress.kind == "custom" and progress.subkind == AWAITING_SUBKIND:
                # Pydantic AI calls it again only once the app approved the deferred call.
                await asyncio.to_thread(self.session.approve, call_id, principal=APPROVER)
                return
            await ctx.emit(ToolhubProgressEvent(call_id=call_id, progress=progress.to_dict()))

        result = await run_call(
            self.session, name, tool_args, call_id=call_id, timeout=self.timeout, on_progress=report
        )
        return _model_view(result)


def _model_view(result: CallResult) -> str | list[str | BinaryContent]:
    """``prompt_text`` alone, or followed by the result's images."""
    pictures = images(result)
    if not pictures:
        return result.prompt_text
    return [
        result.prompt_text,
        *(BinaryContent(base64.b64decode(data), media_type=mime) for mime, data in pictures),
    ]
