"""The session's tool set served over MCP (``toolhub mcp``), on the SDK's low-level ``Server``
so that progress, cancellation and elicitation follow toolhub's semantics exactly:

* progress items become ``notifications/progress`` when the client sent a progress token
  (numbered, so monotonically increasing; merged when they come too fast);
* an MCP cancellation cancels the toolhub call for real (``Session.cancel``), not just the
  request handler;
* a failed call is an ``isError: true`` result the model can read; an unknown tool name is a
  protocol error (``-32602``), as the spec asks, naming the tools it is close to; a request
  before ``initialize`` on a handshake-era connection says to send ``initialize`` first
  (``misuse.py``);
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
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged

import toolhub
from toolhub.core import CallResult, Progress, new_call_id
from toolhub.tracing import TraceContext, carrier_of

from .call_questions import CallQuestions
from .call_results import text_result, to_mcp_result, wants_output
from .changes import ToolListChanges
from .elicit import answers_from, questions_message, questions_schema, unanswerable_text
from .misuse import handshake_first, unknown_tool
from .progress import ProgressRelay
from .task_status import Listen
from .tasks import (
    TASKS_EXTENSION,
    McpTasks,
    TaskParams,
    UpdateTaskParams,
    declares_tasks,
    task_policy,
)

if TYPE_CHECKING:
    from toolhub.session import Session

INPUT_REQUIRED = "input_required"
CANCEL_GRACE_S = 5.0
_END = object()


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
        self._bus_watched = False
        self.server: Server[Any] = _Server(
            name,
            version=toolhub.__version__,
            instructions="toolhub tools: files, search, commands and more, with live progress.",
            on_list_tools=self.list_tools,
            # The runner passes a mapping with an extension's resultType ("task") through as
            # it is; the SDK's annotation names only the core result types.
            on_call_tool=cast(Any, self.call_tool),
            on_subscriptions_listen=self.listen,
        )
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self.initialized
        )
        self.changes = ToolListChanges(session.toolset, lambda: session.definitions("mcp"))
        self.tasks = McpTasks(session)
        self.questions = CallQuestions(session, self.tasks.states, self._follow)
        self._listen = Listen(self.bus, self.tasks)
        self.server.middleware.append(handshake_first)
        self.server.extensions[TASKS_EXTENSION] = {}
        self.server.add_request_handler("tasks/get", TaskParams, self.tasks.get)
        self.server.add_request_handler("tasks/update", UpdateTaskParams, self.tasks.update)
        self.server.add_request_handler("tasks/cancel", TaskParams, self.tasks.cancel)

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
        """A 2026-07-28 client's change stream: list changes (the bus, fed on the server's
        loop once the first stream opens, carries each to every stream) and, for the tasks it
        names, their status (``task_status.py``)."""
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
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """The call's result; for a client that declared the tasks extension, a task handle
        instead when the call outlasts the policy's wait (``tasks.py``); on a 2026-07-28
        request, the call's questions (``call_questions.py``)."""
        if params.name not in self.session.toolset.entries:
            raise unknown_tool(params.name, list(self.session.toolset.entries))
        if params.request_state is not None or params.input_responses:
            # A retry with the answers to a call's questions (``call_questions.py``).
            resumed = await self.questions.resume(ctx, params)
            call_id, queue, pump = resumed.call_id, resumed.queue, resumed.pump
            if resumed.unanswered is not None:  # asked again: the retry answered nothing
                return self.questions.ask(ctx, call_id, resumed.unanswered, queue, pump)
        else:
            call_id = new_call_id()
            queue = asyncio.Queue()
            trace = carrier_of(params.meta)  # ``_meta.traceparent``: the caller's span
            pump = asyncio.create_task(
                self._pump(params.name, params.arguments, call_id, queue, trace)
            )
        return await self._answer(ctx, params, call_id, queue, pump)

    async def _answer(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        call_id: str,
        queue: asyncio.Queue[object],
        pump: asyncio.Task[None],
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """What the request answers: the result, a task, or the call's questions."""
        mode, after_s, ttl_s = task_policy()
        loop = asyncio.get_running_loop()
        task_at = None
        if mode != "never" and declares_tasks(ctx):
            task_at = loop.time() + (0.0 if mode == "always" else after_s)

        async def send(progress: float, message: str | None) -> None:
            await ctx.session.report_progress(progress, None, message)

        relay = ProgressRelay(send)
        finished = handed = False
        try:
            while True:
                try:
                    wait = None if task_at is None else max(task_at - loop.time(), 0.0)
                    item = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    handed = True
                    await relay.flush()
                    return await self.tasks.create(
                        ctx,
                        params.name,
                        call_id,
                        queue,
                        ttl_s,
                        relay=_after_task(ctx, params, relay),
                    )
                if isinstance(item, CallResult):
                    finished = True
                    await relay.flush()
                    return to_mcp_result(item, with_output=wants_output(ctx))
                if item is _END:
                    finished = True
                    return text_result(f"`{params.name}` ended without a result", is_error=True)
                assert isinstance(item, Progress)
                if item.kind == "custom" and item.subkind == INPUT_REQUIRED:
                    if task_at is not None:
                        # The question is asked through the task (input_required).
                        handed = True
                        await relay.flush()
                        return await self.tasks.create(
                            ctx,
                            params.name,
                            call_id,
                            queue,
                            ttl_s,
                            first=item,
                            relay=_after_task(ctx, params, relay),
                        )
                    if self.questions.can_ask(ctx):
                        # 2026-07-28 without tasks: the questions are this request's result.
                        handed = True
                        await relay.flush()
                        return self.questions.ask(ctx, call_id, item.payload, queue, pump)
                    early = await self._ask(ctx, call_id, item.payload)
                    if early is not None:
                        return early
                await relay.push(item)
        finally:
            if not handed:
                with anyio.CancelScope(shield=True):
                    if not finished:
                        await self.session.cancel(call_id)
                    await _settle(pump)

    async def _pump(
        self,
        name: str,
        arguments: Any,
        call_id: str,
        queue: asyncio.Queue[object],
        trace: TraceContext | None = None,
    ) -> None:
        """Drains the call into ``queue`` on its own task, so that a cancelled MCP request can
        still cancel the call (and the call's stream ends with its cancelled terminal)."""
        try:
            # Cancelled explicitly (a cancelled request, not a task); a task's call outlives
            # this server's restart on its worker.
            items = self.session.stream(
                name, arguments or {}, call_id=call_id, cancel_on_exit=False, trace_context=trace
            )
            async for item in items:
                await queue.put(item)
        finally:
            await queue.put(_END)

    async def _follow(self, call_id: str, queue: asyncio.Queue[object]) -> None:
        """A call another replica started, followed by id into ``queue``."""
        try:
            async for item in self.session.follow(call_id):
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


def _after_task(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, relay: ProgressRelay
) -> ProgressRelay | None:
    """Progress of a call that became a task, still sent as ``notifications/progress`` with
    the request's token, on the connection (the request itself is answered): numbered on from
    where the request's own notifications stopped. None when the request asked for none."""
    token = params.meta.get("progress_token") if params.meta is not None else None
    if token is None:
        return None

    async def send(progress: float, message: str | None) -> None:
        await ctx.session.send_progress_notification(token, progress, None, message)

    later = ProgressRelay(send)
    later.count = relay.count
    return later


async def _settle(task: asyncio.Task[None]) -> None:
    """Let a cancelled call's stream reach its terminal, then make sure the task is gone."""
    with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), CANCEL_GRACE_S)
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
