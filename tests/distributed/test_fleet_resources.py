"""The Redis-backed resources: durable background commands and ``ask_user`` answers, used
from any dispatcher and any worker."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.distributed.helpers import TASK_TOOLS, wait_until, worker_pid
from toolhub import CallResult, Progress, Session
from toolhub.tasks import BackgroundTasks


def test_background_command_survives_its_worker_and_its_client(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    command = (
        "echo start >> runs.txt; for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.25; done;"
        " echo end"
    )
    starter = Session.connect(live.url, TASK_TOOLS, ws, session_id="bg-durable")
    started = starter.call_sync(
        "bash", {"command": command, "description": "t", "is_background": True}
    )
    assert not started.is_error, started.prompt_text
    task_id = started.output.value["task_id"]
    starter.close()  # the client that started it goes away; nothing may be lost

    wait_until(lambda: "tick 2" in _output(store, task_id), 10)
    first = store.get_record(task_id)
    live.worker_by_pid(worker_pid(first)).signal(signal.SIGKILL)

    reader = Session.connect(live.url, TASK_TOOLS, ws, session_id="bg-durable")
    try:
        waited = reader.call_sync("task_output", {"task_ids": [task_id], "timeout_ms": 30000})
        assert not waited.is_error, waited.prompt_text
        snap = waited.output.value["tasks"][0]
        assert snap["status"] == "exited" and snap["exit_code"] == 0, snap
        assert "tick 8" in snap["output"] and snap["output"].rstrip().endswith("end")
        tasks = reader.resources.get(BackgroundTasks)
        assert [t.task_id for t in tasks.list("bg-durable")] == [task_id]
    finally:
        reader.close()
    # The command ran under the host's holder, not in the worker process: it kept running
    # through the SIGKILL, once, with its output intact (no re-run, no retry marker).
    record = store.get_record(task_id)
    assert record["status"] == "succeeded" and record["attempt"] == 1
    assert [a["outcome"] for a in record["attempts"]] == ["succeeded"]
    assert record["attempts"][0]["worker"] == first["worker"]
    subkinds = [e.item.subkind for e in store.read_events(task_id) if isinstance(e.item, Progress)]
    assert "retry" not in subkinds
    ticks = [line for line in _output(store, task_id).splitlines() if line.startswith("tick")]
    assert ticks == [f"tick {i}" for i in range(1, 9)]
    assert (ws / "runs.txt").read_text().split() == ["start"]


def _output(store, task_id: str) -> str:
    return "".join(
        str(e.item.payload.get("delta", ""))
        for e in store.read_events(task_id)
        if isinstance(e.item, Progress) and isinstance(e.item.payload, dict)
    )


def test_ask_user_is_answered_through_another_dispatcher(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    config = {"tools": [{"id": "Main:ask_user"}]}
    asker = Session.connect(live.url, config, ws, session_id="asking")
    answerer = Session.connect(live.url, config, ws, session_id="asking")
    cid = "question-1"

    async def go():
        items: list[Progress | CallResult] = []
        async for item in asker.stream(
            "ask_user",
            {"questions": [{"question": "Deploy now?", "options": ["yes", "no"]}]},
            call_id=cid,
        ):
            items.append(item)
            if isinstance(item, Progress) and item.subkind == "input_required":
                from toolhub.answers import AnswerBox

                box = answerer.resources.get(AnswerBox)
                assert list(box.pending()) == [cid]
                assert answerer.answer(cid, ["yes"])
                assert not answerer.answer(cid, ["no"])
        return items

    try:
        items = asyncio.run(asyncio.wait_for(go(), 20))
    finally:
        asker.close()
        answerer.close()
    result = items[-1]
    assert isinstance(result, CallResult) and not result.is_error, result.prompt_text
    assert result.output.value["status"] == "answered"
    assert result.output.value["answers"][0]["answer"] == "yes"
    assert store.client.hlen(store.keys.questions("asking")) == 0
