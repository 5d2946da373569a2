"""``ask_user`` on a 2026-07-28 connection without tasks reaches the user: the real ``mcp`` SDK
``Client`` (which declares elicitation and drives SEP-2322's multi round trip itself) gets the
questions as an ``input_required`` result, shows its form, retries with the answers, and the call
goes on to its result. A declined form cancels the call; a ``requestState`` the server did not
issue to this caller for this call is refused."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.mcp.stdio_support import ROOT

pytestmark = pytest.mark.timeout(120)

QUESTIONS = [{"question": "Tabs or spaces?", "options": ["tabs", "spaces"]}, {"question": "Go?"}]


def server(workspace: Path) -> StdioServerParameters:
    workspace.mkdir(exist_ok=True)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp.mcp_test_server", str(workspace)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_sdk_client_answers_through_input_required(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"q1": "spaces", "q2": "yes"})

    async def body() -> types.CallToolResult:
        async with Client(server(tmp_path / "ws"), elicitation_callback=elicit) as client:
            assert client.session.protocol_version == "2026-07-28"
            return await client.call_tool("ask", {"questions": QUESTIONS})

    result = asyncio.run(body())
    assert result.is_error is False
    assert result.content[0].text == "answers: ['spaces', 'yes']"  # type: ignore[union-attr]
    (form,) = asked
    assert "Tabs or spaces?" in form.message
    assert form.requested_schema["properties"]["q1"]["enum"] == ["tabs", "spaces"]


def test_a_declined_form_cancels_the_call(tmp_path: Path) -> None:
    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def body() -> types.CallToolResult:
        async with Client(server(tmp_path / "ws"), elicitation_callback=decline) as client:
            return await client.call_tool("ask", {"questions": QUESTIONS})

    result = asyncio.run(body())
    assert result.is_error is True
    assert "cancelled" in result.content[0].text  # type: ignore[union-attr]


def test_a_request_state_not_issued_for_the_call_is_refused(tmp_path: Path) -> None:
    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("this test drives the retries itself")

    async def body() -> None:
        async with Client(server(tmp_path / "ws"), elicitation_callback=never) as client:
            session = client.session
            first = await session.call_tool(
                "ask", {"questions": QUESTIONS}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult), first
            assert first.request_state and "ask_user" in (first.input_requests or {})
            forged = first.request_state[:-4] + "AAAA"
            with pytest.raises(MCPError, match="Invalid requestState"):
                await session.call_tool(
                    "ask",
                    {"questions": QUESTIONS},
                    request_state=forged,
                    input_responses={},
                    allow_input_required=True,
                )
            # The real state, with no answer: the call is asked again, not lost.
            again = await session.call_tool(
                "ask",
                {"questions": QUESTIONS},
                request_state=first.request_state,
                input_responses={},
                allow_input_required=True,
            )
            assert isinstance(again, types.InputRequiredResult)

    asyncio.run(body())
