"""``python probe_server.py``: a stdio MCP server that reports what it can reach, for the tests
that show a config's server runs confined. It imports only the MCP SDK (no toolhub, no tests
package), so it starts from a copy inside a workspace.

* ``read {path}``: the file's text, or the error;
* ``write {path, text}``: ``written``, or the error;
* ``env {name}``: the variable's value, or ``<unset>``;
* ``connect {port}``: whether a TCP connection to ``127.0.0.1:<port>`` opens.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SCHEMAS: dict[str, dict[str, Any]] = {
    "read": {"path": {"type": "string"}},
    "write": {"path": {"type": "string"}, "text": {"type": "string"}},
    "env": {"name": {"type": "string"}},
    "connect": {"port": {"type": "integer"}},
}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=name,
                description=f"probe: {name}",
                input_schema={"type": "object", "properties": props, "required": list(props)},
            )
            for name, props in SCHEMAS.items()
        ]
    )


def _probe(name: str, args: dict[str, Any]) -> str:
    try:
        if name == "read":
            with open(args["path"]) as handle:
                return handle.read()
        if name == "write":
            with open(args["path"], "w") as handle:
                handle.write(args["text"])
            return "written"
        if name == "env":
            return os.environ.get(args["name"], "<unset>")
        if name == "connect":
            with socket.create_connection(("127.0.0.1", int(args["port"])), timeout=5):
                return "connected"
    except OSError as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return f"unknown tool {name}"


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = _probe(params.name, params.arguments or {})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("probe", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
