"""Cancellation from any dispatcher: a running call's processes die on another worker, a queued
call is cancelled before it starts, and Celery's ``revoke(terminate=True)`` is never needed."""

from __future__ import annotations

import asyncio
import time

import psutil

from tests.distributed.helpers import async_wait_until, process_gone, wait_until, worker_pid
from toolhub import CallResult, Progress
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.tasks import BackgroundTasks


def test_cancel_from_another_dispatcher_kills_the_process_group(live, connect, store):
    caller = connect(session_id="cancel-owner")
    other = connect(session_id="cancel-owner")  # the same session, another dispatcher
    stranger = connect(session_id="cancel-other")
    cid = "cancel-running"

    async def go():
        stream = caller.stream("sleeper", {"seconds": 60}, call_id=cid)
        first = await anext(stream)
        assert isinstance(first, Progress) and first.subkind == "pid"
        pid = first.payload["pid"]
        assert not process_gone(pid)
        assert not await stranger.cancel(cid), "another session cannot cancel it"
        assert not process_gone(pid)
        started = time.monotonic()
        assert await other.cancel(cid)
        rest = [item async for item in stream]
        terminal_after = time.monotonic() - started
        await async_wait_until(lambda: process_gone(pid), 5)
        return pid, rest, terminal_after, time.monotonic() - started

    _, rest, terminal_after, gone_after = asyncio.run(asyncio.wait_for(go(), 30))
    result = rest[-1]
    assert isinstance(result, CallResult) and result.error.kind == "cancelled"
    assert terminal_after < 1.0 and gone_after < 2.0
    record = store.get_record(cid)
    assert record["status"] == "cancelled" and record["cancel_requested"]
    assert [a["outcome"] for a in record["attempts"]] == ["cancelled"]
    # The worker process that ran it is alive and well: only the call's group was killed.
    assert psutil.pid_exists(worker_pid(record))
    assert not record.get("result", {}).get("output")


def test_cancel_reaches_a_real_bash_command(live, store, tmp_path):
    from toolhub import Session

    ws = tmp_path / "ws"
    ws.mkdir()
    config = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}
    session = Session.connect(live.url, config, ws)
    cid = "cancel-bash"
    marker_arg = "37.25"

    def sleepers() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            if proc.info["cmdline"] == ["sleep", marker_arg] and proc.info["status"] != "zombie":
                found.append(proc)
        return found

    async def go():
        task = asyncio.ensure_future(
            session.call(
                "bash",
                {"command": f"echo before-the-cancel; sleep {marker_arg}", "description": "t"},
                call_id=cid,
            )
        )
        await async_wait_until(sleepers, 10)
        started = time.monotonic()
        assert await session.cancel(cid)
        result = await task
        await async_wait_until(lambda: not sleepers(), 5)
        return result, time.monotonic() - started

    try:
        result, took = asyncio.run(asyncio.wait_for(go(), 30))
    finally:
        session.close()
    assert result.error.kind == "cancelled" and took < 3.0
    # What the tool said of the kill reaches the caller (issue 16: only "was cancelled").
    assert "exit: killed (cancelled)" in result.error.detail, result.error.detail
    assert "before-the-cancel" in result.error.detail
    assert store.get_record(cid)["status"] == "cancelled"


def test_queued_call_is_cancelled_before_it_starts(live, connect, store):
    session = connect()
    # Fill every slot that serves the command queue (2 workers x 4 threads).
    blockers = [f"block-{i}" for i in range(8)]
    cid = "cancel-queued"

    async def go():
        running = [
            asyncio.ensure_future(session.call("sleeper", {"seconds": 60}, call_id=b))
            for b in blockers
        ]
        await async_wait_until(
            lambda: all((store.get_record(b) or {}).get("status") == "running" for b in blockers),
            15,
        )
        queued = asyncio.ensure_future(session.call("ticks", {"n": 1}, call_id=cid))
        await async_wait_until(lambda: store.get_record(cid) is not None)
        started = time.monotonic()
        assert await session.cancel(cid)
        result = await queued
        took = time.monotonic() - started
        for b in blockers:
            await session.cancel(b)
        await asyncio.gather(*running)
        return result, took

    result, took = asyncio.run(asyncio.wait_for(go(), 60))
    # The blockers sleep 60 s: an answer in seconds is the cancel's, not a freed slot's (a busy
    # machine's scheduling alone has taken over half a second here).
    assert result.error.kind == "cancelled" and took < 10.0
    # Its message is still delivered once a slot frees up; the worker drops it unrun.
    wait_until(lambda: store.client.llen("toolhub.command") == 0, 10)
    time.sleep(0.3)
    record = store.get_record(cid)
    assert record["status"] == "cancelled" and record["attempt"] == 0
    assert record["attempts"] == [] and record["seq"] == 1


def test_kill_task_from_any_dispatcher(live, store, tmp_path):
    """A background command started through one dispatcher is killed through another."""
    from toolhub import Session

    ws = tmp_path / "ws"
    ws.mkdir()
    config = {"tools": [{"id": "Main:bash"}, {"id": "Main:task_output"}, {"id": "Main:kill_task"}]}
    first = Session.connect(live.url, config, ws, session_id="bg-owner")
    second = Session.connect(live.url, config, ws, session_id="bg-owner")
    try:
        started = first.call_sync(
            "bash",
            {
                "command": "echo begin; sleep 41.5; echo never",
                "description": "t",
                "is_background": True,
            },
        )
        assert not started.is_error, started.prompt_text
        task_id = started.output.value["task_id"]
        tasks = second.resources.get(BackgroundTasks)
        wait_until(lambda: "begin" in (tasks.snapshot(task_id).output or ""), 10)
        killed = second.call_sync("kill_task", {"task_id": task_id})
        assert not killed.is_error, killed.prompt_text
        snap = wait_until(lambda: (s := tasks.snapshot(task_id)).finished and s, 5)
        assert snap.status == "killed" and "never" not in snap.output
    finally:
        first.close()
        second.close()
    other = RedisStore.from_settings(Settings.from_env(live.url))
    try:
        assert other.get_record(task_id)["status"] == "cancelled"
    finally:
        other.close()
