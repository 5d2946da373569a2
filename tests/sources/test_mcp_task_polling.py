"""toolhub's MCP client takes a server's tasks (``mcp_servers: {name: {…, tasks: true}}``): a
long call to another toolhub answered with a task handle is polled to its result, its
``statusMessage`` arriving as the call's progress, and a cancelled toolhub call cancels the
remote task. Without ``tasks`` the client speaks the handshake protocol and waits, as before."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.helpers import wait_until
from tests.gateway.support import make_builder
from toolhub import CallResult, Progress, Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(60)

#: The statusMessage of a toolhub task handle (``toolhub/mcp/tasks.py``).
TASK_STARTED = "The call is running."


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[str, Session]]:
    """Another toolhub, serving the test tools over MCP (HTTP), and its session."""
    (tmp_path / "remote").mkdir()
    session = Session.embedded(
        None, tmp_path / "remote", state_dir=tmp_path / "remote-state", builder=make_builder()
    )
    with session, ThreadedServer(http_app(session, host="127.0.0.1", token="tok")) as server:
        yield f"{server.url}/mcp", session


def local(tmp_path: Path, url: str, *, tasks: bool) -> Session:
    (tmp_path / "ws").mkdir(exist_ok=True)
    server = {"url": url, "headers": {"Authorization": "Bearer tok"}, "tasks": tasks}
    return Session.embedded(
        {"tools": [], "mcp_servers": {"far": server}},
        tmp_path / "ws",
        state_dir=tmp_path / "state",
        builder=make_builder(),
    )


def test_a_long_remote_call_is_taken_as_a_task_and_polled(tmp_path: Path, remote) -> None:
    url, _ = remote
    with local(tmp_path, url, tasks=True) as session:

        async def go() -> list[Progress | CallResult]:
            return [item async for item in session.stream("far__nap", {"seconds": 3})]

        items = asyncio.run(asyncio.wait_for(go(), 30))
    result = items[-1]
    assert isinstance(result, CallResult) and not result.is_error, result.prompt_text
    assert result.output is not None and result.output.value == {"slept": 3.0}
    texts = [i.text for i in items if isinstance(i, Progress) and i.kind == "text"]
    # Progress notifications for the first second, then the handle's statusMessage (only a
    # task has one), then the task's while it ran ("tick N", read by tasks/get).
    assert TASK_STARTED in texts, texts
    after = texts[texts.index(TASK_STARTED) + 1 :]
    assert any(text and text.startswith("tick") for text in after), texts


def test_cancelling_the_call_cancels_the_remote_task(tmp_path: Path, remote) -> None:
    url, remote_session = remote
    with local(tmp_path, url, tasks=True) as session:

        async def go() -> tuple[list[str], CallResult]:
            texts: list[str] = []
            stream = session.stream("far__nap", {"seconds": 30}, call_id="local-call")
            async for item in stream:
                if isinstance(item, Progress) and item.kind == "text" and item.text:
                    texts.append(item.text)
                    if TASK_STARTED in texts and item.text.startswith("tick"):
                        await session.cancel("local-call")  # while tasks/get polls
                if isinstance(item, CallResult):
                    return texts, item
            raise AssertionError("no result")

        texts, result = asyncio.run(asyncio.wait_for(go(), 30))
    assert TASK_STARTED in texts
    assert result.error is not None and result.error.kind == "cancelled"
    # The remote call itself ended cancelled (the executor's records are the remote's truth).
    executor: Any = remote_session.executor
    try:
        wait_until(lambda: _statuses(executor) == ["cancelled"], 10)
    except AssertionError:
        raise AssertionError(_statuses(executor)) from None


def test_without_tasks_the_client_waits_on_the_handshake_protocol(tmp_path: Path, remote) -> None:
    url, _ = remote
    with local(tmp_path, url, tasks=False) as session:
        items = list(session.stream_sync("far__nap", {"seconds": 1.2}))
    result = items[-1]
    assert isinstance(result, CallResult) and not result.is_error and result.output is not None
    assert TASK_STARTED not in [i.text for i in items if isinstance(i, Progress)]
    assert result.output.value == {"slept": 1.2}


def _statuses(executor: Any) -> list[str]:
    records = [executor.record(call_id) for call_id in list(executor.records)]
    return [str(r["status"]) for r in records if r is not None]
