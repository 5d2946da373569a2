"""The task-completion reminder on a real worker: every finished background task is announced
once, and what the reminder reads after each call does not grow with the tasks the session
ran before (``RedisBackgroundTasks.unreported``)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis import Redis

from tests.distributed.helpers import TASK_TOOLS, wait_until
from toolhub import Session
from toolhub.distributed.records import TERMINAL_STATUSES
from toolhub.tasks import BackgroundTasks

SID = "reminders"


def _finished(store, task_ids: list[str]) -> bool:
    return all(store.get_record(t)["status"] in TERMINAL_STATUSES for t in task_ids)


def _announced(text: str, task_ids: list[str]) -> list[str]:
    return [t for t in task_ids if f'Background task "{t}"' in text]


@dataclass
class Monitored:
    result: Any
    commands: list[str]


def _monitored(url: str, action: Callable[[], Any]) -> Monitored:
    """``action``'s result and every command Redis ran meanwhile (any client's: callers filter
    by key), read with ``MONITOR`` up to a marker sent after it."""
    marker = f"marker-{uuid.uuid4().hex}"
    commands: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        with Redis.from_url(url).monitor() as monitor:
            ready.set()
            while marker not in (command := monitor.next_command()["command"]):
                commands.append(command)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert ready.wait(60), "the monitor never started"
    time.sleep(0.2)  # MONITOR is in effect once its reply arrived; give it that moment
    result = action()
    Redis.from_url(url).echo(marker)
    watcher.join(10)
    assert not watcher.is_alive(), "the monitor never saw its marker"
    return Monitored(result, commands)


def test_each_completion_is_announced_once_and_old_tasks_cost_nothing(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(live.url, TASK_TOOLS, ws, session_id=SID)
    try:
        # Each waits for the file ``go``, so none finishes (and is announced in the reminder of
        # the next start) before all four have started, however slow the machine.
        started = [
            session.call_sync(
                "bash",
                {
                    "command": f"until [ -e go ]; do sleep 0.05; done; echo done {i}",
                    "description": "t",
                    "is_background": True,
                },
            )
            for i in range(4)
        ]
        task_ids = [r.output.value["task_id"] for r in started]
        (ws / "go").touch()
        wait_until(lambda: _finished(store, task_ids), 20)

        # task_output reports the first one itself: the reminder must not repeat it.
        shown = session.call_sync("task_output", {"task_ids": [task_ids[0]], "timeout_ms": 0})
        assert not shown.is_error, shown.prompt_text
        # The reminder after that same call announces the other three, oldest first.
        assert _announced(shown.prompt_text, task_ids) == task_ids[1:], shown.prompt_text
        again = session.call_sync("bash", {"command": "true", "description": "t"})
        assert _announced(again.prompt_text, task_ids) == []

        tasks = session.resources.get(BackgroundTasks)
        assert tasks is not None
        # Listing still shows every task, oldest first, reported or not.
        assert [t.task_id for t in tasks.list(SID)] == task_ids

        seen = _monitored(live.url, lambda: tasks.unreported(SID))
        assert seen.result == []
        # One range read of the (now empty) unreported part of the session's tasks; not one
        # read of the four tasks' records or streams.
        touching = [c for c in seen.commands if any(t in c for t in task_ids)]
        assert touching == [], touching
        assert [c.split()[0] for c in seen.commands if SID + ":tasks" in c] == ["ZRANGEBYSCORE"]

        # Starting another background command (it names the session's running ones) and the
        # reminder after it read none of the four reported tasks either, on the worker too.
        args = {"command": "sleep 30", "description": "t", "is_background": True}
        started = _monitored(live.url, lambda: session.call_sync("bash", args))
        assert not started.result.is_error, started.result.prompt_text
        touching = [c for c in started.commands if any(t in c for t in task_ids)]
        assert touching == [], touching
        newest = started.result.output.value["task_id"]
        assert [t.task_id for t in tasks.running(SID)] == [newest]
        assert tasks.kill(newest) == "killed"
    finally:
        session.close()


def test_a_task_whose_record_expired_leaves_the_set(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"{SID}-expired")
    try:
        started = session.call_sync(
            "bash", {"command": "sleep 30", "description": "t", "is_background": True}
        )
        task_id = started.output.value["task_id"]
        client = Redis.from_url(live.url)
        keys = store.keys
        tasks = session.resources.get(BackgroundTasks)
        assert tasks is not None
        assert tasks.unreported(session.session_id) == []  # running: not finished yet
        tasks.kill(task_id)
        wait_until(lambda: _finished(store, [task_id]), 20)
        client.delete(keys.call(task_id))
        assert tasks.unreported(session.session_id) == []
        assert client.zcard(keys.session_tasks(session.session_id)) == 0
    finally:
        session.close()
