"""Stdio MCP servers on a fleet: workers run them, dispatchers show their tools.

A config's stdio server (``mcp_servers.<name>.command``) is a program the tenant's config
names. On a fleet it must not run on the dispatcher's host (the gateway's, beside its secrets
and outside every worker's sandbox), so the dispatcher starts none: a worker does, inside the
session's sandbox (``mcp_stdio_launch.py``), and publishes what it lists
(``toolhub/distributed/mcp_tools.py``). This module is both ends of that:

* ``listed_tools`` (worker): the tools the tool set's stdio servers serve, or why a server is
  not connected, as ``PublishedTools``; ``on_relisted`` calls back when a server lists again
  (``notifications/tools/list_changed``), so the list is written again;
* ``worker_stdio_tools`` (dispatcher, once the session is stored): asks a worker for the list,
  waits for it (bounded) and registers the tools (``source={"mcp": name}``) with a handler that
  refuses to run here: ``CeleryExecutor`` sends every call of a stdio server's tool to a
  worker, which builds the session's tool set with its own instance of the server and runs the
  call there. A list the workers refused (the operator policy, a sandbox they cannot enforce)
  or that never came fails the session's creation with ``ConfigError`` naming each server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

from toolhub.core import ConfigError, ConfigViolation, Progress, ToolContext, ToolError
from toolhub.distributed import mcp_tools
from toolhub.distributed.celery_app import MCP_TOOLS_TASK
from toolhub.distributed.mcp_tools import PublishedTools, ToolsUnpublished
from toolhub.distributed.settings import queue_for
from toolhub.distributed.signing import fleet_keys
from toolhub.distributed.store import RedisStore
from toolhub.errors import RedisUnavailable
from toolhub.tenancy.principal import tenant_of_session
from toolhub.toolset import ExternalSpec, ToolSet, ToolSetConfig

from .merge import ExternalSources, SourceTool

if TYPE_CHECKING:
    from celery import Celery

    from .attach import AttachedSources
    from .mcp_client import McpConnections

logger = logging.getLogger("toolhub.sources.mcp_fleet_tools")


def stdio_servers(config: ToolSetConfig) -> list[str]:
    """The names of the config's stdio MCP servers, sorted."""
    return sorted(name for name, server in config.mcp_servers.items() if server.command)


def listed_tools(toolset: ToolSet, sources: AttachedSources | None) -> PublishedTools:
    """What the tool set's stdio servers serve now (its visible tools, per server), and why
    each server without tools is not connected."""
    servers = stdio_servers(toolset.config)
    tools: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    for spec in toolset.external_specs():
        server = spec.source.get("mcp")
        if isinstance(server, str) and server in tools:
            tools[server].append(
                {
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": spec.input_schema,
                }
            )
    connections = _connections(sources)
    errors: dict[str, str] = {}
    for name in servers:
        link = connections.links.get(name) if connections is not None else None
        if link is None:
            errors[name] = "not started: its config is invalid"
        elif link.error and not tools[name]:
            errors[name] = link.error
    return PublishedTools(tools, errors)


def on_relisted(sources: AttachedSources | None, callback: Callable[[], None]) -> None:
    """Call ``callback`` each time one of the tool set's MCP servers has listed its tools."""
    connections = _connections(sources)
    if connections is not None:
        connections.listed_listeners.append(lambda _server: callback())


def _connections(sources: AttachedSources | None) -> McpConnections | None:
    if sources is None or not sources.connections:
        return None
    # The MCP SDK is imported where a session has MCP servers, not at every worker's start
    # (about a second of CPU: a worker or a gateway starts without it).
    from .mcp_client import McpConnections

    return next((c for c in sources.connections if isinstance(c, McpConnections)), None)


