"""One MCP server as a source of tools: its connection, on the private loop of its
``McpConnections`` (``mcp_client.py``), and its tools' handlers.

The link connects (a stdio command, started inside the session's sandbox by
``mcp_stdio_launch.py``, or a streamable-HTTP URL), lists the tools, registers them through the
merge of ``ExternalSources`` (``source={"mcp": server}``), refreshes them on
``notifications/tools/list_changed`` (or a 2026-07-28 server's change stream) and reconnects
with backoff when the server goes away. While the server is down its tools stay listed and a
call fails with a clear error, so the definitions a model sees do not flicker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolhub.core import ToolError
from toolhub.env_refs import expand_all, expand_env
from toolhub.redaction import redact
from toolhub.toolset import ExternalSpec, McpServerConfig

from .mcp_calls import external_handler
from .mcp_elicit import Asker, answer_inputs, task_answers
from .mcp_naming import client_name
from .mcp_outcome import OUTPUT_META_KEY
from .mcp_stdio_launch import StdioRefused, stdio_launch
from .mcp_task_polling import (
    TASKS_EXTENSION,
    CreatedTask,
    RemoteTaskLost,
    TaskHooks,
    drive,
    task_claims,
)
from .mcp_task_polling import resume as resume_task
from .merge import SourceTool

if TYPE_CHECKING:
    from .mcp_client import McpConnections

logger = logging.getLogger("toolhub.sources.mcp_client")

CONNECT_TIMEOUT_S = 20.0
PING_INTERVAL_S = 15.0
MAX_BACKOFF_S = 30.0
#: An HTTP server's client: 30 s to connect, write or wait for the pool, 5 min between bytes
#: read (a server may hold a response stream open), as the MCP SDK's own transports default.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
PYTHON_ALIASES = frozenset({"python", "python3"})


class ServerLink:
    """One MCP server: its connection (on the background loop) and its tools' handlers."""

    def __init__(self, name: str, config: McpServerConfig, owner: McpConnections) -> None:
        self.name = name
        self.config = config
        self.owner = owner
        self.session: ClientSession | None = None
        self.error: str | None = None
        self.tools: dict[str, str] = {}
        #: The calls in flight on this link, each able to ask its caller (``mcp_elicit.py``).
        self.askers: list[Asker] = []
        self.first_attempt = asyncio.Event()
        self._stop = asyncio.Event()
        self._broken = asyncio.Event()
        self._refresh_wanted = asyncio.Event()

    # -- connection lifecycle (background loop) ---------------------------------------------------

    async def run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                async with AsyncExitStack() as stack:
                    self.session = await self._connect(stack)
                    await self.refresh()
                    self.error = None
                    backoff = 0.5
                    self.first_attempt.set()
                    await self._serve()
            except StdioRefused as refused:
                self.error = str(refused)
                logger.warning("%s", refused)
                return
            except Exception as exc:
                self.error = redact(f"{type(exc).__name__}: {exc}")
                logger.warning("MCP server %r: %s", self.name, self.error)
            finally:
                self.session = None
                self.first_attempt.set()
            if self._stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _connect(self, stack: AsyncExitStack) -> ClientSession:
        cfg = self.config
        if cfg.command:
            command, *args = (expand_env(part) for part in cfg.command)
            if command in PYTHON_ALIASES:
                command = sys.executable
            owner = self.owner
            argv, env = stdio_launch(
                self.name, [command, *args], expand_all(cfg.env), owner.cwd, owner.runner
            )
            params = StdioServerParameters(
                command=argv[0], args=argv[1:], env=env, cwd=str(owner.cwd)
            )
            # The server's stderr goes to this process's own (a worker's log), named here: the
            # SDK's default is whatever ``sys.stderr`` was when it was imported, and a Celery
            # worker has since replaced it with a logging proxy that has no file descriptor.
            errlog = sys.__stderr__ or sys.stderr
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            assert cfg.url is not None
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=expand_all(cfg.headers), timeout=HTTP_TIMEOUT)
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(expand_env(cfg.url), http_client=http)
            )
        session = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                message_handler=self._on_message,
                elicitation_callback=self._elicit,
                # toolhub/output: a toolhub server sends its typed outputs back (``mcp_outcome``)
                extensions={TASKS_EXTENSION: {}, OUTPUT_META_KEY: {}},
                result_claims=task_claims(),
            )
        )
        await asyncio.wait_for(_negotiate(session, modern=cfg.tasks), CONNECT_TIMEOUT_S)
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # No handshake, no server-initiated stream: list changes come on a listen stream.
            listener = asyncio.ensure_future(self._listen(session))
            stack.callback(listener.cancel)
        return session

    async def _listen(self, session: ClientSession) -> None:
        """A 2026-07-28 server's tool list changes, as ``list_changed`` is on a legacy one; a
        lost stream breaks the link (it reconnects and lists again)."""
        try:
            async with listen(session, tools_list_changed=True) as changes:
                async for _ in changes:
                    self._refresh_wanted.set()
        except MCPError as err:
            logger.info("MCP server %r offers no change stream (%s)", self.name, err.message)
            return
        except Exception as exc:
            logger.warning("MCP server %r: change stream lost (%s)", self.name, exc)
        self._broken.set()

    async def _serve(self) -> None:
        """Until stopped or broken: refresh on list_changed, ping now and then."""
        while not (self._stop.is_set() or self._broken.is_set()):
            waiters = [
                asyncio.ensure_future(e.wait())
                for e in (self._stop, self._broken, self._refresh_wanted)
            ]
            done, pending = await asyncio.wait(
                waiters, timeout=PING_INTERVAL_S, return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in pending:
                waiter.cancel()
            if self._refresh_wanted.is_set():
                self._refresh_wanted.clear()
                await self.refresh()
            elif not done and self.session is not None:
                await asyncio.wait_for(self.session.send_ping(), 10)
        self._broken.clear()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh_wanted.set()
        elif isinstance(message, Exception):
            logger.warning("MCP server %r transport error: %s", self.name, redact(str(message)))
            self._broken.set()

    async def _elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """A handshake-era server's ``elicitation/create``: it names no call, so it is relayed
        to the caller of the link's only call in flight, and answered ``cancel`` otherwise."""
        if len(self.askers) != 1:
            logger.info("MCP server %r asked with %d calls in flight", self.name, len(self.askers))
            return types.ElicitResult(action="cancel")
        return await self.askers[0].elicit(self.name, params)

    async def refresh(self) -> None:
        """List the server's tools and hand them to the merge."""
        assert self.session is not None
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await asyncio.wait_for(self.session.list_tools(params=params), 30)
            listed += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        tools: dict[str, str] = {}
        specs: list[SourceTool] = []
        for tool in listed:
            name = client_name(self.name, tool.name)
            if name is None or name in tools:
                self.owner.warn(f"MCP server {self.name!r}: tool {tool.name!r} has no usable name")
                continue
            tools[name] = tool.name
            spec = ExternalSpec(
                name, tool.description or "", dict(tool.input_schema), {"mcp": self.name}
            )
            specs.append(SourceTool(spec, self.handler(tool.name, name)))
        self.tools = tools
        lost = self.owner.sources.set_group(f"mcp:{self.name}", specs)
        for name in lost:
            self.owner.warn(f"MCP tool {name!r} not shown: the name is taken or mode is not `all`")
        for listener in self.owner.listed_listeners:
            listener(self.name)

    async def stop(self) -> None:
        self._stop.set()

    def _not_connected(self) -> str:
        reason = f" ({self.error})" if self.error else ""
        return f"MCP server `{self.name}` is not connected{reason}"

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: Any,
        hooks: TaskHooks | None = None,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        session = self.session
        if session is None:
            raise ToolError.execution(self._not_connected())

        async def send(
            responses: types.InputResponses | None = None, state: str | None = None
        ) -> types.CallToolResult | types.Result:
            return await session.call_tool(
                tool,
                arguments,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
                allow_claimed=True,
            )

        try:
            result = await send()
            if isinstance(result, types.InputRequiredResult):
                result = await answer_inputs(self.name, result, asker, send)
            if isinstance(result, CreatedTask):
                answer = task_answers(self.name, asker)
                result = await drive(session, result, _status_progress(progress), hooks, answer)
        except MCPError as err:
            if err.code == types.INVALID_PARAMS:
                raise ToolError.invalid_arguments(err.message) from None
            if err.code == types.CONNECTION_CLOSED:
                self._broken.set()
            raise ToolError.execution(f"MCP server `{self.name}`: {err.message}") from None
        except Exception as exc:
            self._broken.set()
            detail = f"MCP server `{self.name}` went away ({type(exc).__name__}: {exc})"
            raise ToolError.execution(detail) from None
        assert isinstance(result, types.CallToolResult)
        return result

    async def resume(self, task_id: str, progress: Any, hooks: TaskHooks) -> types.CallToolResult:
        """Poll a task an earlier attempt of the call started. Whatever keeps it from being
        polled raises ``RemoteTaskLost``: the tool is never called in its place."""
        session = self.session
        if session is None:
            raise RemoteTaskLost(self._not_connected())
        try:
            return await resume_task(session, task_id, _status_progress(progress), hooks)
        except MCPError as err:
            if err.code == types.CONNECTION_CLOSED:
                self._broken.set()
            raise RemoteTaskLost(f"MCP server `{self.name}` answered: {err.message}") from None
        except Exception as exc:
            self._broken.set()
            detail = f"MCP server `{self.name}` went away ({type(exc).__name__}: {exc})"
            raise RemoteTaskLost(detail) from None

    def handler(self, tool: str, client: str) -> Any:
        return external_handler(self, tool, client)


def _status_progress(progress: Any) -> Any:
    """A task's ``statusMessage`` as a progress notification of the call."""

    async def message(text: str) -> None:
        await progress(0.0, None, text)

    return message


async def _negotiate(session: ClientSession, *, modern: bool) -> None:
    """With ``modern`` (the server config's ``tasks``), 2026-07-28 (``server/discover``) when
    the server speaks it; else, and by default, the handshake."""
    if modern:
        try:
            await session.discover()
            return
        except MCPError:
            pass
    await session.initialize()
