"""A background sub-agent whose worker is SIGKILLed: shown ``lost`` (never ``running``) while
its lease runs out, re-run on another worker as the next attempt, resumed from the runner's
stored transcript, and finished once; read from a dispatcher other than the one that started
it."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from tests.distributed.helpers import wait_until, worker_pid
from toolhub import Progress, Session
from toolhub.tasks import BackgroundTasks

TASK_TOOLS = {
    "tools": [
        {"id": "Main:task"},
        {"id": "Main:task_output"},
        {"id": "Main:wait_tasks"},
        {"id": "Main:kill_task"},
    ]
}


def _output(store, task_id: str) -> str:
    return "".join(
        str(e.item.payload.get("delta", ""))
        for e in store.read_events(task_id)
        if isinstance(e.item, Progress) and isinstance(e.item.payload, dict)
    )


def test_sigkilled_subagent_resumes_on_another_worker(live, store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sid_session = f"task-loss-{time.time_ns()}"
    starter = Session.connect(live.url, TASK_TOOLS, ws, session_id=sid_session)
    first = starter.call_sync(
        "task", {"prompt": "first", "description": "d", "run_in_background": False}
    )
    assert not first.is_error, first.prompt_text
    agent = first.output.value["subagent_id"]
    marker = tmp_path / "runs.txt"
    started = starter.call_sync(
        "task",
        {"prompt": f"slow 40 {marker}", "description": "d", "resume_from": agent},
    )
    assert not started.is_error, started.prompt_text
    task_id = started.output.value["task_id"]
    starter.close()

    # Connected before the kill: the `lost` window (lease expiry to the sweep's re-queue,
    # about a quarter lease) must not pass while a new session connects.
    reader = Session.connect(live.url, TASK_TOOLS, ws, session_id=sid_session)
    wait_until(lambda: "step 3" in _output(store, task_id), 20)
    record = store.get_record(task_id)
    killed = worker_pid(record)
    live.worker_by_pid(killed).signal(signal.SIGKILL)

    try:
        # The other workers paused, so no sweep re-runs it before its lease has visibly expired:
        # sweeps run every quarter lease at a random phase, and the window between the expiry
        # and the re-run could otherwise close between two looks. Read in this process (the
        # tasks resource), as `task_output` would need a worker.
        tasks = reader.resources.get(BackgroundTasks)
        others = [w for w in live.workers if w.alive and w.pid != killed]
        for worker in others:
            worker.signal(signal.SIGSTOP)
        try:
            wait_until(lambda: tasks.snapshot(task_id).status == "lost", 5)
        finally:
            for worker in others:
                worker.signal(signal.SIGCONT)
        seen: set[tuple[str, int]] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snap = reader.call_sync("task_output", {"task_ids": task_id}).output.value["tasks"][0]
            seen.add((snap["status"], snap["attempt"]))
            if snap["status"] not in ("running", "lost"):
                break
            time.sleep(0.02)
        assert snap["status"] == "exited" and snap["exit_code"] == 0, snap
        assert ("running", 1) not in seen, seen  # once lost, never `running` again
        assert snap["attempt"] == 2
        # Resumed: the re-run sees the transcript's earlier turn, and runs the lost turn again.
        assert f"turns: first | slow 40 {marker}" in snap["output"], snap["output"]
    finally:
        reader.close()
    record = store.get_record(task_id)
    assert record["status"] == "succeeded" and record["attempt"] == 2
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "succeeded"]
    runs = marker.read_text().split("\n")
    assert runs[0] == f"start {killed}" and f"done {killed}" not in runs
    assert len([r for r in runs if r.startswith("done")]) == 1
    subkinds = [e.item.subkind for e in store.read_events(task_id) if isinstance(e.item, Progress)]
    assert subkinds.count("retry") == 1


@pytest.mark.long  # run by `make test-long`; make test keeps the subagent resumed after one kill
def test_subagent_that_kills_every_worker_fails_with_worker_lost(live, store, tmp_path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"task-die-{time.time_ns()}")
    stop = threading.Event()

    def keep_workers_alive() -> None:
        while not stop.is_set():
            live.heal()
            stop.wait(0.1)

    healer = threading.Thread(target=keep_workers_alive, daemon=True)
    healer.start()
    try:
        started = session.call_sync("task", {"prompt": "die", "description": "d"})
        assert not started.is_error, started.prompt_text
        task_id = started.output.value["task_id"]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            shown = session.call_sync("task_output", {"task_ids": task_id})
            snap = shown.output.value["tasks"][0]
            if snap["status"] not in ("running", "lost"):
                break
            time.sleep(0.2)
    finally:
        stop.set()
        healer.join(30)
        session.close()
    assert snap["status"] == "killed" and "lost" in snap["error"], snap
    assert "It failed:" in shown.prompt_text and "3 time(s)" in shown.prompt_text
    record = store.get_record(task_id)
    assert record["status"] == "failed" and record["lost"] == 3
    assert store.client.zscore(store.keys.leases, task_id) is None
