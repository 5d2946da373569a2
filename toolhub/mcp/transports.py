"""Running the MCP server on stdio or on streamable HTTP (``/mcp``).

Over HTTP the same bearer token as the gateway (``TOOLHUB_API_TOKEN``) guards the endpoint, and
the same body limit applies. Over stdio the SDK points fd 1 at stderr while serving, so a tool's
child process can never write into the protocol stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.stdio import stdio_server

from toolhub.http_guard import DEFAULT_MAX_BODY, Guard
from toolhub.redaction import redact_access_log

from .server import ToolhubMcpServer

if TYPE_CHECKING:
    from toolhub.session import Session

MCP_PATH = "/mcp"


def run_stdio(session: Session) -> None:
    async def main() -> None:
        mcp = ToolhubMcpServer(session).server
        async with stdio_server() as (read, write):
            await mcp.run(read, write, mcp.create_initialization_options())

    anyio.run(main)


def http_app(session: Session, *, host: str, token: str | None = None) -> Any:
    """The streamable-HTTP ASGI app, guarded by the bearer token when one is set."""
    mcp = ToolhubMcpServer(session).server
    app = mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return Guard(app, token=token, max_body_bytes=DEFAULT_MAX_BODY)


def run_http(session: Session, *, host: str, port: int, token: str | None = None) -> None:
    redact_access_log()
    uvicorn.run(
        http_app(session, host=host, token=token),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=5,
    )
