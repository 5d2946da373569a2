"""smolagents (1.26, its MCP support through mcpadapt, which needs ``mcp<2``) as a user runs it
against ``toolhub mcp``: ``MCPClient(StdioServerParameters(...))`` and a ``ToolCallingAgent``
executing tool calls the way it does for a model's (``execute_tool_call``: its own argument
check, then the tool). Run with the python of its own virtualenv (see
test_agent_frameworks.py), never the project's.

    python smolagents_client.py '{"command": ..., "args": [...], "env": {...}, "calls": [...]}'

Prints one JSON line: the MCP schemas listed, each tool's ``inputs`` (what smolagents shows the
model), and for each call what the agent makes of it: its observation text, or the error its
own check raised. Each call runs twice: as smolagents has the tool, and with ``nullable: true``
set on every optional input (the hint smolagents' argument check reads).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp import StdioServerParameters
from smolagents import MCPClient, Model, ToolCallingAgent


def _execute(agent: ToolCallingAgent, name: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"observation": str(agent.execute_tool_call(name, dict(args)))}
    except Exception as err:  # what the agent would log and show the model as its error
        return {"error": f"{type(err).__name__}: {err}"}


def main(connection: dict[str, Any]) -> dict[str, Any]:
    params = StdioServerParameters(
        command=connection["command"], args=connection["args"], env=connection["env"]
    )
    with MCPClient(params) as tools:
        agent = ToolCallingAgent(tools=tools, model=Model(model_id="scripted"))
        listed = json.loads(json.dumps({t.name: t.inputs for t in tools}))
        said = [
            {"name": call["name"], **_execute(agent, call["name"], call["args"])}
            for call in connection["calls"]
        ]
        for tool in tools:
            required = set(connection["required"].get(tool.name, []))
            for key, schema in tool.inputs.items():
                if key not in required:
                    schema["nullable"] = True
        hinted = [
            {"name": call["name"], **_execute(agent, call["name"], call["args"])}
            for call in connection["calls"]
        ]
    return {"inputs": listed, "responses": said, "with_nullable": hinted}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1])), default=str))
