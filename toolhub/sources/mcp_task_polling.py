"""The client side of MCP tasks: an external MCP server that answers a long ``tools/call`` with
a task handle is polled to the result, its ``statusMessage`` streamed as the call's progress.

toolhub's MCP client (``mcp_link.py``) declares the tasks extension on 2026-07-28 connections,
and the SDK parses a ``resultType: "task"`` answer into ``CreatedTask`` (the claim registered
here). ``drive`` then polls ``tasks/get`` at the server's ``pollIntervalMs`` (at least 50 ms,
at most 2 s), echoing the newest ``requestState``, until the task ends; a toolhub call
cancelled meanwhile sends ``tasks/cancel`` before it ends. A task that asks for input
(``input_required``, its ``inputRequests``) is answered with ``tasks/update`` when the call can
ask its caller (``answer``: ``mcp_elicit.py``); otherwise it is cancelled and the call fails
saying why.

A caller that can record the task durably passes ``TaskHooks``: the handle is handed to
``created`` before the first poll, and a cancel for which ``leave_running`` says so (this
attempt of the call ends, another takes the task up) stops polling without ``tasks/cancel``.
``resume`` polls such a recorded task from another process (``mcp_task_resume.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.session import ClientSession
from pydantic import ConfigDict, Field

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
MIN_POLL_S = 0.05
MAX_POLL_S = 2.0
CANCEL_TIMEOUT_S = 5.0

OnMessage = Callable[[str], Awaitable[None]]
#: A task's ``inputRequests`` -> its ``inputResponses`` (None: not ones the caller can answer).
Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class _TaskFields(types.Result):
    model_config = ConfigDict(populate_by_name=True, extra="allow")

    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class CreatedTask(_TaskFields):
    """A ``tools/call`` answered with a task handle. (Its ``requestState`` is not read: the
    SDK reserves that name on ``tools/call`` results for multi-round-trip requests, so the
    first ``tasks/get`` goes without one, as the extension's newest draft has it.)"""

    result_type: Literal["task"] = Field(alias="resultType")


class TaskState(_TaskFields):
    """A ``tasks/get`` answer: the task, with its outcome once it has one."""

    request_state: str | None = Field(default=None, alias="requestState")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")


class TaskRequestParams(types.RequestParams):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(serialization_alias="taskId")
    request_state: str | None = Field(default=None, serialization_alias="requestState")
    input_responses: dict[str, Any] | None = Field(
        default=None, serialization_alias="inputResponses"
    )


class GetTask(types.Request[TaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskRequestParams


class UpdateTask(types.Request[TaskRequestParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: TaskRequestParams


class CancelTask(types.Request[TaskRequestParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskRequestParams


class RemoteTaskLost(Exception):
    """A recorded task could not be polled again (the server no longer knows it, or cannot be
    reached): what the remote tool did is unknown."""


@dataclass(frozen=True, slots=True)
class TaskHooks:
    """What a caller that records tasks adds to the poll loop (see the module docstring)."""

    created: Callable[[CreatedTask], Awaitable[None]]
    leave_running: Callable[[], bool]


def task_claims() -> dict[str, list[ResultClaim[Any]]]:
    """What a ``ClientSession`` needs to parse a task handle (``result_claims=``)."""
    return {
        TASKS_EXTENSION: [
            ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve_claim)
        ]
    }


async def _resolve_claim(created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    """For the SDK's high-level ``Client``, which resolves claims itself."""
    return await drive(ctx.session, created, None)


async def drive(
    session: ClientSession,
    created: CreatedTask,
    on_message: OnMessage | None,
    hooks: TaskHooks | None = None,
    answer: Answer | None = None,
) -> types.CallToolResult:
    """Poll the task to its end; its result as the call's. Cancelling this cancels the task
    (unless ``hooks`` say to leave it running)."""
    if hooks is not None:
        await hooks.created(created)
    return await _poll(session, created.task_id, created, on_message, hooks, answer)


async def resume(
    session: ClientSession, task_id: str, on_message: OnMessage | None, hooks: TaskHooks | None
) -> types.CallToolResult:
    """Poll a task another process got the handle of, at once and without a ``requestState``
    (that process's newest one is not recorded: it changes on every poll, and the extension
    lets a first ``tasks/get`` go without one). An unknown task raises the server's error."""
    return await _poll(session, task_id, None, on_message, hooks)


async def _poll(
    session: ClientSession,
    task_id: str,
    current: _TaskFields | None,
    on_message: OnMessage | None,
    hooks: TaskHooks | None,
    answer: Answer | None = None,
) -> types.CallToolResult:
    """``current``: what the server said last (None: ask it now)."""
    state: str | None = None
    last_message = None
    try:
        while True:
            if current is None:
                params = TaskRequestParams(task_id=task_id, request_state=state)
                polled = await session.send_request(GetTask(params=params), TaskState)
                state = polled.request_state or None
                current = polled
            message = current.status_message
            if on_message is not None and message and message != last_message:
                last_message = message
                await on_message(message)
            if isinstance(current, TaskState):
                ended = _ended(current)
                if ended is not None:
                    return ended
                if current.status == "input_required":
                    responses = await _answered(answer, current.input_requests)
                    if responses is not None:
                        params = TaskRequestParams(
                            task_id=task_id, request_state=state, input_responses=responses
                        )
                        await session.send_request(UpdateTask(params=params), types.Result)
                        current = None
                        continue
                    await _cancel(session, task_id, state)
                    return _error(
                        f"the MCP server's task {task_id} asks for input toolhub cannot give "
                        "(sampling, roots, or no caller to ask); it was cancelled"
                    )
            await asyncio.sleep(_interval(current.poll_interval_ms))
            current = None
    except asyncio.CancelledError:
        if hooks is None or not hooks.leave_running():
            with anyio.CancelScope(shield=True):
                await _cancel(session, task_id, state)
        raise


async def _answered(
    answer: Answer | None, requests: dict[str, Any] | None
) -> dict[str, Any] | None:
    if answer is None or not requests:
        return None
    return await answer(requests)


def _ended(task: TaskState) -> types.CallToolResult | None:
    if task.status == "completed":
        return types.CallToolResult.model_validate(task.result or {})
    if task.status == "cancelled":
        return _error(task.status_message or "the MCP server cancelled the task")
    if task.status == "failed":
        error = task.error or {}
        return _error(str(error.get("message") or task.status_message or "the task failed"))
    return None


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _interval(poll_interval_ms: int | None) -> float:
    seconds = (poll_interval_ms or 500) / 1000
    return min(max(seconds, MIN_POLL_S), MAX_POLL_S)


async def _cancel(session: ClientSession, task_id: str, state: str | None) -> None:
    params = TaskRequestParams(task_id=task_id, request_state=state)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(
            session.send_request(CancelTask(params=params), types.Result), CANCEL_TIMEOUT_S
        )
