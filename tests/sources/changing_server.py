"""``python -m tests.sources.changing_server MARKER_DIR``: a tiny MCP server (stdio) whose tool list
changes at runtime, with a slow tool that reports progress and notices cancellation.

* ``grow`` adds a tool ``extra_<n>`` and sends ``notifications/tools/list_changed``;
* ``slow`` reports progress every 50 ms for ``seconds``; when cancelled it writes
  ``MARKER_DIR/slow.cancelled``;
* ``fail`` returns an ``isError`` result;
* ``ask`` sends ``elicitation/create`` whatever the client declared, and answers with the
  client's error as an ``isError`` result (what SDK servers do with a refused request).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

MARKERS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
extra: list[str] = []
OBJECT = {"type": "object", "properties": {"seconds": {"type": "number"}}}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    names = ["grow", "slow", "fail", "ask", "dotted.name", *extra]
    return types.ListToolsResult(
        tools=[types.Tool(name=n, description=f"{n} tool", input_schema=OBJECT) for n in names]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "grow":
        extra.append(f"extra_{len(extra) + 1}")
        await ctx.session.send_tool_list_changed()
        return _text(f"added {extra[-1]}")
    if params.name == "slow":
        steps = round(float(args.get("seconds", 1)) / 0.05)
        try:
            for step in range(1, steps + 1):
                await ctx.session.report_progress(step, steps, f"step {step}")
                await anyio.sleep(0.05)
        except anyio.get_cancelled_exc_class():
            (MARKERS / "slow.cancelled").write_text("yes")
            raise
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="slept")],
            structured_content={"steps": steps},
        )
    if params.name == "ask":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        try:
            answer = await ctx.session.elicit_form("Your name?", schema, ctx.request_id)
        except MCPError as refused:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"elicitation: {refused}")],
                is_error=True,
            )
        return _text(f"answered: {answer.action}")
    if params.name == "fail":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="it broke")], is_error=True
        )
    return _text(f"{params.name} called with {args}")


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("changing", on_list_tools=list_tools, on_call_tool=call_tool)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


if __name__ == "__main__":
    anyio.run(main)
