"""The session's tool set served over MCP (``toolhub mcp``), on the SDK's low-level ``Server``
so that progress, cancellation and elicitation follow toolhub's semantics exactly:

* progress items become ``notifications/progress`` when the client sent a progress token
  (numbered, so monotonically increasing; merged when they come too fast);
* an MCP cancellation cancels the toolhub call for real (``Session.cancel``), not just the
  request handler;
* a failed call is an ``isError: true`` result the model can read; an unknown tool name is a
  protocol error (``-32602``), as the spec asks;
* ``ask_user`` questions become an elicitation when the client supports it; otherwise the
  questions are the result, with a note to ask the user directly.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

import toolhub
from toolhub.core import CallResult, Progress, new_call_id

from .elicit import answers_from, questions_message, questions_schema, unanswerable_text
from .progress import ProgressRelay

if TYPE_CHECKING:
    from toolhub.session import Session

INPUT_REQUIRED = "input_required"
CANCEL_GRACE_S = 5.0
_END = object()


def to_mcp_result(result: CallResult) -> types.CallToolResult:
    """The model text first, then the result's images (other blocks are already in the text)."""
    value = result.output.value if result.output is not None else None
    content: list[Any] = [types.TextContent(type="text", text=result.prompt_text)]
    content += [
        types.ImageContent(type="image", data=block.data, mime_type=block.mime_type or "image/png")
        for block in result.content
        if block.type == "image" and block.data
    ]
    return types.CallToolResult(
        content=content,
        structured_content=value if isinstance(value, dict) else None,
        is_error=result.is_error,
    )


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


class ToolhubMcpServer:
    """MCP handlers over one session; ``server`` is the SDK server to run on a transport."""

    def __init__(self, session: Session, name: str = "toolhub") -> None:
        self.session = session
        self.server: Server[Any] = Server(
            name,
            version=toolhub.__version__,
            instructions="toolhub tools: files, search, commands and more, with live progress.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        entries = self.session.toolset.entries
        tools = []
        for d in self.session.definitions("mcp"):
            entry = entries.get(d["name"])
            read_only = entry.read_only if entry is not None else False
            tools.append(
                types.Tool(
                    name=d["name"],
                    description=d["description"],
                    input_schema=d["inputSchema"],
                    annotations=types.ToolAnnotations(read_only_hint=read_only),
                )
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in self.session.toolset.entries:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        call_id = new_call_id()
        queue: asyncio.Queue[object] = asyncio.Queue()
        pump = asyncio.create_task(self._pump(params.name, params.arguments, call_id, queue))

        async def send(progress: float, message: str | None) -> None:
            await ctx.session.report_progress(progress, None, message)

        relay = ProgressRelay(send)
        finished = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, CallResult):
                    finished = True
                    await relay.flush()
                    return to_mcp_result(item)
                if item is _END:
                    finished = True
                    return text_result(f"`{params.name}` ended without a result", is_error=True)
                assert isinstance(item, Progress)
                if item.kind == "custom" and item.subkind == INPUT_REQUIRED:
                    early = await self._ask(ctx, call_id, item.payload)
                    if early is not None:
                        return early
                await relay.push(item)
        finally:
            with anyio.CancelScope(shield=True):
                if not finished:
                    await self.session.cancel(call_id)
                await _settle(pump)

    async def _pump(
        self, name: str, arguments: Any, call_id: str, queue: asyncio.Queue[object]
    ) -> None:
        """Drains the call into ``queue`` on its own task, so that a cancelled MCP request can
        still cancel the call (and the call's stream ends with its cancelled terminal)."""
        try:
            async for item in self.session.stream(name, arguments or {}, call_id=call_id):
                await queue.put(item)
        finally:
            await queue.put(_END)

    async def _ask(
        self, ctx: ServerRequestContext[Any], call_id: str, payload: Any
    ) -> types.CallToolResult | None:
        """Elicit the answers (None: the call goes on), or the questions as the result."""
        questions = payload.get("questions") if isinstance(payload, dict) else None
        questions = questions if isinstance(questions, list) else []
        caps = ctx.session.client_capabilities
        if caps is None or caps.elicitation is None or not ctx.session.can_send_request:
            return text_result(unanswerable_text(questions))
        reply = await ctx.session.elicit_form(
            questions_message(questions),
            questions_schema(questions),
            related_request_id=ctx.request_id,
        )
        if reply.action == "accept":
            answers = answers_from(reply.content, len(questions))
            await asyncio.to_thread(self.session.answer, call_id, answers)
        else:
            await self.session.cancel(call_id)
        return None


async def _settle(task: asyncio.Task[None]) -> None:
    """Let a cancelled call's stream reach its terminal, then make sure the task is gone."""
    with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), CANCEL_GRACE_S)
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
