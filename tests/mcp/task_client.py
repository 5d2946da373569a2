"""The MCP SDK's own client support for the tasks extension, and no more: ``ClientSession``
declares the extension (``extensions=``) on a 2026-07-28 connection (``discover``) and sends
any request (``send_request``); it has no models or polling for ``tasks/*``. The request
models are toolhub's client's (``toolhub.sources.mcp_task_polling``; fastmcp-tasks ships its own,
independently); answers are read as plain dicts, so the tests see the wire as sent."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from toolhub.mcp.call_results import OUTPUT_EXTENSION
from toolhub.sources.mcp_task_polling import TASKS_EXTENSION as TASKS
from toolhub.sources.mcp_task_polling import CancelTask, GetTask, TaskRequestParams, UpdateTask

ROOT = Path(__file__).resolve().parents[2]


class TaskResult(types.Result):
    """Any task-bearing answer, read loosely: the tests assert on its fields."""

    model_config = ConfigDict(extra="allow")


class TaskNote(BaseModel):
    """A ``notifications/tasks`` frame's params, read loosely."""

    model_config = ConfigDict(extra="allow")


class Heard:
    """What a client heard besides answers: ``notifications/tasks`` frames and listen acks."""

    def __init__(self) -> None:
        self.task_notes: list[dict[str, Any]] = []
        self.acks: list[dict[str, Any]] = []

    async def task_note(self, note: TaskNote) -> None:
        self.task_notes.append(note.model_dump(by_alias=True, mode="json"))

    async def message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/subscriptions/acknowledged":
            self.acks.append(message.params.model_dump(by_alias=True, mode="json"))


class TaskClient:
    def __init__(self, session: ClientSession, heard: Heard | None = None) -> None:
        self.session = session
        heard = heard or Heard()
        #: Every ``notifications/tasks`` frame received, and the listen acks.
        self.task_notes = heard.task_notes
        self.acks = heard.acks
        #: The server's answer to ``initialize`` (a handshake-era client only).
        self.initialized: types.InitializeResult | None = None

    async def listen_tasks(self, task_ids: list[str], **kinds: bool) -> dict[str, Any]:
        """``subscriptions/listen`` naming ``task_ids`` (and list-change ``kinds``); returns
        the listen result, sent when the server ends the stream."""
        return await self.send_raw(
            "subscriptions/listen", {"notifications": {"taskIds": task_ids, **kinds}}
        )

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call`` as sent: a ``CallToolResult`` or a task handle, as a dict."""
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=arguments)
        )
        raw = await self.session.send_request(request, TaskResult)
        return raw.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def get(self, task_id: str, state: str | None = None) -> dict[str, Any]:
        return await self._send(GetTask, task_id, state)

    async def cancel(self, task_id: str, state: str | None = None) -> dict[str, Any]:
        return await self._send(CancelTask, task_id, state)

    async def update(self, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
        return await self._send(UpdateTask, task_id, None, responses)

    async def send_raw(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Any method, as a client unaware of toolhub would send it."""

        class Raw(types.Request[dict[str, Any], str]):
            pass

        raw = await self.session.send_request(Raw(method=method, params=params), TaskResult)
        return raw.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _send(
        self,
        kind: Any,
        task_id: str,
        state: str | None,
        responses: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        params = TaskRequestParams(task_id=task_id, request_state=state, input_responses=responses)
        raw = await self.session.send_request(kind(params=params), TaskResult)
        return raw.model_dump(by_alias=True, mode="json", exclude_none=True)


#: How long a client waits for the server to answer its first probe (the process starting).
START_S = 120.0


async def discover(session: ClientSession) -> None:
    """``server/discover``, asked again while the server is still starting: the SDK gives one
    probe 10 s, and a busy machine can take longer than that to start a ``toolhub`` process."""
    deadline = time.monotonic() + START_S
    while True:
        try:
            await session.discover()
            return
        except MCPError as exc:
            if exc.code != types.REQUEST_TIMEOUT or time.monotonic() > deadline:
                raise


@asynccontextmanager
async def stdio_task_client(workspace: Path) -> AsyncIterator[TaskClient]:
    """A 2026-07-28 client declaring the extension, of ``toolhub mcp`` on stdio (the test
    server: the test tools over an embedded session in ``workspace``)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp.mcp_test_server", str(workspace)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, extensions={TASKS: {}}) as session,
    ):
        await discover(session)
        yield TaskClient(session)


@asynccontextmanager
async def task_client(
    url: str, token: str, *, declare: bool = True, handshake: bool = False
) -> AsyncIterator[TaskClient]:
    """A 2026-07-28 client of ``url`` (``…/mcp``) with bearer ``token``, declaring the tasks
    extension unless ``declare`` is false; ``handshake``: a handshake-era client instead
    (``initialize``, whose capabilities carry the same extensions)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        _session(read, write, declare) as (session, client),
    ):
        if handshake:
            client.initialized = await session.initialize()
        else:
            await discover(session)
        yield client


@asynccontextmanager
async def _session(
    read: Any, write: Any, declare: bool
) -> AsyncIterator[tuple[ClientSession, TaskClient]]:
    """A ``ClientSession`` whose ``TaskClient`` hears ``notifications/tasks`` (an extension
    notification: the SDK delivers it through a ``NotificationBinding``) and listen acks."""
    heard = Heard()
    binding = NotificationBinding(
        method="notifications/tasks", params_type=TaskNote, handler=heard.task_note
    )
    async with ClientSession(
        read,
        write,
        message_handler=heard.message,
        # Like toolhub's own client: the tasks extension, and typed outputs in ``_meta``.
        extensions={TASKS: {}, OUTPUT_EXTENSION: {}} if declare else None,
        notification_bindings=[binding],
    ) as session:
        yield session, TaskClient(session, heard)
