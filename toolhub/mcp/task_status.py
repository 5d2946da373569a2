"""Task status pushed on ``subscriptions/listen`` (``notifications/tasks`` of the tasks
extension), besides the SDK's list-change events.

A client that names ``taskIds`` in its listen request's ``notifications`` gets, for each task it
may see, a ``notifications/tasks`` frame carrying the complete task as ``tasks/get`` would show
it at that moment (status, ``statusMessage``, ``inputRequests``, the inlined result), every time
that changes: it need not poll. The frames are fed from the call's own progress: in the replica
that follows the task, by its follower's news (``McpTasks.watch``); in any other replica of a
fleet session, by following the call's event stream in Redis from its newest event. A re-check
every ``TOOLHUB_MCP_TASK_RECHECK_S`` (2 s) covers what neither source reports (a record
rewritten by another replica). Bursts are coalesced: at most one frame per ``MIN_GAP_S`` a
task.

What the extension requires, and how: the ack lists the task ids the server agreed to (a task
of another principal, or none at all, is left out of it, as ``tasks/get`` would say "not
found"); a client that names ``taskIds`` without declaring the extension gets ``-32021``; no
``notifications/progress`` or ``notifications/message`` go on this stream. A stream that asked
for tasks only ends gracefully (its result as the last frame) once every task it watches has
ended; one that also asked for list changes stays open until the client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ServerEvent, event_matches, event_to_notification
from pydantic import BaseModel

from toolhub.core import CallResult

from .call_results import for_client, wants_output
from .task_protocol import MISSING_CAPABILITY, TASKS_EXTENSION, declares_tasks, principal_of
from .task_records import TaskRecord
from .tasks import McpTasks

logger = logging.getLogger("toolhub.mcp.tasks")

MIN_GAP_S = 0.05
TERMINAL = frozenset({"completed", "failed", "cancelled"})
_CLOSE = object()


class TaskStatusNotification(BaseModel):
    """``notifications/tasks``: the task as ``tasks/get`` shows it (no ``resultType``)."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


