"""openai-agents' own MCP client (``MCPServerStdio``, ``Agent(mcp_servers=...)``) against
``toolhub mcp`` with ``convert_schemas_to_strict``: every tool toolhub lists converts to a strict
``FunctionTool``, ``use_tool`` included. The SDK converts the schema the server lists, so that
schema declares ``use_tool``'s ``tool_input`` as JSON text (strict mode cannot say "an object
with any keys"); a call through it, with the text a strict model sends or with an object,
reaches the external tool.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from agents import Agent, FunctionTool, RunContextWrapper
from agents.mcp import MCPServerStdio
from agents.tool_context import ToolContext

from tests.mcp.stdio_support import TOOLHUB, toolhub_args, toolhub_env
from toolhub import Session

pytestmark = pytest.mark.timeout(180)

TIME = {"time": {"command": ["python", "-m", "mcp_server_time", "--local-timezone", "UTC"]}}


async def _through_agents(tmp_path: Path, config: Path) -> dict[str, Any]:
    """The tools an Agent gets from ``toolhub mcp`` with strict conversion, and what calls of
    ``use_tool`` return: ``tool_input`` as JSON text (what a strict model sends) and as an
    object (what the validator takes too)."""
    workspace = tmp_path / "ws"
    server = MCPServerStdio(
        params={
            "command": TOOLHUB,
            "args": toolhub_args(workspace, "--config", str(config)),
            "env": toolhub_env(tmp_path),
            "cwd": str(workspace),
        },
        client_session_timeout_seconds=60,
    )
    async with server:
        agent = Agent(
            name="coder", mcp_servers=[server], mcp_config={"convert_schemas_to_strict": True}
        )
        tools = {
            t.name: t
            for t in await agent.get_mcp_tools(RunContextWrapper(None))
            if isinstance(t, FunctionTool)
        }
        said = []
        for n, (zone, tool_input) in enumerate(
            [
                ("Europe/Paris", json.dumps({"timezone": "Europe/Paris"})),
                ("Asia/Tokyo", {"timezone": "Asia/Tokyo"}),
                (None, "[1, 2]"),
            ]
        ):
            arguments = json.dumps(
                {"tool_name": "time__get_current_time", "tool_input": tool_input}
            )
            context = ToolContext(
                None, tool_name="use_tool", tool_call_id=f"call-{n}", tool_arguments=arguments
            )
            said.append((zone, str(await tools["use_tool"].on_invoke_tool(context, arguments))))
    return {"tools": tools, "said": said}


def test_every_tool_is_strict_use_tool_too_and_it_still_calls(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    config = tmp_path / "toolhub.yaml"
    config.write_text(yaml.safe_dump({"mcp_servers": TIME}))
    session = Session.embedded(config, tmp_path / "ws", state_dir=tmp_path / "state")
    try:
        listed = {d["name"]: d["inputSchema"] for d in session.definitions("mcp")}
    finally:
        session.close()
    assert "use_tool" in listed and "time__get_current_time" in listed
    seen = asyncio.run(_through_agents(tmp_path, config))
    tools: dict[str, FunctionTool] = seen["tools"]
    assert sorted(tools) == sorted(listed)
    assert [name for name, t in tools.items() if not t.strict_json_schema] == []
    tool_input = tools["use_tool"].params_json_schema["properties"]["tool_input"]
    assert tool_input["type"] == ["string", "null"] and "JSON object" in tool_input["description"]
    assert tools["use_tool"].params_json_schema["required"] == ["tool_name", "tool_input"]
    for zone, said in seen["said"]:
        if zone is None:  # text that is not an object: a typed error naming the parameter
            assert "`tool_input` must be a JSON object, got list" in said, said
        else:
            assert zone in said and "Tool `use_tool` failed" not in said, said
            assert "error" not in said.lower(), said
