"""A call awaiting approval over MCP, with ``toolhub mcp`` as clients start it: asked as a
question whose options are approve and deny. On 2026-07-28 the real ``mcp`` SDK ``Client``
gets it as ``input_required`` and its answer approves (the command runs once) or denies (a
typed ``permission_denied``); on the handshake era (2025-06-18) it is an elicitation; a
client of the tasks extension sees the task ``input_required`` and answers by ``tasks/update``."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp.stdio_support import ROOT, TOOLHUB, toolhub_env
from tests.mcp.task_client import TASKS, TaskClient, discover
from tests.mcp.test_mcp_tasks import poll

pytestmark = pytest.mark.timeout(120)

CONFIG = {"permissions": {"rules": [{"tool": ["bash"], "command": ["echo *"], "decision": "ask"}]}}
CALL = {"command": "echo ran >> side.txt", "description": "t"}


def setup(tmp_path: Path) -> tuple[Path, list[str], dict[str, str]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    args = ["mcp", "--workspace", str(workspace), "--config", str(config)]
    return workspace, args, toolhub_env(tmp_path)


@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_the_2026_client_answers_the_approval(tmp_path: Path, answer: str) -> None:
    workspace, args, env = setup(tmp_path)
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"q1": answer})

    async def body() -> types.CallToolResult:
        params = StdioServerParameters(command=TOOLHUB, args=args, cwd=ROOT, env=env)
        async with Client(params, elicitation_callback=elicit) as client:
            assert client.session.protocol_version == "2026-07-28"
            return await client.call_tool("bash", CALL)

    result = asyncio.run(body())
    (form,) = asked
    assert "echo ran >> side.txt" in form.message and "config rules[0]" in form.message
    assert form.requested_schema["properties"]["q1"]["enum"] == ["approve", "deny"]
    text = result.content[0].text  # type: ignore[union-attr]
    if answer == "approve":
        assert result.is_error is False, text
        assert (workspace / "side.txt").read_text() == "ran\n"
    else:
        assert result.is_error is True and "denied" in text, text
        assert not (workspace / "side.txt").exists()


def test_the_handshake_era_is_asked_by_elicitation(tmp_path: Path) -> None:
    workspace, args, env = setup(tmp_path)
    proc = subprocess.Popen(
        [TOOLHUB, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=workspace,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(frame: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(frame) + "\n")
        proc.stdin.flush()

    def recv() -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            assert line, "the server closed its output"
            frame = json.loads(line)
            if frame.get("method") != "notifications/progress":
                return frame  # type: ignore[no-any-return]

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert recv()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "bash", "arguments": CALL}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        asked = recv()
        assert asked["method"] == "elicitation/create", asked
        assert "echo ran" in asked["params"]["message"]
        reply = {"action": "accept", "content": {"q1": "approve"}}
        send({"jsonrpc": "2.0", "id": asked["id"], "result": reply})
        result = recv()
        assert result["id"] == 2 and result["result"]["isError"] is False, result
        assert (workspace / "side.txt").read_text() == "ran\n"
    finally:
        proc.kill()
        proc.wait(10)


def test_the_task_path_shows_input_required_and_update_approves(tmp_path: Path) -> None:
    workspace, args, env = setup(tmp_path)

    async def go() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        params = StdioServerParameters(command=TOOLHUB, args=args, cwd=ROOT, env=env)
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, extensions={TASKS: {}}) as session,
        ):
            await discover(session)
            client = TaskClient(session)
            task = await client.call("bash", CALL)
            asking = await client.get(task["taskId"])
            reply = {"action": "accept", "content": {"q1": "approve"}}
            await client.update(task["taskId"], {"ask_user": reply})
            return task, asking, await poll(client, task)

    task, asking, done = asyncio.run(go())
    assert task["resultType"] == "task"
    assert asking["status"] == "input_required"
    form = asking["inputRequests"]["ask_user"]["params"]
    assert form["requestedSchema"]["properties"]["q1"]["enum"] == ["approve", "deny"]
    assert done["status"] == "completed", done
    assert (workspace / "side.txt").read_text() == "ran\n"
