"""What an MCP client that misuses the protocol is told, so its developer knows what to fix.

* An unknown tool name is ``-32602`` (the spec's answer), naming the closest tool names, as
  the HTTP gateway, the CLI and Python do; ``data.suggestions`` lists them for a program.
* A request before ``initialize`` on a handshake-era connection (protocol versions up to
  2025-11-25): the SDK refuses it with ``-32602 Invalid request parameters`` and empty data,
  the shape its validation errors have, which reads as a problem with the request's params.
  It is told instead, with the same code, that the connection needs ``initialize`` first.
"""

from __future__ import annotations

import difflib
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

#: The SDK's words for a request before the handshake (and for params that fail validation).
_SDK_REFUSAL = "Invalid request parameters"


def unknown_tool(name: str, known: list[str]) -> MCPError:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(f'`{c}`' for c in close)}?" if close else ""
    return MCPError(
        types.INVALID_PARAMS, f"Unknown tool `{name}`.{hint}", data={"suggestions": close}
    )


async def handshake_first(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """Server middleware: the SDK's pre-handshake refusal, reworded."""
    try:
        return await call_next(ctx)
    except MCPError as err:
        if err.code != types.INVALID_PARAMS or err.error.message != _SDK_REFUSAL:
            raise
        # SDK 2.3 gives middleware no public handle on the connection (as in server.py).
        if ctx.session._connection.initialize_accepted:
            raise
        raise MCPError(
            types.INVALID_PARAMS,
            f"`{ctx.method}` came before `initialize`: this connection speaks a protocol "
            "version with a handshake, so send `initialize` (then "
            "`notifications/initialized`) first",
            data={"method": ctx.method},
        ) from None
