"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663) over toolhub calls.

A client that declares the extension on its ``tools/call`` may get a task handle
(``resultType: "task"``) instead of the result; it then polls ``tasks/get``, answers questions
with ``tasks/update`` and stops the work with ``tasks/cancel``. The server decides per call
(``TOOLHUB_MCP_TASKS``): ``auto`` (the default) answers directly when the call ends within
``TOOLHUB_MCP_TASK_AFTER_S`` (1 s) and hands out a task otherwise, so short calls cost nothing
more; ``always`` makes every call of a declaring client a task; ``never`` turns tasks off.

A task is a handle on one toolhub call (``task_records.py``): the call keeps running on the
fleet whatever happens to the MCP connection or the replica that made the task, its outcome is
in the call's record, and any replica of the session answers for it. A call re-run after its
worker was lost, or failed because of it, says so in its result, as every call does; the task
then completes with that result. Only the replica that made a task follows its stream, to keep
``statusMessage`` at the latest progress and to surface ``ask_user`` as ``input_required``;
without it polls still see the call's status, just not its latest progress line.

Server duties the extension names, and how they are met: the record is written before the handle is
returned; task ids carry 192 random bits; every request is checked against the task's principal
(``principal_of`` in ``task_protocol.py``: the tenant and key id the HTTP ``Guard`` found, the
process owner over stdio), and a task of another principal is "not found", as one that does not
exist; ``requestState`` is HMAC-bound to task, principal and expiry (``request_state.py``); the TTL
is the record's (``TOOLHUB_MCP_TASK_TTL_S``, 1 h), after which the task is gone. The 2025-11-25
experimental tasks (``tasks/result``, the ``task`` request param) are not served: they are not
wire-compatible with the extension and the SDK's clients no longer speak them.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from redis.exceptions import RedisError

from toolhub.core import CallResult, Progress, closing
from toolhub.distributed.records import TERMINAL_STATUSES

from .call_results import for_client, to_mcp_result, wants_output
from .elicit import answers_from
from .progress import ProgressRelay, progress_message
from .request_state import RequestStates, StateRefused
from .task_protocol import (
    INPUT_KEY,
    MISSING_CAPABILITY,
    POLL_INTERVAL_MS,
    TASKS_EXTENSION,
    TaskParams,
    UpdateTaskParams,
    declares_tasks,
    elicitation_request,
    iso_time,
    principal_of,
    task_not_found,
)
from .task_records import TaskRecord, records_for

if TYPE_CHECKING:
    from toolhub.session import Session


