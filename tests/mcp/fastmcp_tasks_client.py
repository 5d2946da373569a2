"""Run by the fastmcp-tasks virtualenv's python (``test_mcp_tasks_fastmcp.py``): FastMCP's own
client, with the fastmcp-tasks client extension it registers itself, against a toolhub MCP
server. Prints one JSON line of what it saw."""

import asyncio
import json
import sys

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks import call_tool_task


async def main(url: str, token: str) -> dict:
    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
    async with Client(transport) as client:
        # Transparent: the client polls the task to its result.
        slept = await client.call_tool("nap", {"seconds": 1.5})
        # Explicit: a handle, its status, then a cancel.
        handle = await call_tool_task(client, "nap", {"seconds": 60})
        status = await handle.status()
        await handle.cancel()
        for _ in range(100):
            after = await handle.status()
            if after.status != "working":
                break
            await asyncio.sleep(0.1)
        return {
            "slept": slept.structured_content,
            "slept_error": slept.is_error,
            "task_id": handle.task_id,
            "status": status.status,
            "after_cancel": after.status,
        }


print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
