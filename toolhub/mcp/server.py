"""The session's tool set served over MCP (``toolhub mcp``), on the SDK's low-level ``Server``
so that progress, cancellation and elicitation follow toolhub's semantics exactly:

* progress items become ``notifications/progress`` when the client sent a progress token
  (numbered, so monotonically increasing; merged when they come too fast);
* an MCP cancellation cancels the toolhub call for real (``Session.cancel``), not just the
  request handler;
* a failed call is an ``isError: true`` result the model can read; an unknown tool name is a
  protocol error (``-32602``), as the spec asks;
* ``ask_user`` questions become an elicitation when the client supports it; otherwise the
  questions are the result, with a note to ask the user directly;
* every client is told ``notifications/tools/list_changed`` when the tool list changes
  (``changes.py``), and the ``tools.listChanged`` capability says so: on its connection after
  the handshake (protocol versions up to 2025-11-25), or on its ``subscriptions/listen``
  streams (2026-07-28, which has no handshake and no server-initiated stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

import toolhub
from toolhub.core import CallResult, Progress, new_call_id

from .changes import ToolListChanges
from .elicit import answers_from, questions_message, questions_schema, unanswerable_text
from .progress import ProgressRelay
from .results import OUTPUT_META_KEY

if TYPE_CHECKING:
    from toolhub.session import Session

INPUT_REQUIRED = "input_required"
CANCEL_GRACE_S = 5.0
_END = object()


def to_mcp_result(result: CallResult) -> types.CallToolResult:
    """``prompt_text`` (reminders and notes included) as the text, then the result's images.

    Clients differ in what they show the model: most show the text content, but some
    (pydantic-ai; openai-agents with ``use_structured_content``) show ``structuredContent``
    instead whenever a result has it, relying on the spec's rule that the text is then the
    serialized structured content. The model must read ``prompt_text`` in every client, so
    ``structuredContent`` is sent only when the text is exactly its JSON; otherwise the
    structured output travels in ``_meta`` under ``toolhub/output``, for programs (clients
    do not show ``_meta`` to models).
    """
    output = result.output
    value = output.value if output is not None and output.tag != "plain_text" else None
    twin = isinstance(value, dict) and _is_json_of(result.prompt_text, value)
    content: list[Any] = [types.TextContent(type="text", text=result.prompt_text)]
    content += [
        types.ImageContent(type="image", data=block.data, mime_type=block.mime_type or "image/png")
        for block in result.content
        if block.type == "image" and block.data
    ]
    return types.CallToolResult(
        content=content,
        structured_content=value if twin else None,
        meta={OUTPUT_META_KEY: value} if value is not None and not twin else None,
        is_error=result.is_error,
    )


def _is_json_of(text: str, value: dict[str, Any]) -> bool:
    if not text.lstrip().startswith("{"):
        return False
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


class _Server(Server[Any]):
    """The SDK server declaring ``tools.listChanged``. The streamable-HTTP session manager
    builds each connection's options with a bare ``create_initialization_options()``, so the
    default is set here rather than passed in by the stdio transport alone."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class ToolhubMcpServer:
    """MCP handlers over one session; ``server`` is the SDK server to run on a transport.
    ``close()`` stops watching the session's tool list and ends the listen streams."""

    def __init__(self, session: Session, name: str = "toolhub") -> None:
        self.session = session
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._bus_watched = False
        self.server: Server[Any] = _Server(
            name,
            version=toolhub.__version__,
            instructions="toolhub tools: files, search, commands and more, with live progress.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=self.listen,
        )
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self.initialized
        )
        self.changes = ToolListChanges(session.toolset, lambda: session.definitions("mcp"))

    def close(self) -> None:
        self.changes.close()
        self._listen.close()

    async def initialized(
        self, ctx: ServerRequestContext[Any], params: types.NotificationParams
    ) -> None:
        """The handshake is done: from now on the connection hears of tool list changes,
        until it closes. (SDK 2.3 gives handlers no public handle on the connection, only the
        per-request session proxy that holds it.)"""
        connection: Connection = ctx.session._connection
        unsubscribe = self.changes.subscribe(connection.send_tool_list_changed)
        connection.exit_stack.callback(unsubscribe)

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026-07-28 client's change stream (the SDK's handler): the bus, fed on the
        server's loop once the first stream opens, carries each change to every stream."""
        if not self._bus_watched:
            self._bus_watched = True
            self.changes.subscribe(self._publish_change)
        return await self._listen(ctx, params)

    async def _publish_change(self) -> None:
        await self.bus.publish(ToolsListChanged())

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