class McpTasks:
    """The task side of one MCP server: creating tasks and answering ``tasks/*``."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.records, client = records_for(session)
        self.states = RequestStates.for_fleet(client)
        self._followers: set[asyncio.Task[None]] = set()
        #: The latest progress line of each task this replica follows.
        self._messages: dict[str, str] = {}
        #: Listen streams waiting for news of a task this replica follows (``task_status.py``).
        self._watchers: dict[str, set[asyncio.Event]] = {}

    # -- creating ---------------------------------------------------------------------------------

    async def create(
        self,
        ctx: ServerRequestContext[Any],
        tool: str,
        call_id: str,
        queue: asyncio.Queue[object],
        ttl_s: float,
        *,
        first: object | None = None,
        relay: ProgressRelay | None = None,
    ) -> dict[str, Any]:
        """Make the task of a running call (its items arrive on ``queue``; ``first``, one
        already taken from it), durably, and return the ``CreateTaskResult``. From now on this
        replica follows the call."""
        principal = principal_of(ctx)
        now = time.time()
        record = TaskRecord(
            task_id="task_" + secrets.token_urlsafe(24),
            call_id=call_id,
            principal=principal,
            tool=tool,
            created_at=now,
            expires_at=now + ttl_s if ttl_s > 0 else None,
            updated_at=now,
        )
        await asyncio.to_thread(self.records.put, record)
        follower = asyncio.create_task(self._follow(record, queue, first, relay))
        self._followers.add(follower)
        follower.add_done_callback(self._followers.discard)
        return {
            **self._task_fields(record, "working", "The call is running."),
            "resultType": "task",
            "requestState": self.states.issue(record.task_id, principal),
        }

    async def _follow(
        self,
        record: TaskRecord,
        queue: asyncio.Queue[object],
        first: object | None,
        relay: ProgressRelay | None = None,
    ) -> None:
        """Drain the call's items: keep its latest progress line and open questions; store
        the MCP result once it ends."""
        task_id = record.task_id
        try:
            while True:
                item, first = (first, None) if first is not None else (await queue.get(), None)
                if isinstance(item, CallResult):
                    status = "cancelled" if _cancelled(item) else "completed"
                    # Stored whole; each poll gets what its client asked for (``get``).
                    result = to_mcp_result(item, with_output=True).model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
                    await asyncio.to_thread(self.records.put, record.ended(status, result))
                    self._wake(task_id)
                    return
                if not isinstance(item, Progress):
                    return  # the stream ended without a result: polls read the call's record
                if item.kind == "custom" and item.subkind == "input_required":
                    payload = item.payload if isinstance(item.payload, dict) else {}
                    questions = payload.get("questions")
                    record = record.asking(questions if isinstance(questions, list) else [])
                    await asyncio.to_thread(self.records.put, record)
                    self._wake(task_id)
                    continue
                message = progress_message(item)
                if message:
                    self._messages[task_id] = message[-500:]
                    self._wake(task_id)
                relay = await _still_relayed(relay, item)
        finally:
            self._messages.pop(task_id, None)
            self._wake(task_id)

    def watch(self, task_id: str) -> tuple[asyncio.Event, Callable[[], None]]:
        """An event set whenever this replica learns something new of the task (a progress
        line, a question, its end), and the callable that stops the watch."""
        event = asyncio.Event()
        self._watchers.setdefault(task_id, set()).add(event)

        def stop() -> None:
            watchers = self._watchers.get(task_id)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._watchers[task_id]

        return event, stop

    def _wake(self, task_id: str) -> None:
        for event in self._watchers.get(task_id, ()):
            event.set()

    # -- tasks/get, tasks/update, tasks/cancel ----------------------------------------------------

    def _admit(self, ctx: ServerRequestContext[Any], params: TaskParams) -> TaskRecord:
        if not declares_tasks(ctx):
            raise MCPError(
                MISSING_CAPABILITY,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        record = self.records.get(params.task_id)
        principal = principal_of(ctx)
        if record is None or record.principal != principal:
            raise task_not_found()
        if params.request_state is not None:
            try:
                self.states.check(params.request_state, record.task_id, principal)
            except StateRefused as refused:
                raise MCPError(types.INVALID_PARAMS, f"Invalid requestState: {refused}") from None
        return record

    async def get(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        record = await asyncio.to_thread(self._admit, ctx, params)
        detail = await self.detail(record)
        if isinstance(detail.get("result"), dict):
            detail["result"] = for_client(detail["result"], with_output=wants_output(ctx))
        detail["requestState"] = self.states.issue(record.task_id, record.principal)
        return detail

    async def update(
        self, ctx: ServerRequestContext[Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        record = await asyncio.to_thread(self._admit, ctx, params)
        questions = record.questions
        reply = params.input_responses.get(INPUT_KEY)
        if questions is not None and record.result is None and isinstance(reply, dict):
            # Answered once: the key is not outstanding any more (a repeat is ignored).
            await asyncio.to_thread(self.records.put, record.asking(None))
            if reply.get("action") == "accept":
                answers = answers_from(reply.get("content"), len(questions))
                who = f"mcp:{record.principal}"
                await asyncio.to_thread(self.session.answer, record.call_id, answers, principal=who)
            else:
                await self.session.cancel(record.call_id)
        return {"resultType": "complete"}

    async def cancel(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        record = await asyncio.to_thread(self._admit, ctx, params)
        if record.result is None:
            await self.session.cancel(record.call_id)
        return {"resultType": "complete"}

    async def detail(self, record: TaskRecord) -> dict[str, Any]:
        """What ``tasks/get`` shows (and ``notifications/tasks`` carries): the stored outcome,
        else the call's record read now."""
        if record.result is not None and record.status is not None:
            return self._ended(record, record.status, record.result)
        call = await self.session.record(record.call_id)
        if call is None:
            return {
                **self._task_fields(record, "failed", None),
                "statusMessage": "toolhub no longer has this call's record; its outcome is unknown",
                "error": {"code": types.INTERNAL_ERROR, "message": "call record lost"},
            }
        status = str(call.get("status"))
        if status in TERMINAL_STATUSES:
            result = await self._result_of(record.call_id)
            if result is not None:
                task_status = "cancelled" if _cancelled(result) else "completed"
                wire = to_mcp_result(result, with_output=True).model_dump(
                    by_alias=True, mode="json", exclude_none=True
                )
                await asyncio.to_thread(self.records.put, record.ended(task_status, wire))
                return self._ended(record, task_status, wire)
            return {
                **self._task_fields(record, "failed", None),
                "statusMessage": f"the call ended ({status}) but its result could not be read",
                "error": {"code": types.INTERNAL_ERROR, "message": "call result unreadable"},
            }
        questions = record.questions
        if questions is not None:
            return {
                **self._task_fields(record, "input_required", "Waiting for the user's answers."),
                "inputRequests": {INPUT_KEY: elicitation_request(questions)},
            }
        message = self._messages.get(record.task_id) or await self._latest(record.call_id)
        return self._task_fields(record, "working", message or _status_line(call))

    async def _latest(self, call_id: str) -> str | None:
        """The call's newest progress line from its event stream, for a replica that does not
        follow the call itself (distributed sessions; None embedded)."""
        store = getattr(self.session.executor, "store", None)
        if store is None:
            return None
        try:
            item = await asyncio.to_thread(store.latest_progress, call_id)
        except RedisError:
            return None
        message = progress_message(item) if item is not None else None
        return message[-500:] if message else None

    async def _result_of(self, call_id: str) -> CallResult | None:
        try:
            async with (
                asyncio.timeout(10),
                closing(self.session.follow(call_id)) as items,
            ):
                async for item in items:
                    if isinstance(item, CallResult):
                        return item
        except TimeoutError:
            return None
        return None

    def _ended(self, record: TaskRecord, status: str, result: dict[str, Any]) -> dict[str, Any]:
        fields = self._task_fields(record, status, None)
        if status == "completed":
            fields["result"] = result
            fields["statusMessage"] = "The call failed." if result.get("isError") else "Done."
        else:
            fields["statusMessage"] = "The call was cancelled."
        return fields

    def _task_fields(self, record: TaskRecord, status: str, message: str | None) -> dict[str, Any]:
        ttl = record.expires_at - record.created_at if record.expires_at is not None else None
        fields: dict[str, Any] = {
            "resultType": "complete",
            "taskId": record.task_id,
            "status": status,
            "createdAt": iso_time(record.created_at),
            "lastUpdatedAt": iso_time(record.updated_at or record.created_at),
            "ttlMs": None if ttl is None else int(ttl * 1000),
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if message:
            fields["statusMessage"] = message
        return fields

    async def close(self) -> None:
        for follower in list(self._followers):
            follower.cancel()


def _cancelled(result: CallResult) -> bool:
    return result.error is not None and result.error.kind == "cancelled"


def _status_line(call: dict[str, Any]) -> str:
    status = str(call.get("status") or "unknown")
    attempts = call.get("attempts")
    if status == "running" and isinstance(attempts, int) and attempts > 1:
        return f"running (attempt {attempts}: an earlier worker was lost)"
    if "queue" not in call:  # an embedded session's call runs in this process
        return {"running": "running"}.get(status, f"status: {status}")
    return {"queued": "queued for a worker", "running": "running on a worker"}.get(
        status, f"status: {status}"
    )


async def _still_relayed(relay: ProgressRelay | None, item: Progress) -> ProgressRelay | None:
    """Pass ``item`` on as ``notifications/progress`` to the request that became the task, while
    its stream is open (stdio, or an HTTP request still streaming); None once it is not."""
    if relay is None:
        return None
    try:
        await relay.push(item)
    except Exception:  # the request's stream closed: the task's status carries progress now
        return None
    return relay
