"""Connect a config's MCP servers and hubs to a tool set, so their tools join it (and leave it
on close). The session assembler (``toolhub/assembly.py``) calls ``attach_toolset_sources``
for embedded sessions, connected ones and workers alike."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolhub.toolset import ToolSet


class AttachedSources:
    """The live external sources of one tool set; ``close()`` disconnects them all."""

    def __init__(self) -> None:
        self.connections: list[Any] = []
        self.warnings: list[str] = []

    def close(self) -> None:
        for connection in reversed(self.connections):
            connection.close()
        self.connections.clear()


def attach_toolset_sources(
    toolset: ToolSet, *, session_id: str, workspace: Path | None = None, stdio: bool = True
) -> AttachedSources | None:
    """None when the tool set's config names no MCP server and no hub to attach (nothing is
    imported or started then). MCP stdio servers run in ``workspace``; with ``stdio`` False
    (a fleet's dispatcher: workers run them, ``toolhub/sources/mcp_fleet_tools.py``) none starts."""
    config = toolset.config
    servers = {
        name: server for name, server in config.mcp_servers.items() if stdio or not server.command
    }
    if not servers and not config.hubs:
        return None
    attached = AttachedSources()
    if servers:
        from .mcp_client import attach_mcp_servers_sync

        cwd = str(workspace) if workspace is not None else None
        mcp = attach_mcp_servers_sync(toolset, servers, cwd=cwd)
        attached.connections.append(mcp)
        attached.warnings += mcp.warnings
    if config.hubs:
        from .hub import attach_hubs_sync

        hubs = attach_hubs_sync(toolset, config.hubs, session_id=session_id)
        attached.connections.append(hubs)
        attached.warnings += hubs.warnings
    return attached
