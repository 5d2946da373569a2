"""A tenant quota through ``toolhub mcp``'s server on a distributed session (the real stack:
redis-server and ``toolhub worker`` processes), read by the official MCP client: a call over
the rate is an ``isError`` result whose text says which quota and when to retry, with the
typed ``rate_limited`` error (quota, ``retry_after``) in ``_meta``; the retry after it runs."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import shared_stack
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.call_results import ERROR_META_KEY
from toolhub.mcp.transports import http_app
from toolhub.tenancy import Quotas

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def mcp_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    stack = shared_stack(request)
    # A session of its own tenant, so the bucket is this test's alone; its workspace in the
    # tenant's root, where the workers admit it.
    tenant = f"mcpq{os.urandom(3).hex()}"
    workspace = tmp_path / "root" / "tenants" / tenant
    workspace.mkdir(parents=True)
    session = Session.connect(
        stack.url,
        CONFIG,
        workspace,
        session_id=f"{tenant}~s",
        builder=make_builder(),
        quotas=Quotas(calls_per_second=0.5, burst=1),
    )
    with session, ThreadedServer(http_app(session, host="127.0.0.1", token="tok")) as server:
        yield f"{server.url}/mcp"


@asynccontextmanager
async def connect(url: str) -> Any:
    import httpx2

    async with (
        httpx2.AsyncClient(headers={"Authorization": "Bearer tok"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


def test_a_call_over_the_rate_is_a_typed_error_result(mcp_url: str) -> None:
    async def body() -> None:
        async with connect(mcp_url) as s:
            first = await s.call_tool("noop", {})
            assert first.is_error is False
            refused = await s.call_tool("noop", {})
            assert refused.is_error is True
            text = refused.content[0].text  # type: ignore[union-attr]
            assert "at most 0.5 calls per second" in text and "retry after" in text
            assert refused.meta is not None
            error = refused.meta[ERROR_META_KEY]
            assert error["kind"] == "rate_limited"
            assert error["details"]["quota"] == "calls_per_second"
            retry = error["details"]["retry_after"]
            assert 0 < retry <= 2
            time.sleep(retry + 0.1)
            again = await s.call_tool("noop", {})
            assert again.is_error is False

    anyio.run(body)
