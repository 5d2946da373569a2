"""A ``Session``'s tools as LangChain ``BaseTool`` objects (for LangGraph agents and graphs).

    tools = langchain_tools(session)        # for chat_model.bind_tools(tools) and ToolNode(tools)
    async for mode, chunk in graph.astream(inputs, stream_mode=["updates", "custom"]): ...

Progress: each ``Progress`` item of a running call, embedded or on a worker, goes out as it
arrives through both of LangChain's channels for it: LangGraph's stream writer when the tool
runs inside a graph (``stream_mode="custom"`` chunks), and a LangChain custom event named
``toolhub.progress`` (``astream_events``' ``on_custom_event``, or a callback handler's
``on_custom_event``). Both carry the same dict: ``type``, ``tool_name``, ``tool_call_id``,
``call_id`` and ``progress`` (``Progress.to_dict()``).

Approvals: a call the session's permission rules ask about (docs/approvals.md) is a LangGraph
``interrupt`` when the tool runs inside a graph (with a checkpointer): the graph stops with
``{"type": "toolhub.approval", "tool_name", "tool_call_id", "arguments"}``, and
``Command(resume="approve")`` runs the call (toolhub records the approval as ``langgraph``);
any other answer is a denial the model reads, and toolhub never sees the call. Outside a graph
the call waits in toolhub for a decision from another face.

The model reads ``prompt_text`` (reminders included), with any inline images beside it as
content blocks; the output's JSON is the message's ``artifact``. A failed call is raised as a
``ToolException`` that the tool itself handles, so it arrives as a ``ToolMessage`` with
``status="error"`` whose text the model reads, never as an exception that stops the graph.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

from toolhub.approvals.base import AWAITING_SUBKIND
from toolhub.core import CallResult, Progress, new_call_id
from toolhub.integrations._shared import (
    INSTALL_HINT,
    PROGRESS_EVENT,
    function_definitions,
    images,
    run_call,
)
from toolhub.session import Session

try:
    from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
    from langchain_core.tools import BaseTool, ToolException
except ImportError as exc:
    raise ImportError(
        f"toolhub.integrations.langchain needs langchain-core; {INSTALL_HINT}"
    ) from exc

try:
    from langgraph.config import get_stream_writer
    from langgraph.types import interrupt
except ImportError:  # LangChain without LangGraph: custom events only, no interrupts
    get_stream_writer = None  # type: ignore[assignment]
    interrupt = None  # type: ignore[assignment]

#: The interrupt value's ``type``, and who toolhub records as approving a resumed call.
APPROVAL_EVENT = "toolhub.approval"
APPROVER = "langgraph"

__all__ = ["ToolhubTool", "langchain_tools"]

Content = str | list[str | dict[str, Any]]


def langchain_tools(
    session: Session,
    *,
    strict: bool = False,
    timeout: float | None = None,
    include_external: bool = True,
) -> list[BaseTool]:
    """One tool per tool the session lists now (client names, client-named parameters).
    ``strict`` gives them toolhub's strict-form schemas; bind them with
    ``model.bind_tools(tools, strict=True)`` (LangChain's own strict rewrite would make every
    optional parameter required). ``timeout`` bounds each call."""
    return [
        ToolhubTool(
            name=d["name"],
            description=d.get("description", ""),
            args_schema=d["parameters"],
            session=session,
            timeout=timeout,
        )
        for d in function_definitions(session, strict=strict, include_external=include_external)
    ]


class ToolhubTool(BaseTool):
    """One toolhub tool; ``args_schema`` is its JSON schema, and toolhub validates the call."""

    session: Session
    """The session that runs the calls."""
    timeout: float | None = None
    handle_tool_error: bool | str | Callable[[ToolException], Any] | None = True
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # The model's arguments travel as one dict, beside the tool call's id: no argument name
        # can collide with what LangChain injects (``run_manager``, ``config``, ``callbacks``),
        # and progress can name the tool call it belongs to.
        _, arguments = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return (), {"arguments": arguments, "tool_call_id": tool_call_id}

    def _run(self, arguments: dict[str, Any], tool_call_id: str | None) -> tuple[Content, Any]:
        self._ask_the_graph(arguments, tool_call_id)
        call_id = new_call_id()
        result: CallResult | None = None
        for item in self.session.stream_sync(
            self.name, arguments, call_id=call_id, timeout=self.timeout
        ):
            if isinstance(item, CallResult):
                result = item
            elif _awaiting(item):
                self.session.approve(call_id, principal=APPROVER)
            else:
                event = self._event(item, tool_call_id, call_id)
                _write(event)
                dispatch_custom_event(PROGRESS_EVENT, event)
        if result is None:
            raise RuntimeError(f"the stream of call {call_id} ended without a result")
        return _answer(result)

    async def _arun(
        self, arguments: dict[str, Any], tool_call_id: str | None
    ) -> tuple[Content, Any]:
        self._ask_the_graph(arguments, tool_call_id)
        call_id = new_call_id()

        async def report(progress: Progress) -> None:
            if _awaiting(progress):
                await asyncio.to_thread(self.session.approve, call_id, principal=APPROVER)
                return
            event = self._event(progress, tool_call_id, call_id)
            _write(event)
            await adispatch_custom_event(PROGRESS_EVENT, event)

        result = await run_call(
            self.session,
            self.name,
            arguments,
            call_id=call_id,
            timeout=self.timeout,
            on_progress=report,
        )
        return _answer(result)

    def _ask_the_graph(self, arguments: dict[str, Any], tool_call_id: str | None) -> None:
        """Interrupt the graph for a call that needs approval; return once it is approved
        (resumed with ``approve``), raise the denial the model reads otherwise. Outside a
        graph, or with no approval needed, nothing happens."""
        if interrupt is None or not self.session.needs_approval(self.name, arguments):
            return
        asked = {
            "type": APPROVAL_EVENT,
            "tool_name": self.name,
            "tool_call_id": tool_call_id,
            "arguments": arguments,
        }
        try:
            answer = interrupt(asked)
        except (RuntimeError, KeyError):  # not inside a graph: toolhub's own approval waits
            return
        decision = answer.get("decision") if isinstance(answer, dict) else answer
        if decision is not True and str(decision).strip().lower() != "approve":
            raise ToolException(f"A person denied this call ({str(answer)[:200]}); nothing ran.")

    def _event(self, progress: Progress, tool_call_id: str | None, call_id: str) -> dict[str, Any]:
        return {
            "type": PROGRESS_EVENT,
            "tool_name": self.name,
            "tool_call_id": tool_call_id,
            "call_id": call_id,
            "progress": progress.to_dict(),
        }


def _awaiting(item: object) -> bool:
    """The call waits for its approval: the graph approved it already (``_ask_the_graph``)."""
    return isinstance(item, Progress) and item.kind == "custom" and item.subkind == AWAITING_SUBKIND


def _write(event: dict[str, Any]) -> None:
    """Hand the event to LangGraph's stream writer when the tool runs inside a graph."""
    if get_stream_writer is None:
        return
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # outside any runnable, or a runnable outside a graph
        return
    writer(event)


def _answer(result: CallResult) -> tuple[Content, Any]:
    """``(content, artifact)``; a failure becomes a ``ToolException`` the tool turns into an
    error ``ToolMessage`` carrying ``prompt_text``."""
    if result.is_error:
        raise ToolException(result.prompt_text)
    pictures = images(result)
    content: Content = result.prompt_text
    if pictures:
        content = [
            {"type": "text", "text": result.prompt_text},
            *({"type": "image", "base64": data, "mime_type": mime} for mime, data in pictures),
        ]
    return content, None if result.output is None else result.output.value
