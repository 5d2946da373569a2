"""MCP tasks (``io.modelcontextprotocol/tasks``) on ``toolhub mcp`` over streamable HTTP, with
the SDK's client on the 2026-07-28 wire: a long call becomes a task, a short one is answered
directly, the handle is durable at once, questions go through ``input_required`` and
``tasks/update``, a task is bound to its principal, ``requestState`` is checked, and the TTL
ends it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.gateway.support import make_builder
from tests.mcp.task_client import TASKS, TaskClient, stdio_task_client, task_client
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(180)

TERMINAL = ("completed", "failed", "cancelled")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "ws").mkdir()
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )
    app = http_app(session, host="127.0.0.1", token="token-alice,token-bob")
    with session, ThreadedServer(app) as server:
        yield f"{server.url}/mcp"


async def poll(client: TaskClient, task: dict[str, Any], limit_s: float = 20) -> dict[str, Any]:
    """``tasks/get`` until the task ends, echoing the newest ``requestState`` as a client must;
    returns the last answer, with every status seen under ``"seen"``."""
    state, seen = task.get("requestState"), []
    async with asyncio.timeout(limit_s):
        while True:
            got = await client.get(task["taskId"], state)
            state = got.get("requestState", state)
            seen.append((got["status"], got.get("statusMessage")))
            if got["status"] in TERMINAL:
                return {**got, "seen": seen}
            await asyncio.sleep(0.1)


def test_a_long_call_becomes_a_task_and_its_result_is_collected(url: str) -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with task_client(url, "token-alice") as client:
            task = await client.call("nap", {"seconds": 1.6})
            first = await client.get(task["taskId"])  # durable before the handle came back
            return task, first, await poll(client, task)

    task, first, done = asyncio.run(go())
    assert task["resultType"] == "task" and task["status"] == "working"
    assert task["taskId"].startswith("task_") and len(task["taskId"]) >= 32
    assert task["ttlMs"] == 3_600_000 and task["pollIntervalMs"] > 0
    assert first["status"] == "working" and first["resultType"] == "complete"
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"slept": 1.6}
    assert done["result"]["isError"] is False
    # statusMessage follows the call's progress while it runs.
    assert any(message and message.startswith("tick") for _, message in done["seen"])


def test_a_short_call_is_answered_directly(url: str) -> None:
    async def go() -> dict[str, Any]:
        async with task_client(url, "token-alice") as client:
            return await client.call("echo", {"text": "hello"})

    answer = asyncio.run(go())
    assert answer.get("resultType") != "task" and "taskId" not in answer
    assert "hello" in answer["content"][0]["text"]


def test_a_client_without_the_extension_never_gets_a_task(url: str) -> None:
    async def go() -> tuple[dict[str, Any], MCPError]:
        async with task_client(url, "token-alice", declare=False) as client:
            answer = await client.call("nap", {"seconds": 1.3})
            with pytest.raises(MCPError) as refused:
                await client.get("task_whatever")
            return answer, refused.value

    answer, refused = asyncio.run(go())
    assert answer["structuredContent"] == {"slept": 1.3}
    assert refused.error.code == -32021  # tasks/* needs the declared capability


def test_a_handshake_era_client_that_declares_the_extension_is_answered_directly(
    url: str,
) -> None:
    """The same long call a 2026-07-28 client gets as a task is a direct result on a
    2025-11-25 connection whose client names the extension at ``initialize``: the ``mcp`` SDK
    delivers no extension result on a handshake-era wire, and its ``initialize`` answer does
    not offer the extension, so the client is not led to expect tasks (docs/interfaces.md)."""

    async def go() -> tuple[Any, dict[str, Any]]:
        async with task_client(url, "token-alice", handshake=True) as client:
            return client.initialized, await client.call("nap", {"seconds": 1.3})

    initialized, answer = asyncio.run(go())
    assert initialized is not None and initialized.protocol_version == "2025-11-25"
    assert TASKS not in (initialized.capabilities.extensions or {})
    assert "task" not in answer and answer["structuredContent"] == {"slept": 1.3}


def test_another_principal_can_neither_see_nor_cancel_a_task(url: str) -> None:
    async def go() -> tuple[list[int], dict[str, Any], dict[str, Any]]:
        async with (
            task_client(url, "token-alice") as alice,
            task_client(url, "token-bob") as bob,
        ):
            task = await alice.call("nap", {"seconds": 30})
            codes = []
            for attempt in (bob.get, bob.cancel):
                with pytest.raises(MCPError) as refused:
                    await attempt(task["taskId"])
                codes.append(refused.value.error.code)
            still = await alice.get(task["taskId"])
            await alice.cancel(task["taskId"])
            return codes, still, await poll(alice, task)

    codes, still, done = asyncio.run(go())
    assert codes == [-32602, -32602]  # the same answer as for a task that does not exist
    assert still["status"] == "working"
    assert done["status"] == "cancelled"


def test_a_tampered_or_foreign_request_state_is_refused(url: str) -> None:
    async def go() -> list[str]:
        async with task_client(url, "token-alice") as client:
            one = await client.call("nap", {"seconds": 5})
            two = await client.call("nap", {"seconds": 5})
            state = one["requestState"]
            flipped = state[:-1] + ("A" if state[-1] != "A" else "B")
            messages = []
            for task_id, sent in ((one["taskId"], flipped), (two["taskId"], state)):
                with pytest.raises(MCPError) as refused:
                    await client.get(task_id, sent)
                assert refused.value.error.code == -32602
                messages.append(refused.value.error.message)
            assert (await client.get(one["taskId"], state))["status"] == "working"
            for task in (one, two):
                await client.cancel(task["taskId"])
            return messages

    assert asyncio.run(go()) == [
        "Invalid requestState: requestState failed verification",
        "Invalid requestState: requestState was issued for another task",
    ]


def test_unknown_tasks_and_the_removed_experimental_method(url: str) -> None:
    async def go() -> list[int]:
        async with task_client(url, "token-alice") as client:
            codes = []
            with pytest.raises(MCPError) as unknown:
                await client.get("task_" + "x" * 32)
            codes.append(unknown.value.error.code)
            with pytest.raises(MCPError) as removed:
                await client.send_raw("tasks/result", {"taskId": "task_x"})
            codes.append(removed.value.error.code)
            return codes

    assert asyncio.run(go()) == [-32602, -32601]


def test_a_question_is_asked_through_the_task_and_answered_by_update(url: str) -> None:
    questions = [{"question": "Which colour?", "options": ["red", "blue"]}]

    async def go() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with task_client(url, "token-alice") as client:
            task = await client.call("ask", {"questions": questions})
            asking = await client.get(task["taskId"])
            await client.update(
                task["taskId"], {"ask_user": {"action": "accept", "content": {"q1": "blue"}}}
            )
            return task, asking, await poll(client, task)

    task, asking, done = asyncio.run(go())
    assert task["resultType"] == "task"
    assert asking["status"] == "input_required"
    request = asking["inputRequests"]["ask_user"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["q1"]["enum"] == ["red", "blue"]
    assert done["status"] == "completed" and "blue" in done["result"]["content"][0]["text"]


def test_a_task_is_gone_after_its_ttl(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHUB_MCP_TASK_TTL_S", "1")

    async def go() -> tuple[dict[str, Any], int]:
        async with task_client(url, "token-alice") as client:
            task = await client.call("nap", {"seconds": 30})
            await asyncio.sleep(1.5)
            with pytest.raises(MCPError) as gone:
                await client.get(task["taskId"])
            return task, gone.value.error.code

    task, code = asyncio.run(go())
    assert task["ttlMs"] == 1000 and code == -32602


@pytest.mark.parametrize(("mode", "tasked"), [("never", False), ("always", True)])
def test_the_task_policy(
    url: str, monkeypatch: pytest.MonkeyPatch, mode: str, tasked: bool
) -> None:
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", mode)

    async def go() -> dict[str, Any]:
        async with task_client(url, "token-alice") as client:
            return await client.call("echo", {"text": "hi"})

    assert (asyncio.run(go()).get("resultType") == "task") is tasked


def test_tasks_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()

    async def go() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with stdio_task_client(tmp_path / "ws") as client:
            task = await client.call("nap", {"seconds": 1.4})
            quick = await client.call("echo", {"text": "direct"})
            return task, quick, await poll(client, task)

    task, quick, done = asyncio.run(go())
    assert task["resultType"] == "task" and "taskId" not in quick
    assert done["status"] == "completed" and done["result"]["structuredContent"] == {"slept": 1.4}
