"""A session config's ``mcp_servers`` as external tools (``server__tool``): one
``ServerLink`` per server (``mcp_link.py``), all on one private event loop (``LoopThread``).

``attach_mcp_servers`` is the one entry point for dispatchers (``Session.embedded`` and
``Session.connect``) and for workers building a session's tool set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toolhub.backends.process import ProcessRunner
from toolhub.loop_thread import LoopThread
from toolhub.redaction import redact
from toolhub.toolset import McpServerConfig, ToolSet

from .mcp_link import CONNECT_TIMEOUT_S, ServerLink
from .mcp_naming import valid_server_name
from .merge import ExternalSources

logger = logging.getLogger("toolhub.sources.mcp_client")


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
        self.loop = LoopThread("toolhub-mcp")
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
    session's commands are (``mcp_stdio_launch.py``)."""
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
