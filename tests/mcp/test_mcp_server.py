"""The official MCP client SDK against toolhub's MCP server, over stdio (a subprocess) and over
streamable HTTP: list, call, progress, errors, cancellation and ask_user elicitation."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.support import make_builder
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app
from toolhub.sources.mcp_outcome import OUTPUT_META_KEY

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
Connect = Callable[..., Any]


@asynccontextmanager
async def over_stdio(workspace: Path, **client: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp.mcp_test_server", str(workspace)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **client) as s:
        await s.initialize()
        yield s


@pytest.fixture
def http_url(tmp_path: Path) -> Any:
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )
    (tmp_path / "ws").mkdir(exist_ok=True)
    with session, ThreadedServer(http_app(session, host="127.0.0.1", token="tok")) as server:
        yield f"{server.url}/mcp"


def over_http(url: str) -> Callable[..., Any]:
    @asynccontextmanager
    async def connect(_: Path, **client: Any) -> AsyncIterator[ClientSession]:
        import httpx2

        headers = {"Authorization": "Bearer tok"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write, **client) as s,
        ):
            await s.initialize()
            yield s

    return connect


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Connect:
    (tmp_path / "ws").mkdir(exist_ok=True)
    if request.param == "stdio":
        return over_stdio
    return over_http(request.getfixturevalue("http_url"))


def run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


def test_list_call_progress_and_errors(connect: Connect, tmp_path: Path) -> None:
    async def body() -> None:
        async with connect(tmp_path / "ws") as s:
            listed = await s.list_tools()
            assert {t.name for t in listed.tools} == {"echo", "count", "nap", "ask"}
            echo = next(t for t in listed.tools if t.name == "echo")
            assert echo.input_schema["required"] == ["text"]
            assert echo.annotations is not None and echo.annotations.read_only_hint is True

            ok = await s.call_tool("echo", {"text": "hi"})
            assert ok.is_error is False
            assert ok.content[0].text == "echo: hi"
            assert ok.structured_content is None, "the text is not its JSON"
            # No copy for a client that did not ask for one (tests/mcp/test_call_results.py).
            assert ok.meta is None or OUTPUT_META_KEY not in ok.meta

            seen: list[tuple[float, str | None]] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append((progress, message))

            counted = await s.call_tool(
                "count", {"n": 4, "delay": 0.06}, progress_callback=on_progress
            )
            assert counted.structured_content == {"total": 4}, "its text is its JSON"
            values = [p for p, _ in seen]
            assert values == sorted(values) and len(set(values)) == len(values) and values
            assert values[-1] == 4.0
            assert "".join(m or "" for _, m in seen).startswith("step 0")

            bad = await s.call_tool("echo", {"times": 2})
            assert bad.is_error is True and "text" in bad.content[0].text
            with pytest.raises(MCPError) as unknown:
                await s.call_tool("nope", {})
            assert unknown.value.code == types.INVALID_PARAMS

    run(body)


def test_cancellation_cancels_the_call(connect: Connect, tmp_path: Path) -> None:
    marker = tmp_path / "nap.marker"

    async def body() -> None:
        async with connect(tmp_path / "ws") as s:
            first = anyio.Event()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                first.set()

            async with anyio.create_task_group() as tg:

                async def nap() -> None:
                    await s.call_tool(
                        "nap",
                        {"seconds": 30, "marker": str(marker)},
                        progress_callback=on_progress,
                    )

                tg.start_soon(nap)
                with anyio.fail_after(10):
                    await first.wait()
                tg.cancel_scope.cancel()
            started = time.monotonic()
            while not marker.exists() and time.monotonic() - started < 10:
                await anyio.sleep(0.05)
            assert marker.read_text() == "cancelled"
            after = await s.call_tool("echo", {"text": "still alive"})
            assert after.content[0].text == "echo: still alive"

    run(body)


def test_ask_user_becomes_an_elicitation(connect: Connect, tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"q1": "spaces", "q2": "yes"})

    questions = [
        {"question": "Tabs or spaces?", "options": ["tabs", "spaces"]},
        {"question": "Proceed?"},
    ]

    async def body() -> None:
        async with connect(tmp_path / "ws", elicitation_callback=elicit) as s:
            result = await s.call_tool("ask", {"questions": questions})
            assert result.is_error is False
            assert result.content[0].text == "answers: ['spaces', 'yes']"
        schema = asked[0].requested_schema
        assert schema["properties"]["q1"]["enum"] == ["tabs", "spaces"]
        assert "Tabs or spaces?" in asked[0].message

    run(body)


def test_ask_user_without_elicitation_returns_the_questions(
    connect: Connect, tmp_path: Path
) -> None:
    async def body() -> None:
        async with connect(tmp_path / "ws") as s:
            result = await s.call_tool("ask", {"questions": [{"question": "Which branch?"}]})
            assert result.is_error is False
            text = result.content[0].text
            assert "1. Which branch?" in text and "Ask the user yourself" in text

    run(body)


def test_http_requires_the_token(http_url: str) -> None:
    import httpx

    response = httpx.post(http_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
