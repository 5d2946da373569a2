"""A session config's ``mcp_servers`` as external tools (``server__tool``).

Each server gets a link on a private event loop (see ``loop.py``) that connects (a stdio
command, started inside the session's sandbox by ``stdio_launch.py``, or a streamable-HTTP
URL), lists the tools, registers them through the merge pipeline of ``ExternalSources``
(``source={"mcp": server}``), refreshes them on ``notifications/tools/list_changed`` and
reconnects with backoff when the server goes away.
While a server is down its tools stay listed and a call fails with a clear error, so the
definitions a model sees do not flicker.

``attach_mcp_servers`` is the one entry point for dispatchers (``Session.embedded`` and
``Session.connect``) and for workers building a session's tool set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolhub.backends.process import ProcessRunner
from toolhub.core import ToolError
from toolhub.hub.env import expand_all, expand_env
from toolhub.hub.sources import ExternalSources, SourceTool
from toolhub.redaction import redact
from toolhub.toolset import ExternalSpec, McpServerConfig, ToolSet

from .external_calls import external_handler
from .loop import BackgroundLoop
from .naming import client_name, valid_server_name
from .remote_tasks import (
    TASKS_EXTENSION,
    CreatedTask,
    RemoteTaskLost,
    TaskHooks,
    drive,
    task_claims,
)
from .remote_tasks import resume as resume_task
from .stdio_launch import StdioRefused, stdio_launch

logger = logging.getLogger("toolhub.mcp.client")

CONNECT_TIMEOUT_S = 20.0
PING_INTERVAL_S = 15.0
MAX_BACKOFF_S = 30.0
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
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            assert cfg.url is not None
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=expand_all(cfg.headers))
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(expand_env(cfg.url), http_client=http)
            )
        session = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                message_handler=self._on_message,
                extensions={TASKS_EXTENSION: {}},
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
        self, tool: str, arguments: dict[str, Any], progress: Any, hooks: TaskHooks | None = None
    ) -> types.CallToolResult:
        session = self.session
        if session is None:
            raise ToolError.execution(self._not_connected())
        try:
            result = await session.call_tool(
                tool, arguments, progress_callback=progress, allow_claimed=True
            )
            if isinstance(result, CreatedTask):
                result = await drive(session, result, _status_progress(progress), hooks)
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


class McpConnections:
    """The live MCP servers of one tool set. ``aclose()`` (or ``close()``) disconnects them and
    removes their tools."""

    def __init__(
        self, toolset: ToolSet, servers: Mapping[str, McpServerConfig], cwd: str | None
    ) -> None:
        self.toolset = toolset
        self.sources = ExternalSources.of(toolset)
        #: The session's process runner: stdio servers start under its sandbox, in ``cwd``.
        self.runner = toolset.container.get(ProcessRunner)
        fallback = self.runner.root if self.runner is not None else Path.cwd()
        self.cwd = Path(cwd) if cwd is not None else fallback
        self.warnings: list[str] = []
        self.loop = BackgroundLoop()
        self.links: dict[str, ServerLink] = {}
        #: Called with a server's name each time its tools were listed (on the loop's thread).
        self.listed_listeners: list[Callable[[str], None]] = []
        self._runs: list[Any] = []
        self._closed = False
        for name, config in servers.items():
            problem = _config_problem(name, config)
            if problem:
                self.warn(problem)
                continue
            self.links[name] = ServerLink(name, config, self)

    def warn(self, message: str) -> None:
        message = redact(message)
        logger.warning(message)
        if message not in self.warnings:
            self.warnings.append(message)

    def start(self) -> Any:
        """Start every link; the returned future resolves when each has tried once."""

        async def started() -> None:
            links = list(self.links.values())
            for link in links:
                self._runs.append(asyncio.ensure_future(link.run()))
            await asyncio.gather(*(link.first_attempt.wait() for link in links))
            for link in links:
                if link.error:
                    self.warn(f"MCP server {link.name!r} is not connected yet: {link.error}")

        return self.loop.submit(started())

    def tools(self, server: str) -> list[str]:
        link = self.links.get(server)
        return sorted(link.tools) if link is not None else []

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        async def stop() -> None:
            for link in self.links.values():
                await link.stop()
            await asyncio.gather(*self._runs, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.loop.submit(stop()).result(timeout=15)
        self.loop.stop()
        for name in self.links:
            self.sources.remove(f"mcp:{name}")


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


def _config_problem(name: str, config: McpServerConfig) -> str | None:
    if not valid_server_name(name):
        return f"MCP server name {name!r} is invalid: use [A-Za-z0-9-] and single underscores"
    if bool(config.command) == bool(config.url):
        return f"MCP server {name!r} needs exactly one of `command` or `url`"
    return None


def _servers(servers: Mapping[str, McpServerConfig | dict[str, Any]]) -> dict[str, McpServerConfig]:
    return {
        name: cfg if isinstance(cfg, McpServerConfig) else McpServerConfig.model_validate(cfg)
        for name, cfg in servers.items()
    }


async def attach_mcp_servers(
    toolset: ToolSet,
    servers: Mapping[str, McpServerConfig | dict[str, Any]],
    *,
    timeout: float = CONNECT_TIMEOUT_S,
    cwd: str | None = None,
) -> McpConnections:
    """Connect the servers and register their tools; returns once each server has connected
    or failed its first attempt (failed ones keep retrying in the background). Stdio servers
    run in ``cwd`` (the session's workspace, as the assembler passes it), confined as the
    session's commands are (``stdio_launch.py``)."""
    connections = McpConnections(toolset, _servers(servers), cwd)
    future = connections.start()
    try:
        await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
    except TimeoutError:
        connections.warn(f"MCP servers still connecting after {timeout:g}s")
    return connections


def attach_mcp_servers_sync(
    toolset: ToolSet,
    servers: Mapping[str, McpServerConfig | dict[str, Any]],
    *,
    timeout: float = CONNECT_TIMEOUT_S,
    cwd: str | None = None,
) -> McpConnections:
    """``attach_mcp_servers`` for callers without a running loop (the session assembler)."""
    connections = McpConnections(toolset, _servers(servers), cwd)
    try:
        connections.start().result(timeout=timeout)
    except TimeoutError:
        connections.warn(f"MCP servers still connecting after {timeout:g}s")
    return connections
