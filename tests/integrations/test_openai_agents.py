"""``function_tools`` in a real OpenAI Agents SDK run driven by the SDK's own ``ScriptedModel``:
a renamed tool called by its client name runs on a real worker while its progress reaches the
``on_stream`` callback, interleaved with ``Runner.run_streamed``'s events; a refused call, a
reminder and an image reach the model as the tool's output; the SDK's own tool timeout
cancels the call on the worker."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

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
from toolhub.integrations.openai_agents import ToolhubStreamEvent, function_tools

pytestmark = pytest.mark.timeout(60)

#: No trace export: these runs talk to no OpenAI endpoint at all.
OFFLINE = RunConfig(tracing_disabled=True)


def outputs(model: ScriptedModel) -> dict[str, Any]:
    """The tool outputs the model was sent, by tool call id."""
    last = model.last_call
    assert last is not None
    return {
        item["call_id"]: item["output"]
        for item in last.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def test_a_worker_call_streams_to_on_stream_and_a_refusal_is_a_result(
    connected: Session,
) -> None:
    model = ScriptedModel(
        [
            [function_call(TICKS, TICK_ARGS, call_id="t1")],
            [function_call(TICKS, BAD_ARGS, call_id="t2")],
            [assistant_message("done")],
        ]
    )
    progress: list[tuple[float, ToolhubStreamEvent]] = []
    tool_outputs: dict[str, float] = {}

    async def on_stream(event: ToolhubStreamEvent) -> None:
        progress.append((time.monotonic(), event))

    agent = Agent(name="coder", model=model, tools=function_tools(connected, on_stream=on_stream))

    async def run() -> Any:
        streamed = Runner.run_streamed(agent, "go", run_config=OFFLINE)
        async for event in streamed.stream_events():
            if event.type == "run_item_stream_event" and event.name == "tool_output":
                tool_outputs[event.item.raw_item["call_id"]] = time.monotonic()
        return streamed.final_output

    assert asyncio.run(run()) == "done"
    model.assert_complete()

    first = model.first_call
    assert first is not None
    (tool,) = first.tools
    assert tool.name == TICKS and "count" in tool.params_json_schema["properties"]
    assert not tool.strict_json_schema
    sent = outputs(model)
    output = json.loads(sent["t1"])
    assert {(e.tool_name, e.tool_call_id) for _, e in progress} == {(TICKS, "t1")}
    assert connected.record_sync(progress[0][1].call_id)["result"]["output"]["value"] == output
    assert isinstance(progress[0][1].context, ToolContext)
    ticks = [(t, e.progress.to_dict()) for t, e in progress]
    assert_live_worker_progress(ticks, tool_outputs["t1"], output)
    assert sent["t2"].startswith(f"Tool `{TICKS}` failed: {BAD_TEXT}")


def test_reminders_and_images_reach_the_model(embedded: Session) -> None:
    model = ScriptedModel(
        [[function_call("snapshot", {"label": "home"}, call_id="s1")], [assistant_message("ok")]]
    )
    agent = Agent(name="viewer", model=model, tools=function_tools(embedded))
    assert asyncio.run(Runner.run(agent, "look", run_config=OFFLINE)).final_output == "ok"

    text, image = outputs(model)["s1"]
    assert text["type"] == "input_text"
    assert text["text"].startswith("snapshot home") and REMINDER in text["text"]
    assert image["type"] == "input_image"
    assert image["image_url"] == f"data:image/png;base64,{PIXEL}"


def test_a_failing_on_stream_does_not_stop_the_call(connected: Session) -> None:
    model = ScriptedModel(
        [[function_call(TICKS, {"count": 2}, call_id="t1")], [assistant_message("done")]]
    )

    def on_stream(event: ToolhubStreamEvent) -> None:
        raise RuntimeError("the UI went away")

    agent = Agent(name="coder", model=model, tools=function_tools(connected, on_stream=on_stream))
    assert asyncio.run(Runner.run(agent, "go", run_config=OFFLINE)).final_output == "done"
    assert json.loads(outputs(model)["t1"])["total"] == 2


def test_the_sdks_own_timeout_cancels_the_call_on_the_worker(connected: Session) -> None:
    model = ScriptedModel(
        [
            [function_call(TICKS, {"count": 100, "delay_ms": 100}, call_id="t1")],
            [assistant_message("gave up")],
        ]
    )
    started: list[str] = []

    def on_stream(event: ToolhubStreamEvent) -> None:
        started.append(event.call_id)

    (tool,) = function_tools(connected, on_stream=on_stream)
    agent = Agent(name="coder", model=model, tools=[replace(tool, timeout_seconds=0.6)])
    assert asyncio.run(Runner.run(agent, "go", run_config=OFFLINE)).final_output == "gave up"

    assert "timed out" in outputs(model)["t1"]
    deadline = time.monotonic() + 10
    while (connected.record_sync(started[0]) or {}).get("status") != "cancelled":
        assert time.monotonic() < deadline, connected.record_sync(started[0])
        time.sleep(0.05)


def test_a_call_a_rule_asks_about_is_the_sdks_approval_interruption(tmp_path: Path) -> None:
    """The SDK's own ``needs_approval``: the run stops with the call among its interruptions;
    approved there and resumed, it runs once and toolhub records the approval; rejected, it
    never reaches toolhub."""
    rules = {
        "permissions": {"rules": [{"tool": ["bash"], "command": ["echo *"], "decision": "ask"}]}
    }
    (tmp_path / "ws").mkdir()
    session = Session.embedded(rules, tmp_path / "ws", state_dir=tmp_path / "state")
    ask = {"command": "echo ok >> side.txt", "description": "t"}
    model = ScriptedModel(
        [
            [function_call("bash", ask, call_id="b1")],
            [function_call("bash", ask, call_id="b2")],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="coder", model=model, tools=function_tools(session))

    async def run() -> Any:
        first = await Runner.run(agent, "go", run_config=OFFLINE)
        (item,) = first.interruptions
        assert item.raw_item.call_id == "b1"
        assert not (tmp_path / "ws" / "side.txt").exists()
        state = first.to_state()
        state.approve(item)
        second = await Runner.run(agent, state, run_config=OFFLINE)
        (again,) = second.interruptions
        state = second.to_state()
        state.reject(again)
        return await Runner.run(agent, state, run_config=OFFLINE)

    with session:
        assert asyncio.run(run()).final_output == "done"
        assert (tmp_path / "ws" / "side.txt").read_text() == "ok\n"
        assert session.pending() == []
