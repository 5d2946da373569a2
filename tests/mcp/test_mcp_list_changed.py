"""``toolhub mcp`` declares ``tools.listChanged`` and tells its clients (the SDK client, over
stdio and over streamable HTTP; the SDK's ``Client`` on 2026-07-28, on its listen stream)
``notifications/tools/list_changed`` when the session's tool list changes: an attached MCP
server grows a tool, an external tool is registered or removed — and not when the tools are
registered again unchanged. A closed connection stops listening."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ToolsListChanged

from tests.gateway.support import make_builder
from tests.mcp.stdio_support import ROOT, TOOLHUB, toolhub_args, toolhub_env
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.changes import ToolListChanges
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(90)

SCHEMA = {"type": "object", "properties": {}}


class Changes:
    """A client's message handler that counts ``tools/list_changed`` notifications."""

    def __init__(self) -> None:
        self.count = 0
        self._seen = anyio.Event()

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._seen.set()

    async def next(self, timeout: float = 10) -> None:
        with anyio.fail_after(timeout):
            await self._seen.wait()
        self._seen = anyio.Event()


def growing_toolhub(tmp_path: Path) -> tuple[list[str], Path]:
    """``toolhub mcp`` arguments for a session with the changing MCP server attached as
    ``dyn``, and the workspace."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "toolset.yaml"
    config.write_text(
        "mcp_servers:\n"
        f"  dyn: {{command: [python, -m, tests.sources.changing_server, '{tmp_path}'],"
        f" env: {{PYTHONPATH: '{ROOT}'}}}}\n"
    )
    return toolhub_args(workspace, "--config", str(config)), workspace


def test_stdio_client_hears_an_attached_server_grow_a_tool(tmp_path: Path) -> None:
    args, workspace = growing_toolhub(tmp_path)
    params = StdioServerParameters(
        command=TOOLHUB, args=args, env=toolhub_env(tmp_path), cwd=workspace
    )
    changes = Changes()

    async def body() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, message_handler=changes) as s,
        ):
            ready = await s.initialize()
            assert ready.capabilities.tools is not None
            assert ready.capabilities.tools.list_changed is True
            before = {t.name for t in (await s.list_tools()).tools}
            assert "dyn__grow" in before and "dyn__extra_1" not in before
            grown = await s.call_tool("dyn__grow", {})
            assert not grown.is_error
            await changes.next()
            after = {t.name for t in (await s.list_tools()).tools}
            assert after == before | {"dyn__extra_1"}

    anyio.run(body)


def test_a_2026_client_hears_it_on_its_listen_stream(tmp_path: Path) -> None:
    """The SDK's ``Client`` negotiates 2026-07-28 (no handshake, no server-initiated stream):
    the change arrives on its ``subscriptions/listen`` stream."""
    args, workspace = growing_toolhub(tmp_path)
    params = StdioServerParameters(
        command=TOOLHUB, args=args, env=toolhub_env(tmp_path), cwd=workspace
    )

    async def body() -> None:
        async with Client(params) as client:
            assert client.session.protocol_version == "2026-07-28"
            async with client.listen(tools_list_changed=True) as changes:
                assert changes.honored.tools_list_changed is True
                grown = await client.call_tool("dyn__grow", {})
                assert not grown.is_error
                with anyio.fail_after(10):
                    event = await anext(aiter(changes))
                assert isinstance(event, ToolsListChanged)
            names = {t.name for t in (await client.list_tools()).tools}
            assert "dyn__extra_1" in names

    anyio.run(body)


@asynccontextmanager
async def http_client(url: str, changes: Changes) -> AsyncIterator[ClientSession]:
    import httpx2

    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=changes) as s,
    ):
        ready = await s.initialize()
        assert ready.capabilities.tools is not None
        assert ready.capabilities.tools.list_changed is True
        yield s


async def subscribed(session: Session, count: int) -> None:
    """Until ``count`` connections listen: a client's ``notifications/initialized`` is
    answered 202 before the server handles it."""
    (fanout,) = [
        listener.__self__
        for listener in session.toolset.external_listeners
        if isinstance(getattr(listener, "__self__", None), ToolListChanges)
    ]
    with anyio.fail_after(10):
        while len(fanout._subscribers) != count:
            await anyio.sleep(0.02)


async def handler(args: dict[str, Any], ctx: Any) -> Any:
    return {"ok": True}


def test_http_clients_hear_registrations_and_removals(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )

    def register(description: str = "A tool that came later.") -> None:
        session.register_external("late__tool", description, SCHEMA, handler)

    async def body(url: str) -> None:
        first, second = Changes(), Changes()
        async with http_client(url, first) as a, http_client(url, second) as b:
            await subscribed(session, 2)
            await anyio.to_thread.run_sync(register)
            await first.next()
            await second.next()
            assert "late__tool" in {t.name for t in (await a.list_tools()).tools}

            await anyio.to_thread.run_sync(register)
            await anyio.sleep(0.5)
            assert (first.count, second.count) == (1, 1), "the same list again is no change"

            await anyio.to_thread.run_sync(session.unregister_external, "late__tool")
            await first.next()
            await second.next()
            assert "late__tool" not in {t.name for t in (await b.list_tools()).tools}
        await subscribed(session, 0)

    with session, ThreadedServer(http_app(session, host="127.0.0.1")) as server:
        anyio.run(body, f"{server.url}/mcp")
