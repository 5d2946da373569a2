"""LlamaIndex (llama-index-tools-mcp 0.6, llama-index-core 0.14) as a user runs it against
``toolhub mcp --transport http``: ``McpToolSpec(BasicMCPClient(url, headers=...))
.to_tool_list_async()``, then each ``FunctionTool`` called as an agent calls it (the client
opens an MCP session for each call). Run with the python of its own
virtualenv (see test_agent_frameworks.py), never the project's.

    python llama_index_client.py '{"url": ..., "headers": {...}, "calls": [...]}'

Prints one JSON line: each tool's parameters as LlamaIndex hands them
to a model (``ToolMetadata.to_openai_tool()``, built from the pydantic model it makes of the
MCP schema), and for each call the text a ``FunctionAgent`` puts in its tool message (the
text blocks of the ``ToolOutput``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from llama_index.core.base.llms.types import TextBlock
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec


async def main(connection: dict[str, Any]) -> dict[str, Any]:
    client = BasicMCPClient(connection["url"], headers=connection["headers"])
    tools = {t.metadata.name: t for t in await McpToolSpec(client=client).to_tool_list_async()}
    parameters = {
        name: tool.metadata.to_openai_tool()["function"]["parameters"]
        for name, tool in tools.items()
    }
    said = []
    for call in connection["calls"]:
        output = await tools[call["name"]].acall(**call["args"])
        text = "".join(b.text for b in output.blocks if isinstance(b, TextBlock))
        said.append({"name": call["name"], "text": text, "content": output.content})
    return {"parameters": parameters, "responses": said}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]))), default=str))
