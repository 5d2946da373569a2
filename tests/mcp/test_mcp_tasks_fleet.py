"""MCP tasks on the fleet: two ``toolhub mcp`` replicas (streamable HTTP) serve one distributed
session on the real stack (redis-server, two Celery workers). A task made through one replica
is polled, shown progressing, completed and cancelled through the other, and a task whose
worker is SIGKILLed mid-call completes once, on another worker, saying so."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.conftest import live, store
from tests.distributed.helpers import wait_until, worker_pid
from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import Stack
from tests.mcp.task_client import TaskClient, task_client
from tests.mcp.test_mcp_tasks import poll
from toolhub import Session
from toolhub.distributed.store import RedisStore
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(120)

__all__ = ["live", "store"]  # the distributed suite's fixtures

TOKEN = "fleet-token"


@pytest.fixture
def replicas(live: Stack, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two MCP replicas of one session (same id, same Redis), as two pods would be."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ExitStack() as stack:
        urls = []
        for _ in range(2):
            session = Session.connect(
                live.url, CONFIG, workspace, session_id="mcp-fleet", builder=make_builder()
            )
            stack.enter_context(session)
            server = stack.enter_context(
                ThreadedServer(http_app(session, host="127.0.0.1", token=TOKEN))
            )
            urls.append(f"{server.url}/mcp")
        yield urls[0], urls[1]


def both(a: str, b: str, body: Callable[[TaskClient, TaskClient], Any]) -> Any:
    async def go() -> Any:
        async with task_client(a, TOKEN) as one, task_client(b, TOKEN) as other:
            return await body(one, other)

    return asyncio.run(asyncio.wait_for(go(), 90))


def test_a_task_made_on_one_replica_is_followed_and_collected_on_the_other(replicas, store):
    async def body(one: TaskClient, other: TaskClient) -> tuple[dict[str, Any], dict[str, Any]]:
        task = await one.call("ticks", {"n": 30, "delay_ms": 60})
        return task, await poll(other, task, 60)

    task, done = both(*replicas, body)
    assert task["resultType"] == "task"
    assert done["status"] == "completed" and done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["total"] == 30
    # The other replica read the call's progress from its event stream, not only its status.
    assert ("working", "tick") in done["seen"]
    # The record behind it: the call the task names, run once on a worker.
    record = store.client.get("toolhub:mcptask:" + task["taskId"])
    assert record is not None and b'"status": "completed"' in record


def test_a_task_made_on_one_replica_is_cancelled_through_the_other(replicas, store):
    async def body(one: TaskClient, other: TaskClient) -> dict[str, Any]:
        task = await one.call("sleeper", {"seconds": 60})
        await other.cancel(task["taskId"])
        return await poll(one, task, 30)

    done = both(*replicas, body)
    assert done["status"] == "cancelled"


def test_a_task_survives_a_sigkill_of_its_worker(live: Stack, replicas, store: RedisStore):
    killed: list[int] = []

    async def body(one: TaskClient, other: TaskClient) -> dict[str, Any]:
        task = await one.call("ticks", {"n": 40, "delay_ms": 50})
        raw = await asyncio.to_thread(store.client.get, "toolhub:mcptask:" + task["taskId"])
        assert raw is not None
        call_id = json.loads(raw)["call_id"]
        await asyncio.to_thread(
            wait_until, lambda: (store.get_record(call_id) or {}).get("status") == "running", 20
        )
        pid = worker_pid(store.get_record(call_id))
        live.worker_by_pid(pid).signal(signal.SIGKILL)
        killed.append(pid)
        return await poll(other, task, 80)

    done = both(*replicas, body)
    result = done["result"]
    assert done["status"] == "completed" and result["isError"] is False
    # Re-run once, on another worker, and the result says so first thing.
    # (Its text is not the output's JSON, so the output travels in _meta.)
    assert result["_meta"]["toolhub/output"]["worker_pid"] != killed[0]
    assert result["content"][0]["text"].startswith(
        "[toolhub] The worker running this call was lost; the call ran again"
    )
    live.heal()


def test_status_is_pushed_through_the_other_replica(replicas, store, monkeypatch):
    """``notifications/tasks`` on a listen stream of the replica that did not make the task:
    fed from the call's event stream in Redis, from the call's progress to its result. The
    periodic re-check is pushed out of reach, so only the stream can tell the listener."""
    monkeypatch.setenv("TOOLHUB_MCP_TASK_RECHECK_S", "600")

    async def body(one: TaskClient, other: TaskClient) -> dict[str, Any]:
        task = await one.call("ticks", {"n": 30, "delay_ms": 60})
        return {"task": task, "ended": await other.listen_tasks([task["taskId"]])}

    async def go() -> tuple[dict[str, Any], TaskClient]:
        async with task_client(replicas[0], TOKEN) as one, task_client(replicas[1], TOKEN) as other:
            return await asyncio.wait_for(body(one, other), 60), other

    got, other = asyncio.run(go())
    task_id = got["task"]["taskId"]
    assert other.acks[0]["notifications"]["taskIds"] == [task_id]
    notes = other.task_notes
    assert any(n["status"] == "working" and n.get("statusMessage") == "tick" for n in notes), notes
    assert notes[-1]["status"] == "completed"
    assert notes[-1]["result"]["structuredContent"]["total"] == 30


@pytest.fixture
def asking_replicas(live: Stack, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two replicas of one session whose tool set is the built-in ``ask_user``."""
    workspace = tmp_path / "ws-ask"
    workspace.mkdir()
    config = {"tools": [{"id": "Main:ask_user"}]}
    with ExitStack() as stack:
        urls = []
        for _ in range(2):
            session = Session.connect(live.url, config, workspace, session_id="mcp-fleet-ask")
            stack.enter_context(session)
            server = stack.enter_context(
                ThreadedServer(http_app(session, host="127.0.0.1", token=TOKEN))
            )
            urls.append(f"{server.url}/mcp")
        yield urls[0], urls[1]


def test_a_question_asked_on_one_replica_is_answered_through_the_other(asking_replicas):
    """``ask_user`` on a worker: its questions are the task's ``input_required`` on the
    replica that did not make the task, and ``tasks/update`` there answers the worker."""
    questions = [{"question": "Which colour?", "options": ["red", "blue"]}]

    async def body(one: TaskClient, other: TaskClient) -> tuple[dict[str, Any], ...]:
        task = await one.call("ask_user", {"questions": questions})
        async with asyncio.timeout(20):
            while (asking := await other.get(task["taskId"]))["status"] != "input_required":
                await asyncio.sleep(0.1)
        answer = {"ask_user": {"action": "accept", "content": {"q1": "blue"}}}
        await other.update(task["taskId"], answer)
        return task, asking, await poll(one, task, 30)

    task, asking, done = both(*asking_replicas, body)
    assert task["resultType"] == "task"
    request = asking["inputRequests"]["ask_user"]
    assert request["params"]["requestedSchema"]["properties"]["q1"]["enum"] == ["red", "blue"]
    assert done["status"] == "completed" and done["result"]["isError"] is False
    assert "blue" in json.dumps(done["result"])
