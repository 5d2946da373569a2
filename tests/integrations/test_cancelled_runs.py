"""A framework that gives up on a tool cancels the toolhub call, embedded and connected alike:
the OpenAI Agents SDK's own ``timeout_seconds``, a cancelled Pydantic AI run, a cancelled
LangGraph run. Each run calls a slow ticking tool; once its first progress arrived, the
framework gives up, and the call's record must end ``cancelled`` (not ``running`` forever).
The commands of such calls die too: tests/contract/test_consumer_gone_contract.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable
from dataclasses import replace
from typing import Any

import pytest

from tests.integrations.support import TICKS
from toolhub import Session

pytestmark = pytest.mark.timeout(90)

#: 100 ticks 100 ms apart: ten seconds, far past each framework's patience here.
SLOW = {"count": 100, "delay_ms": 100}


@pytest.fixture(params=["embedded", "connected"])
def session(request: pytest.FixtureRequest) -> Session:
    return request.getfixturevalue(request.param)


def assert_cancelled(session: Session, call_id: str) -> None:
    deadline = time.monotonic() + 20
    while (session.record_sync(call_id) or {}).get("status") != "cancelled":
        assert time.monotonic() < deadline, session.record_sync(call_id)
        time.sleep(0.05)


async def give_up_after_first(run: Any, seen: list[str]) -> None:
    """Run ``run`` until the tool reported progress once, then cancel it."""
    task = asyncio.ensure_future(run)
    deadline = time.monotonic() + 30
    while not seen:
        assert time.monotonic() < deadline and not task.done(), "no progress arrived"
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_openai_agents_timeout(session: Session) -> None:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    from toolhub.integrations.openai_agents import ToolhubStreamEvent, function_tools

    # Thirty seconds of ticks against a 3 s patience: on a busy machine the first tick of a
    # connected call can take over a second to arrive, and it must arrive before the timeout.
    slower = {"count": 300, "delay_ms": 100}
    model = ScriptedModel(
        [[function_call(TICKS, slower, call_id="t1")], [assistant_message("gave up")]]
    )
    started: list[str] = []

    def on_stream(event: ToolhubStreamEvent) -> None:
        started.append(event.call_id)

    tools = [replace(t, timeout_seconds=3.0) for t in function_tools(session, on_stream=on_stream)]
    agent = Agent(name="coder", model=model, tools=tools)
    run = Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    assert asyncio.run(run).final_output == "gave up"
    assert started, "the tool's first progress never arrived within the 3 s timeout"
    assert_cancelled(session, started[0])


def test_pydantic_ai_cancelled_run(session: Session) -> None:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import AgentStreamEvent, ToolCallPart

    from tests.integrations.test_pydantic_ai import scripted
    from toolhub.integrations.pydantic_ai import ToolhubProgressEvent, ToolhubToolset

    model, _ = scripted(ToolCallPart(TICKS, SLOW, tool_call_id="t1"))
    agent = Agent(model, toolsets=[ToolhubToolset(session)])
    seen: list[str] = []

    async def watch(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in events:
            if isinstance(event, ToolhubProgressEvent):
                seen.append(event.call_id)

    asyncio.run(give_up_after_first(agent.run("go", event_stream_handler=watch), seen))
    assert_cancelled(session, seen[0])


def test_langgraph_cancelled_run(session: Session) -> None:
    from tests.integrations.test_langchain import ScriptedChat, agent, calls
    from toolhub.integrations.langchain import langchain_tools

    graph = agent(ScriptedChat(script=calls((TICKS, SLOW))), langchain_tools(session))
    seen: list[str] = []

    async def run() -> None:
        async for mode, chunk in graph.astream(
            {"messages": [("user", "go")]}, stream_mode=["updates", "custom"]
        ):
            if mode == "custom":
                seen.append(chunk["call_id"])

    asyncio.run(give_up_after_first(run(), seen))
    assert_cancelled(session, seen[0])
