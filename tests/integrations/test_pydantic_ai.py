"""``ToolhubToolset`` in a real Pydantic AI agent driven by a scripted ``FunctionModel``: a
renamed tool called by its client name runs on a real worker while its progress streams as
``ToolhubProgressEvent``s through the run's event stream; a refused call, a reminder and an
image reach the model as the tool's result; ``ask_user`` is answered from that event stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, BinaryContent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from tests.integrations.support import (
    BAD_ARGS,
    BAD_TEXT,
    PIXEL,
    REMINDER,
    TICK_ARGS,
    TICKS,
    assert_live_worker_progress,
)
from toolhub import Session
from toolhub.integrations.pydantic_ai import ToolhubProgressEvent, ToolhubToolset

pytestmark = pytest.mark.timeout(60)


def scripted(*calls: ToolCallPart) -> tuple[FunctionModel, list[AgentInfo]]:
    """A model that makes ``calls`` one per turn, then answers "done", streamed or not (a run
    with an event stream handler streams); it records what it saw."""
    seen: list[AgentInfo] = []

    def next_part(info: AgentInfo) -> ToolCallPart | TextPart:
        seen.append(info)
        turn = len(seen) - 1
        return calls[turn] if turn < len(calls) else TextPart("done")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[next_part(info)])

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        part = next_part(info)
        if isinstance(part, TextPart):
            yield part.content
        else:
            yield {
                0: DeltaToolCall(
                    part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id
                )
            }

    return FunctionModel(respond, stream_function=stream), seen


def returns(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    """The tool results the model was sent, by tool call id."""
    return {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def test_a_worker_call_streams_progress_events_and_a_refusal_is_a_result(
    connected: Session,
) -> None:
    model, seen = scripted(
        ToolCallPart(TICKS, TICK_ARGS, tool_call_id="t1"),
        ToolCallPart(TICKS, BAD_ARGS, tool_call_id="t2"),
    )
    agent = Agent(model, toolsets=[ToolhubToolset(connected)])
    progress: list[tuple[float, ToolhubProgressEvent]] = []
    results: dict[str, float] = {}

    async def watch(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in events:
            if isinstance(event, ToolhubProgressEvent):
                progress.append((time.monotonic(), event))
            elif isinstance(event, FunctionToolResultEvent):
                results[event.tool_call_id] = time.monotonic()

    run = asyncio.run(agent.run("go", event_stream_handler=watch))

    assert run.output == "done"
    assert [t.name for t in seen[0].function_tools] == [TICKS]
    assert "count" in seen[0].function_tools[0].parameters_json_schema["properties"]
    sent = returns(run.all_messages())
    output = connected.record_sync(progress[0][1].call_id)["result"]["output"]["value"]
    assert sent["t1"].content == f'{{"total":4,"worker_pid":{output["worker_pid"]}}}'
    assert {(e.tool_call_id, e.tool_name, e.name) for _, e in progress} == {
        ("t1", TICKS, "toolhub.progress")
    }
    assert_live_worker_progress([(t, e.progress) for t, e in progress], results["t1"], output)
    assert progress[0][1].item.subkind == "tick"
    assert str(sent["t2"].content).startswith(f"Tool `{TICKS}` failed: {BAD_TEXT}")


def test_reminders_and_images_reach_the_model(embedded: Session) -> None:
    model, _ = scripted(ToolCallPart("snapshot", {"label": "home"}, tool_call_id="s1"))
    run = asyncio.run(Agent(model, toolsets=[ToolhubToolset(embedded)]).run("look"))

    content = returns(run.all_messages())["s1"].content
    assert isinstance(content, list)
    text, image = content
    assert text.startswith("snapshot home") and REMINDER in text
    assert isinstance(image, BinaryContent) and image.media_type == "image/png"
    assert image.base64 == PIXEL


def test_ask_user_is_answered_from_the_event_stream(tmp_path: Path) -> None:
    config = {"tools": [{"id": "Main:ask_user"}]}
    question = {"questions": [{"question": "Which colour?", "options": ["red", "blue"]}]}
    model, _ = scripted(ToolCallPart("ask_user", question, tool_call_id="q1"))

    with Session.embedded(config, tmp_path, state_dir=tmp_path / "state") as session:

        async def answer(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
            async for event in events:
                if isinstance(event, ToolhubProgressEvent):
                    assert event.item.subkind == "input_required"
                    assert session.answer(event.call_id, ["blue"])

        agent = Agent(model, toolsets=[ToolhubToolset(session)])
        run = asyncio.run(agent.run("paint", event_stream_handler=answer))

    assert returns(run.all_messages())["q1"].content == "Q: Which colour?\nA: blue"


def test_a_call_a_rule_asks_about_is_a_deferred_approval(tmp_path: Path) -> None:
    """Pydantic AI's deferred tools: the run ends with the call in ``DeferredToolRequests``;
    approved with ``DeferredToolResults`` it runs once, denied it never reaches toolhub."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied

    rules = {
        "permissions": {"rules": [{"tool": ["bash"], "command": ["echo *"], "decision": "ask"}]}
    }
    (tmp_path / "ws").mkdir()
    session = Session.embedded(rules, tmp_path / "ws", state_dir=tmp_path / "state")
    ask = {"command": "echo ok >> side.txt", "description": "t"}
    model, _ = scripted(
        ToolCallPart("bash", ask, tool_call_id="b1"), ToolCallPart("bash", ask, tool_call_id="b2")
    )
    agent = Agent(
        model, toolsets=[ToolhubToolset(session)], output_type=[str, DeferredToolRequests]
    )

    async def run() -> Any:
        first = await agent.run("go")
        assert isinstance(first.output, DeferredToolRequests)
        assert [c.tool_call_id for c in first.output.approvals] == ["b1"]
        assert not (tmp_path / "ws" / "side.txt").exists()
        second = await agent.run(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"b1": True}),
        )
        assert isinstance(second.output, DeferredToolRequests)
        assert [c.tool_call_id for c in second.output.approvals] == ["b2"]
        return await agent.run(
            message_history=second.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"b2": ToolDenied("no")}),
        )

    with session:
        assert asyncio.run(run()).output == "done"
        assert (tmp_path / "ws" / "side.txt").read_text() == "ok\n"
        assert session.pending() == []
