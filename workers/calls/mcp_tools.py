"""The worker's side of stdio MCP servers on a fleet: it starts them, and says what they serve.

A fleet's dispatcher starts no stdio server (``toolhub/sources/mcp_fleet_tools.py``); it asks a
worker with a signed ``toolhub.mcp_tools`` message. The worker builds the session's tool set as
for a call (``ToolSets.get``: the signed session record, the stored config re-admitted against
this worker's policy, the servers started inside the session's sandbox) and publishes their
tools, signed with the fleet key (``toolhub/distributed/mcp_tools.py``). A tool set that is
refused (policy, signature, sandbox) starts nothing and publishes why, so the dispatcher fails
at once with the reason instead of waiting. A tool set with stdio servers writes its list again
each time a server lists its tools again (``list_changed``), while it lives in this worker's
cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from toolhub.core import ToolError
from toolhub.distributed.mcp_tools import PublishedTools, publish
from toolhub.distributed.store import RedisStore
from toolhub.redaction import redact
from toolhub.sandbox import SandboxUnavailable
from toolhub.sources.mcp_fleet_tools import listed_tools, on_relisted, stdio_servers
from toolhub.tenancy import tenant_of_session
from toolhub.toolset import ToolSet

if TYPE_CHECKING:
    from toolhub.sources.attach import AttachedSources

    from .toolsets import ToolSets

logger = logging.getLogger("toolhub.worker.mcp_tools")


def tools_publisher(
    store: RedisStore,
    session_id: str,
    config_hash: str,
    toolset: ToolSet,
    sources: AttachedSources | None,
) -> Callable[[], None] | None:
    """For a tool set with stdio servers: what publishes their tools now, also called each time
    a server lists them again; None for one without."""
    if not stdio_servers(toolset.config):
        return None

    def publish_now() -> None:
        _publish(store, session_id, config_hash, listed_tools(toolset, sources))

    on_relisted(sources, publish_now)
    return publish_now


def answer_request(toolsets: ToolSets, session_id: str, config_hash: str) -> None:
    """A dispatcher's ``toolhub.mcp_tools``: build the session's tool set (starting its stdio
    servers) and publish their tools, or why nothing was started."""
    try:
        runtime = toolsets.get(session_id, config_hash)
    except (ToolError, SandboxUnavailable) as refused:
        why = redact(str(refused))
        logger.warning(
            "session %s (tenant %s): stdio MCP servers not started: %s",
            session_id,
            tenant_of_session(session_id),
            why,
        )
        _publish(toolsets.store, session_id, config_hash, PublishedTools(refused=why))
        return
    if runtime.publish_tools is not None:
        runtime.publish_tools()
    else:
        _publish(toolsets.store, session_id, config_hash, PublishedTools())


def _publish(store: RedisStore, session_id: str, config_hash: str, tools: PublishedTools) -> None:
    try:
        publish(
            store.client,
            store.keys,
            session_id,
            config_hash,
            tools,
            store.settings.session_ttl_seconds,
        )
    except RedisError as exc:
        logger.warning("session %s: could not publish its MCP tools: %s", session_id, exc)