class WorkerTools:
    """The tools of a session's stdio servers as a dispatcher shows them; ``close()`` removes
    them (the session's sources close it)."""

    def __init__(self, toolset: ToolSet) -> None:
        self.sources = ExternalSources.of(toolset)
        self.groups: list[str] = []

    def close(self) -> None:
        for group in self.groups:
            self.sources.remove(group)
        self.groups.clear()


def show_worker_tools(toolset: ToolSet, published: PublishedTools) -> tuple[WorkerTools, list[str]]:
    """Register what a worker published for the tool set's stdio servers; returns the
    registration and the session's warnings (servers not connected, tools not shown). Only a
    server of the config may be published, and only under its own ``server__`` prefix."""
    shown = WorkerTools(toolset)
    warnings = [
        f"MCP server {name!r} is not connected on the worker yet: {why}"
        for name, why in sorted(published.errors.items())
    ]
    for server in stdio_servers(toolset.config):
        specs = [
            SourceTool(
                ExternalSpec(
                    tool["name"], tool["description"], tool["input_schema"], {"mcp": server}
                ),
                _runs_on_a_worker(server),
            )
            for tool in published.tools.get(server, [])
            if tool["name"].startswith(f"{server}__")
        ]
        group = f"mcp:{server}"
        shown.groups.append(group)
        for name in shown.sources.set_group(group, specs):
            warnings.append(f"MCP tool {name!r} not shown: the name is taken or mode is not `all`")
    return shown, warnings


def _runs_on_a_worker(server: str) -> Callable[..., AsyncIterator[Progress]]:
    """The dispatcher's handler of a stdio server's tool: never run (``CeleryExecutor`` sends
    these calls to a worker); should anything run it here, it fails instead of starting the
    server on this host."""

    async def handle(args: dict[str, Any], ctx: ToolContext) -> AsyncIterator[Progress]:
        raise ToolError.execution(
            f"MCP server `{server}` runs on the fleet's workers only; this process starts none"
        )
        yield  # an async generator, as external handlers may be

    return handle


def worker_stdio_tools(
    toolset: ToolSet,
    store: RedisStore,
    app: Celery,
    session_id: str,
    config_hash: str,
    timeout: float = mcp_tools.WAIT_S,
) -> tuple[WorkerTools, list[str]]:
    """Ask a worker to start the tool set's stdio servers (the session must be stored), wait
    for their tools and show them; returns the registration (to close with the session) and
    the session's warnings. ``ConfigError`` when the workers refused the session or none
    answered within ``timeout``; ``RedisUnavailable`` when the request cannot be sent."""
    servers = stdio_servers(toolset.config)
    keys = store.keys
    try:
        # A list still here is from before this request: wait for the answer to this one.
        store.client.delete(keys.mcp_tools(session_id, config_hash))
        app.send_task(
            MCP_TOOLS_TASK,
            kwargs=mcp_tools.request(session_id, config_hash),
            queue=queue_for("fast"),
            ignore_result=True,
        )
        published = mcp_tools.wait_for(
            store.client, keys, fleet_keys(), session_id, config_hash, timeout
        )
    except (RedisError, OperationalError, KombuError, OSError) as exc:
        raise RedisUnavailable(store.settings.redis_url, exc) from None
    except ToolsUnpublished as late:
        raise _not_started(session_id, servers, f"{late} (is a worker running?)") from None
    if published.refused is not None:
        raise _not_started(session_id, servers, f"the workers refused it: {published.refused}")
    return show_worker_tools(toolset, published)


def _not_started(session_id: str, servers: list[str], why: str) -> ConfigError:
    logger.warning(
        "session %s (tenant %s): stdio MCP server(s) %s not started: %s",
        session_id,
        tenant_of_session(session_id),
        ", ".join(servers),
        why,
    )
    return ConfigError(
        [
            ConfigViolation(
                "(config)",
                f"stdio MCP server {name!r} not started on the fleet's workers: {why}",
                category="mcp_stdio",
                field_path=f"mcp_servers.{name}.command",
            )
            for name in servers
        ]
    )
