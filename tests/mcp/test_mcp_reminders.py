"""What the model must read reaches the model through real MCP clients of ``toolhub mcp``: a
background ``bash`` command finishes, and the completion reminder toolhub appends to the next
result (once) is in what the model is given — through pydantic-ai's ``MCPToolset`` (which shows
the model ``structuredContent`` whenever a result has it), openai-agents' ``MCPServerStdio``
(with and without ``use_structured_content``) and the raw SDK client.

langchain-mcp-adapters 0.3 is not tested: it imports `mcp.server.fastmcp`, which mcp 2.3 removed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from fastmcp.client.transports import StdioTransport
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.mcp.stdio_support import (
    BACKGROUND,
    LATER,
    TOOLHUB,
    assert_reminded,
    toolhub_args,
    toolhub_env,
)
from toolhub.mcp.call_results import OUTPUT_EXTENSION
from toolhub.sources.mcp_outcome import OUTPUT_META_KEY

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_raw_sdk_client_reads_the_reminder_in_the_text(tmp_path: Path, workspace: Path) -> None:
    params = StdioServerParameters(
        command=TOOLHUB, args=toolhub_args(workspace), env=toolhub_env(tmp_path), cwd=workspace
    )

    async def body() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, extensions={OUTPUT_EXTENSION: {}}) as s,
        ):
            await s.initialize()
            started = await s.call_tool("bash", BACKGROUND)
            assert not started.is_error
            later = await s.call_tool("bash", LATER)
        assert not later.is_error
        (text,) = later.content
        assert isinstance(text, TextContent)
        assert_reminded(text.text)
        assert later.structured_content is None, "the text is not its JSON: no twin to prefer"
        assert later.meta is not None and "later" in later.meta[OUTPUT_META_KEY]["output"]

    asyncio.run(body())


def test_pydantic_ai_model_gets_the_reminder(tmp_path: Path, workspace: Path) -> None:
    calls = [ToolCallPart("bash", BACKGROUND), ToolCallPart("bash", LATER)]
    returns: list[ToolReturnPart] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns[:] = [
            part
            for message in messages
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        turn = len(returns)
        return ModelResponse(parts=[calls[turn] if turn < len(calls) else TextPart("done")])

    transport = StdioTransport(
        TOOLHUB, toolhub_args(workspace), env=toolhub_env(tmp_path), cwd=str(workspace)
    )
    # A busy machine can take longer than the client's default to start ``toolhub mcp``.
    toolset = MCPToolset(transport, init_timeout=60, read_timeout=60)
    agent = PydanticAgent(FunctionModel(respond), toolsets=[toolset])
    assert agent.run_sync("go").output == "done"
    assert [part.tool_name for part in returns] == ["bash", "bash"]
    assert_reminded(returns[1].model_response_str())


@pytest.mark.parametrize("use_structured_content", [False, True])
def test_openai_agents_model_gets_the_reminder(
    tmp_path: Path, workspace: Path, use_structured_content: bool
) -> None:
    model = ScriptedModel(
        [
            [function_call("bash", BACKGROUND, call_id="b1")],
            [function_call("bash", LATER, call_id="b2")],
            [assistant_message("done")],
        ]
    )
    server = MCPServerStdio(
        {
            "command": TOOLHUB,
            "args": toolhub_args(workspace),
            "env": toolhub_env(tmp_path),
            "cwd": str(workspace),
        },
        client_session_timeout_seconds=30,
        use_structured_content=use_structured_content,
    )

    async def body() -> str:
        async with server:
            agent = Agent(name="coder", model=model, mcp_servers=[server])
            result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
            return str(result.final_output)

    assert asyncio.run(body()) == "done"
    model.assert_complete()
    last = model.last_call
    assert last is not None
    sent = {
        item["call_id"]: item["output"]
        for item in last.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    assert_reminded(_text(sent["b2"]))


def _text(output: Any) -> str:
    """A function_call_output's text, whether a string or a list of input_text items."""
    if isinstance(output, str):
        return output
    return "".join(item["text"] for item in output if item.get("type") == "input_text")
