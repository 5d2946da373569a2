"""Google ADK (google-adk[mcp] 2.x) as a user runs it against ``toolhub mcp``: an ``LlmAgent``
with an ``McpToolset`` on a stdio server, run by ADK's ``InMemoryRunner``. The model is a
``BaseLlm`` subclass (ADK's own extension point for models) that plays a script: its first turn
calls tools, its second reads what ADK gave it back. Run with the python of its own virtualenv
(see test_agent_frameworks.py), never the project's.

    python adk_client.py '{"command": ..., "args": [...], "env": {...}, "calls": [...]}'

Prints one JSON line: the tools' declarations as ADK handed them to the model (ADK's default:
the MCP JSON schema as is), the same declarations made by ADK's other path (its conversion to a
Gemini ``Schema``, behind a feature flag), the MCP schemas ADK listed, and each function
response the model was given.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.features import FeatureName, override_feature_enabled
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from google.genai import types
from mcp import StdioServerParameters

#: Every LlmRequest the scripted model was handed, in order.
REQUESTS: list[LlmRequest] = []


class ScriptedModel(BaseLlm):
    """Turn 1: the function calls of ``calls``; turn 2: a plain answer."""

    calls: list[dict[str, Any]]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        REQUESTS.append(llm_request)
        if len(REQUESTS) == 1:
            parts = [
                types.Part(function_call=types.FunctionCall(id=f"fc-{n}", **call))
                for n, call in enumerate(self.calls)
            ]
        else:
            parts = [types.Part(text="done")]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


async def main(connection: dict[str, Any]) -> dict[str, Any]:
    """One agent run; what the model was handed."""
    params = StdioServerParameters(
        command=connection["command"], args=connection["args"], env=connection["env"]
    )
    toolset = McpToolset(connection_params=StdioConnectionParams(server_params=params, timeout=60))
    agent = LlmAgent(
        name="coder",
        model=ScriptedModel(model="scripted", calls=connection["calls"]),
        tools=[toolset],
    )
    runner = InMemoryRunner(agent=agent, app_name="toolhub-test")
    session = await runner.session_service.create_session(app_name="toolhub-test", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    try:
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
        tools = await toolset.get_tools()
    finally:
        await toolset.close()
    declared, answered = REQUESTS

    declarations = {
        d.name: d.model_dump(mode="json", exclude_none=True)
        for tool in declared.config.tools or []
        for d in tool.function_declarations or []
    }
    responses = [
        {"name": part.function_response.name, "response": part.function_response.response}
        for content in answered.contents
        for part in content.parts or []
        if part.function_response is not None
    ]
    # ADK's other path: its own conversion of each MCP schema to a Gemini ``Schema``, made by
    # the method every ADK tool declares itself with (no connection needed).
    override_feature_enabled(FeatureName.JSON_SCHEMA_FOR_FUNC_DECL, False)
    converted = {
        t.name: t._get_declaration().model_dump(mode="json", exclude_none=True) for t in tools
    }
    return {
        "declarations": declarations,
        "gemini_schema_declarations": converted,
        "listed": {t.name: t.raw_mcp_tool.input_schema for t in tools},
        "responses": responses,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]))), default=str))
