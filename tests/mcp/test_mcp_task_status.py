"""Task status pushed on ``subscriptions/listen`` (``notifications/tasks``): a client that names
its task ids hears each change, from the call's progress to the inlined result, without polling;
the ack lists only the tasks it may see; a client that did not declare the extension is refused
with ``-32021``. ``toolhub mcp`` over streamable HTTP on an embedded session, the SDK's client
on the 2026-07-28 wire (the notification reaches it through a ``NotificationBinding``).
The same across two replicas of a fleet session: tests/mcp/test_mcp_tasks_fleet.py."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp.task_client import TaskClient, task_client
from tests.mcp.test_mcp_tasks import url

pytestmark = pytest.mark.timeout(60)

__all__ = ["url"]  # the embedded server fixture

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


async def listened(client: TaskClient, task_ids: list[str]) -> dict[str, Any]:
    async with asyncio.timeout(30):
        return await client.listen_tasks(task_ids)


def test_a_listener_hears_every_status_change_to_the_result(url: str) -> None:
    async def go() -> tuple[dict[str, Any], TaskClient]:
        async with task_client(url, "token-alice") as client:
            task = await client.call("nap", {"seconds": 1.6})
            await listened(client, [task["taskId"], "task_that_does_not_exist"])
            return task, client

    task, client = asyncio.run(go())
    [ack] = client.acks
    assert ack["notifications"]["taskIds"] == [task["taskId"]]
    notes = client.task_notes
    assert notes, "no notifications/tasks frame"
    assert all(n["taskId"] == task["taskId"] for n in notes)
    assert all(n["_meta"][SUBSCRIPTION] == ack["_meta"][SUBSCRIPTION] for n in notes)
    assert "resultType" not in notes[0]
    # Fed from the call's progress: the nap's ticks show as statusMessage while it works.
    working = [n["statusMessage"] for n in notes if n["status"] == "working"]
    assert any(message.startswith("tick") for message in working), working
    last = notes[-1]
    assert last["status"] == "completed" and [n["status"] for n in notes].count("completed") == 1
    assert last["result"]["structuredContent"] == {"slept": 1.6}
    # No repeats: each frame says something the previous one did not.
    keys = [(n["status"], n.get("statusMessage")) for n in notes]
    assert all(a != b for a, b in itertools.pairwise(keys))


def test_another_principals_task_is_not_acknowledged_and_nothing_is_sent(url: str) -> None:
    async def go() -> tuple[TaskClient, dict[str, Any]]:
        async with (
            task_client(url, "token-alice") as alice,
            task_client(url, "token-bob") as bob,
        ):
            task = await alice.call("nap", {"seconds": 1.4})
            ended = await listened(bob, [task["taskId"]])
            return bob, ended

    bob, ended = asyncio.run(go())
    [ack] = bob.acks
    assert ack["notifications"]["taskIds"] == []
    assert bob.task_notes == [] and SUBSCRIPTION in ended["_meta"]


def test_a_client_without_the_extension_is_refused(url: str) -> None:
    async def go() -> MCPError:
        async with task_client(url, "token-alice", declare=False) as client:
            with pytest.raises(MCPError) as refused:
                await client.listen_tasks(["task_whatever"])
            return refused.value

    assert asyncio.run(go()).error.code == -32021


def test_a_finished_task_is_reported_once_and_the_stream_ends(url: str) -> None:
    async def go() -> TaskClient:
        async with task_client(url, "token-alice") as client:
            task = await client.call("nap", {"seconds": 1.2})
            while (await client.get(task["taskId"]))["status"] == "working":
                await asyncio.sleep(0.1)
            await listened(client, [task["taskId"]])
            return client

    client = asyncio.run(go())
    [note] = client.task_notes
    assert note["status"] == "completed" and note["result"]["isError"] is False
