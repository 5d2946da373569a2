"""Running the MCP server on stdio or on streamable HTTP (``/mcp``).

Over HTTP the same bearer token as the gateway (``TOOLHUB_API_TOKEN``) guards the endpoint, and
the same body limit applies. Over stdio the SDK points fd 1 at stderr while serving, so a tool's
child process can never write into the protocol stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from toolhub.http_guard import DEFAULT_MAX_BODY, Guard
from toolhub.redaction import redact_access_log

from .server import ToolhubMcpServer

if TYPE_CHECKING:
    from toolhub.session import Session

MCP_PATH = "/mcp"


def run_stdio(session: Session) -> None:
    async def main() -> None:
        mcp = ToolhubMcpServer(session).server
        async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
            sink, source = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            tasks.start_soon(answer_malformed, read, sink, write)
            await mcp.run(source, write, mcp.create_initialization_options())

    anyio.run(main)


async def answer_malformed(
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Pass the messages on; answer each line that is not one, as JSON-RPC 2.0 requires:
    ``-32700 Parse error`` for text that is not JSON, ``-32600 Invalid Request`` for JSON
    that is not a JSON-RPC message, with ``id: null``. (The SDK hands such lines to the
    server as exceptions, which it only logs: the client would wait for an answer forever.)
    Blank lines are skipped."""
    async with sink:
        async for item in read:
            if not isinstance(item, Exception):
                await sink.send(item)
                continue
            reply = _malformed_reply(item)
            if reply is not None:
                await write.send(SessionMessage(reply))


def _malformed_reply(exc: Exception) -> JSONRPCError | None:
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    line = errors[0].get("input") if errors else None
    if isinstance(line, str) and not line.strip():
        return None
    parse = any(e.get("type") == "json_invalid" for e in errors) or not errors
    code, message = (PARSE_ERROR, "Parse error") if parse else (INVALID_REQUEST, "Invalid Request")
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


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
