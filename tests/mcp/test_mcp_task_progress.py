"""Progress keeps flowing as ``notifications/progress`` after a call becomes a task, while the
request's connection is open (stdio here): a client that passed a ``progressToken`` hears the
whole call, numbered on without a gap, not just the second before the task handle came back.
A task's status words name a worker only on a deployment that has workers."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp.stdio_support import ROOT
from tests.mcp.task_client import TaskResult
from toolhub.sources.mcp_task_polling import TASKS_EXTENSION


def test_progress_goes_on_after_the_call_became_a_task(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    heard: list[tuple[float, float]] = []

    async def hear(message: Any) -> None:
        if isinstance(message, types.ProgressNotification) or (
            getattr(message, "method", None) == "notifications/progress"
        ):
            params = message.params
            if params.progress_token == "p1":
                heard.append((time.monotonic(), params.progress))

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp.mcp_test_server", str(tmp_path / "ws")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )

    async def go() -> tuple[dict[str, Any], float, float]:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(
                read, write, extensions={TASKS_EXTENSION: {}}, message_handler=hear
            ) as session,
        ):
            await session.discover()
            request = types.CallToolRequest(
                params=types.CallToolRequestParams(
                    name="nap", arguments={"seconds": 2.5}, _meta={"progressToken": "p1"}
                )
            )
            raw = await session.send_request(request, TaskResult)
            answered = time.monotonic()
            await asyncio.sleep(3.5)  # the nap ends about 1.5 s after the handle
            return raw.model_dump(by_alias=True, exclude_none=True), answered, time.monotonic()

    task, answered, _ = asyncio.run(go())
    assert task["resultType"] == "task"
    later = [value for at, value in heard if at > answered]
    assert later, f"no progress after the task handle ({len(heard)} before it)"
    values = [value for _, value in heard]
    assert values == sorted(values) and len(set(values)) == len(values), values


def test_status_words_name_a_worker_only_where_there_is_one() -> None:
    from toolhub.mcp.tasks import _status_line

    assert _status_line({"status": "running"}) == "running"  # an embedded session's call
    assert _status_line({"status": "running", "queue": "toolhub.fast"}) == "running on a worker"
    assert _status_line({"status": "queued", "queue": "toolhub.fast"}) == "queued for a worker"
