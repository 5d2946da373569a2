"""openai-agents' own MCP client (``MCPServerStdio``, ``Agent(mcp_servers=...)``) against
``toolhub mcp`` with ``convert_schemas_to_strict``: every tool toolhub lists converts to a strict
``FunctionTool`` except ``use_tool``, whose ``tool_input`` takes an external tool's arguments
(any object), which the SDK's strict conversion refuses to close; it lists that one tool
non-strict, with toolhub's schema as is, and a call through it reaches the external tool.

Why toolhub leaves it so (docs/integrations.md): serving ``tool_input`` as JSON text only would
give every MCP client a worse tool for one SDK's strict mode; toolhub's own openai-agents
adapter (``function_tools(session, strict=True)``) has ``use_tool`` strict, with
``tool_input`` as JSON text (tests/integrations/test_strict.py).
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
    """The tools an Agent gets from ``toolhub mcp`` with strict conversion, and what a call
    of ``use_tool`` (an object ``tool_input``, as the non-strict schema allows) returns."""
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
        arguments = json.dumps(
            {"tool_name": "time__get_current_time", "tool_input": {"timezone": "Europe/Paris"}}
        )
        context = ToolContext(
            None, tool_name="use_tool", tool_call_id="call-1", tool_arguments=arguments
        )
        said = await tools["use_tool"].on_invoke_tool(context, arguments)
    return {"tools": tools, "said": said}


def test_every_tool_is_strict_but_use_tool_which_still_calls(tmp_path: Path) -> None:
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
    assert [name for name, t in tools.items() if not t.strict_json_schema] == ["use_tool"]
    # The fallback keeps toolhub's schema: ``tool_input`` an object or its JSON text.
    assert tools["use_tool"].params_json_schema == listed["use_tool"]
    said = str(seen["said"])
    assert "Europe/Paris" in said and "Tool `use_tool` failed" not in said, said
