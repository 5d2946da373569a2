"""langchain-mcp-adapters (0.3, on mcp 1.x) as a user runs it against ``toolhub mcp``: run with
the python of its own virtualenv (see test_third_party_clients.py), never the project's.

    python langchain_mcp_client.py '{"transport": "stdio", "command": ..., "args": [...], ...}'
    python langchain_mcp_client.py '{"transport": "streamable_http", "url": ..., "headers": ...}'

Prints one JSON line: the tool names and the ToolMessages a model would be given.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

BACKGROUND = {
    "command": "sleep 0.2; echo bg-finished",
    "description": "background job",
    "is_background": True,
}
LATER = {"command": "sleep 2; echo later", "description": "a later call"}


def _text(content: Any) -> str:
    """A ToolMessage's content as the model reads it: a string, or its text blocks."""
    if isinstance(content, str):
        return content
    return "".join(b["text"] if isinstance(b, dict) else str(b) for b in content)


async def _invoke(tools: dict[str, BaseTool], name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Invoke as an agent does, with a ToolCall, so the tool answers with a ToolMessage."""
    call = {"type": "tool_call", "id": f"call-{len(args)}", "name": name, "args": args}
    message = await tools[name].ainvoke(call)
    assert isinstance(message, ToolMessage), type(message)
    return {
        "status": message.status,
        "tool_call_id": message.tool_call_id,
        "content": _text(message.content),
    }


async def _calls(listed: list[BaseTool]) -> dict[str, Any]:
    tools = {t.name: t for t in listed}
    return {
        "names": sorted(tools),
        "read_file_schema": tools["read_file"].args,
        "read": await _invoke(tools, "read_file", {"path": "hello.txt"}),
        "outside": await _invoke(tools, "read_file", {"path": "/etc/passwd"}),
        "background": await _invoke(tools, "bash", BACKGROUND),
        "later": await _invoke(tools, "bash", LATER),
    }


async def main(connection: dict[str, Any]) -> dict[str, Any]:
    client = MultiServerMCPClient({"toolhub": connection})  # type: ignore[dict-item]
    if connection["transport"] == "stdio":
        # One session for the whole run (the adapters' recipe for stateful servers): a new
        # stdio session is a new server process, which knows nothing of the background task.
        async with client.session("toolhub") as session:
            return await _calls(await load_mcp_tools(session))
    # The adapters' default, get_tools(): each call opens its own MCP session on the server.
    out = await _calls(await client.get_tools())
    refused = dict(connection, headers={"Authorization": "Bearer wrong"})
    try:
        await MultiServerMCPClient({"toolhub": refused}).get_tools()  # type: ignore[dict-item]
        out["wrong_token"] = "accepted"
    except BaseException as err:  # an ExceptionGroup from the SDK's task group
        out["wrong_token"] = repr(err)
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