class Listen:
    """``subscriptions/listen`` of one MCP server: the SDK's handler when no task is named,
    else this one (list changes from ``bus`` and task status, on one stream)."""

    def __init__(self, bus: SubscriptionBus, tasks: McpTasks) -> None:
        self.bus = bus
        self.tasks = tasks
        self.plain = ListenHandler(bus)
        self._streams: set[asyncio.Queue[object]] = set()

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        wanted = requested_task_ids(params.notifications)
        if wanted is None:
            return await self.plain(ctx, params)
        if not declares_tasks(ctx):
            raise MCPError(
                MISSING_CAPABILITY,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        records = await asyncio.to_thread(self._visible, wanted, principal_of(ctx))
        return await self._serve(ctx, ctx.request_id, params.notifications, records)

    def _visible(self, wanted: list[str], principal: str) -> list[TaskRecord]:
        found = (self.tasks.records.get(task_id) for task_id in dict.fromkeys(wanted))
        return [r for r in found if r is not None and r.principal == principal]

    async def _serve(
        self,
        ctx: ServerRequestContext[Any],
        subscription_id: types.RequestId,
        requested: types.SubscriptionFilter,
        records: list[TaskRecord],
    ) -> types.SubscriptionsListenResult:
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        honored = _honored(requested)
        uris = frozenset(honored.resource_subscriptions or ())
        lists = any(honored.model_dump(exclude_none=True).values())
        queue: asyncio.Queue[object] = asyncio.Queue()

        def deliver(event: ServerEvent) -> None:
            if event_matches(honored, uris, event):
                queue.put_nowait(event)

        with_output = wants_output(ctx)
        unsubscribe = self.bus.subscribe(deliver) if lists else (lambda: None)
        self._streams.add(queue)
        watchers = [asyncio.create_task(self._watch(r, queue.put_nowait)) for r in records]
        try:
            ack = types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(
                    notifications=types.SubscriptionFilter(
                        **honored.model_dump(exclude_none=True),
                        taskIds=[r.task_id for r in records],
                    ),
                    _meta=meta,
                )
            )
            await ctx.session.send_notification(ack, related_request_id=subscription_id)
            async for frame in _frames(queue, watchers, keep_open=lists):
                if isinstance(frame, dict):
                    if isinstance(frame.get("result"), dict):
                        frame["result"] = for_client(frame["result"], with_output=with_output)
                    note: Any = TaskStatusNotification(params={**frame, "_meta": meta})
                else:
                    note = event_to_notification(cast(ServerEvent, frame), meta)
                await ctx.session.send_notification(note, related_request_id=subscription_id)
        finally:
            unsubscribe()
            self._streams.discard(queue)
            for watcher in watchers:
                watcher.cancel()
        return types.SubscriptionsListenResult(_meta=meta)

    async def _watch(self, record: TaskRecord, put: Callable[[object], None]) -> None:
        """Put the task's detail whenever it changes, until it ends."""
        news, stop = self.tasks.watch(record.task_id)
        follower = asyncio.create_task(self._follow(record.call_id, news))
        try:
            await self._changes(record, news, put)
        except Exception:  # a stream must end, not hang: the client can still poll
            logger.exception("task %s: status notifications stopped", record.task_id)
        finally:
            stop()
            follower.cancel()

    async def _changes(
        self, record: TaskRecord, news: asyncio.Event, put: Callable[[object], None]
    ) -> None:
        last: tuple[Any, ...] | None = None
        recheck = float(os.environ.get("TOOLHUB_MCP_TASK_RECHECK_S", "2.0"))
        while True:
            current = await asyncio.to_thread(self.tasks.records.get, record.task_id)
            detail = await self.tasks.detail(current or record)
            detail.pop("resultType", None)
            key = (detail["status"], detail.get("statusMessage"), "inputRequests" in detail)
            if key != last:
                last = key
                put(detail)
            if detail["status"] in TERMINAL:
                return
            news.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(news.wait(), recheck)
            await asyncio.sleep(MIN_GAP_S)

    async def _follow(self, call_id: str, news: asyncio.Event) -> None:
        """Set ``news`` at each new event of the call (a fleet call's stream, from its newest
        event on; an embedded call reports only its end here)."""
        call = await self.tasks.session.record(call_id)
        after = int(call.get("seq") or 0) if call is not None else 0
        async for item in self.tasks.session.follow(call_id, after_seq=after):
            news.set()
            if isinstance(item, CallResult):
                return

    def close(self) -> None:
        """End every stream gracefully (each sends its result as the last frame)."""
        self.plain.close()
        for queue in list(self._streams):
            queue.put_nowait(_CLOSE)


def requested_task_ids(notifications: types.SubscriptionFilter) -> list[str] | None:
    """The ``taskIds`` a listen request names (None: it names none)."""
    extra = notifications.model_extra or {}
    ids = extra.get("taskIds", extra.get("task_ids"))
    if not isinstance(ids, list) or not ids:
        return None
    return [i for i in ids if isinstance(i, str)]


def _honored(requested: types.SubscriptionFilter) -> types.SubscriptionFilter:
    """The list-change kinds this server delivers: every one asked for (as the SDK does)."""
    return types.SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions or ()) or None,
    )


async def _frames(
    queue: asyncio.Queue[object], watchers: list[asyncio.Task[None]], *, keep_open: bool
) -> AsyncIterator[object]:
    """What to send, in order, until a close or (tasks only) every watcher is done."""
    while True:
        if queue.empty() and not keep_open and all(w.done() for w in watchers):
            return
        getter = asyncio.ensure_future(queue.get())
        pending = [w for w in watchers if not w.done()]
        await asyncio.wait([getter, *pending], return_when=asyncio.FIRST_COMPLETED)
        if not getter.done():
            getter.cancel()
            continue
        frame = getter.result()
        if frame is _CLOSE:
            return
        yield frame
