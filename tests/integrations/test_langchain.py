"""``langchain_tools`` in a real LangGraph agent loop (a ``StateGraph`` of a scripted chat model
and LangGraph's ``ToolNode``): a renamed tool called by its client name runs on a real worker
while its progress arrives as ``stream_mode="custom"`` chunks, async and sync; the same
progress is a ``toolhub.progress`` custom event in ``astream_events``; a refused call is an
error ``ToolMessage`` the model reads; a reminder and an image reach the model."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

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
from toolhub.integrations.langchain import langchain_tools

pytestmark = pytest.mark.timeout(60)


class ScriptedChat(BaseChatModel):
    """Answers turn by turn from ``script``; ``bound`` keeps the tools as the provider gets
    them from ``bind_tools``."""

    script: list[AIMessage]
    turn: int = 0
    bound: list[dict[str, Any]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.turn += 1
        return ChatResult(generations=[ChatGeneration(message=self.script[self.turn - 1])])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        self.bound = [convert_to_openai_tool(t, strict=kwargs.get("strict")) for t in tools]
        return self


def calls(*steps: tuple[str, dict[str, Any]]) -> list[AIMessage]:
    """One AI message per tool call ``(name, args)``, ids ``c1``, ``c2``…, then "done"."""
    return [
        *(
            AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{i}"}])
            for i, (n, a) in enumerate(steps, 1)
        ),
        AIMessage("done"),
    ]


def agent(model: ScriptedChat, tools: list[BaseTool]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The ReAct loop: the model, then the tools it called, until it answers in words."""
    bound = model.bind_tools(tools)

    def think(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def tool_messages(chunks: list[tuple[float, str, Any]]) -> dict[str, tuple[float, ToolMessage]]:
    """The tool messages in ``updates`` chunks, by tool call id, with when each was seen."""
    return {
        m.tool_call_id: (t, m)
        for t, mode, chunk in chunks
        if mode == "updates" and "tools" in chunk
        for m in chunk["tools"]["messages"]
    }


def check_worker_run(chunks: list[tuple[float, str, Any]], session: Session) -> None:
    messages = tool_messages(chunks)
    progress = [(t, chunk) for t, mode, chunk in chunks if mode == "custom"]
    assert {(c["type"], c["tool_name"], c["tool_call_id"]) for _, c in progress} == {
        ("toolhub.progress", TICKS, "c1")
    }
    seen_at, message = messages["c1"]
    output = json.loads(message.content)  # type: ignore[arg-type]
    assert message.status == "success" and message.artifact == output
    assert session.record_sync(progress[0][1]["call_id"])["result"]["output"]["value"] == output
    assert_live_worker_progress([(t, c["progress"]) for t, c in progress], seen_at, output)

    refused = messages["c2"][1]
    assert refused.status == "error"
    assert str(refused.content).startswith(f"Tool `{TICKS}` failed: {BAD_TEXT}")


def test_a_worker_call_streams_custom_chunks_and_a_refusal_is_an_error_message(
    connected: Session,
) -> None:
    model = ScriptedChat(script=calls((TICKS, TICK_ARGS), (TICKS, BAD_ARGS)))
    graph = agent(model, langchain_tools(connected))

    async def run() -> list[tuple[float, str, Any]]:
        return [
            (time.monotonic(), mode, chunk)
            async for mode, chunk in graph.astream(
                {"messages": [("user", "go")]}, stream_mode=["updates", "custom"]
            )
        ]

    check_worker_run(asyncio.run(run()), connected)
    (tool,) = model.bound
    assert tool["function"]["name"] == TICKS
    assert "count" in tool["function"]["parameters"]["properties"]


def test_the_sync_path_streams_the_same(connected: Session) -> None:
    model = ScriptedChat(script=calls((TICKS, TICK_ARGS), (TICKS, BAD_ARGS)))
    graph = agent(model, langchain_tools(connected))
    chunks = [
        (time.monotonic(), mode, chunk)
        for mode, chunk in graph.stream(
            {"messages": [("user", "go")]}, stream_mode=["updates", "custom"]
        )
    ]
    check_worker_run(chunks, connected)


def test_progress_is_a_custom_event_outside_langgraph(connected: Session) -> None:
    (tool,) = langchain_tools(connected)
    call = {"name": TICKS, "args": {"count": 2}, "id": "c9", "type": "tool_call"}

    async def run() -> list[dict[str, Any]]:
        return [event async for event in tool.astream_events(call, version="v2")]

    events = asyncio.run(run())
    custom = [e for e in events if e["event"] == "on_custom_event"]
    assert [e["name"] for e in custom] == ["toolhub.progress"] * 2
    assert [e["data"]["progress"]["payload"]["i"] for e in custom] == [0, 1]
    assert {e["data"]["tool_call_id"] for e in custom} == {"c9"}
    (end,) = [e for e in events if e["event"] == "on_tool_end"]
    assert json.loads(end["data"]["output"].content)["total"] == 2


def test_reminders_and_images_reach_the_model(embedded: Session) -> None:
    model = ScriptedChat(script=calls(("snapshot", {"label": "home"})))
    result = agent(model, langchain_tools(embedded)).invoke({"messages": [("user", "look")]})

    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    text, image = message.content
    assert isinstance(text, dict) and isinstance(image, dict)
    assert text["text"].startswith("snapshot home") and REMINDER in text["text"]
    assert image == {"type": "image", "base64": PIXEL, "mime_type": "image/png"}
    assert message.artifact == {"label": "home"}


def test_a_call_a_rule_asks_about_interrupts_the_graph(tmp_path: Path) -> None:
    """LangGraph's ``interrupt``: the graph stops at the call; resumed with ``approve`` it runs
    once, resumed with anything else the model reads a denial and toolhub never sees it."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    rules = {
        "permissions": {"rules": [{"tool": ["bash"], "command": ["echo *"], "decision": "ask"}]}
    }
    (tmp_path / "ws").mkdir()
    session = Session.embedded(rules, tmp_path / "ws", state_dir=tmp_path / "state")
    ask = {"command": "echo ok >> side.txt", "description": "t"}
    tools = langchain_tools(session)
    bound = ScriptedChat(script=calls(("bash", ask), ("bash", ask))).bind_tools(tools)

    def think(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    app = graph.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}

    async def run() -> dict[str, Any]:
        first = await app.ainvoke({"messages": [("user", "go")]}, thread)
        (asked,) = first["__interrupt__"]
        assert asked.value["type"] == "toolhub.approval" and asked.value["tool_call_id"] == "c1"
        assert not (tmp_path / "ws" / "side.txt").exists()
        second = await app.ainvoke(Command(resume="approve"), thread)
        assert second["__interrupt__"][0].value["tool_call_id"] == "c2"
        return await app.ainvoke(Command(resume={"decision": "deny"}), thread)

    with session:
        final = asyncio.run(run())
        assert final["messages"][-1].content == "done"
        denied = [m for m in final["messages"] if isinstance(m, ToolMessage)][-1]
        assert denied.status == "error" and "denied" in str(denied.content)
        assert (tmp_path / "ws" / "side.txt").read_text() == "ok\n"
        assert session.pending() == []
