"""The adapters' tool spans under their framework's span, with the real frameworks.

Pydantic AI traces with OpenTelemetry itself (its ``Instrumentation`` capability): toolhub's
``execute_tool`` span is a child of the span Pydantic AI opens for running the tool.
LangChain and the OpenAI Agents SDK have tracing of their own that is not OpenTelemetry
(LangSmith; the Agents SDK's trace processors): toolhub's span joins the OpenTelemetry span
current where the framework runs the tool — here the application's span around the run — and,
for LangChain's synchronous tools, across the session's loop thread."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from opentelemetry import trace
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.tracing.in_process import exporter, parent_of, tool_span
from toolhub import Session
from toolhub.integrations.langchain import langchain_tools
from toolhub.integrations.openai_agents import function_tools
from toolhub.integrations.pydantic_ai import ToolhubToolset

pytestmark = pytest.mark.timeout(60)

ARGS = {"command": "echo hi", "description": "say hi"}


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    exporter()
    with Session.embedded(None, tmp_path, state_dir=tmp_path / "state") as made:
        yield made


def test_pydantic_ai_tool_span_is_under_the_agent_s_own_span(session: Session) -> None:
    turns: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns.append(1)
        if len(turns) == 1:
            return ModelResponse(parts=[ToolCallPart("bash", ARGS, tool_call_id="p1")])
        return ModelResponse(parts=[TextPart("done")])

    agent = PydanticAgent(
        FunctionModel(respond),
        toolsets=[ToolhubToolset(session)],
        capabilities=[Instrumentation()],
    )
    with trace.get_tracer("app").start_as_current_span("app") as app:
        assert agent.run_sync("go").output == "done"
    trace_id = app.get_span_context().trace_id
    ours = tool_span(trace_id, "bash")
    framework = parent_of(ours, trace_id)
    assert framework.instrumentation_scope.name.startswith("pydantic-ai"), framework
    assert ours.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ours.attributes["gen_ai.tool.call.id"]


def test_langchain_sync_tool_span_joins_the_current_span(session: Session) -> None:
    (tool,) = [t for t in langchain_tools(session) if t.name == "bash"]
    with trace.get_tracer("app").start_as_current_span("graph") as graph:
        tool.invoke(ARGS)  # sync: the call runs on the session's loop thread
    trace_id = graph.get_span_context().trace_id
    assert parent_of(tool_span(trace_id, "bash"), trace_id).name == "graph"


def test_openai_agents_tool_span_joins_the_current_span(session: Session) -> None:
    model = ScriptedModel([[function_call("bash", ARGS, call_id="o1")], [assistant_message("ok")]])
    agent = Agent(name="coder", model=model, tools=function_tools(session))

    async def run() -> object:
        with trace.get_tracer("app").start_as_current_span("agent turn") as turn:
            result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
        return result.final_output, turn.get_span_context().trace_id

    output, trace_id = asyncio.run(run())
    assert output == "ok"
    assert parent_of(tool_span(trace_id, "bash"), trace_id).name == "agent turn"
