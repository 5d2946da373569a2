"""task_output, wait_tasks, kill_task and the completion reminder: lenient ids, capped waits,
session scoping, and completion reported exactly once (tool or reminder, never both)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.tools.harness import Harness
from toolhub.core import CancelToken, ErrorKind
from toolhub.tasks import BackgroundTasks
from toolhub.tools.background import KillTask, TaskOutput, TaskParams, WaitTasks
from toolhub.tools.shell import Bash
from toolhub.tools.todo import TodoWrite


def start(h: Harness, command: str) -> str:
    res = h.call(Bash, {"command": command, "description": "bg", "is_background": True})
    return res.output.task_id


def wait_for_output(h: Harness, task: str, text: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in h.call(TaskOutput, {"task_ids": task}).text:
        assert time.monotonic() < deadline, f"no {text!r} from {task} in {timeout_s} s"
        time.sleep(0.05)


def completion_notes(h: Harness) -> list[str]:
    res = h.call(TodoWrite, {"todos": []})
    return [n for n in h.reminders(res) if "Background task" in n]


def test_snapshot_of_running_task_accepts_bare_string_and_alias(harness: Harness) -> None:
    task = start(harness, "echo partial; sleep 60")
    wait_for_output(harness, task, "partial")
    for args in ({"task_ids": task}, {"task_id": task}, {"task_ids": [task, task]}):
        res = harness.call(TaskOutput, args)
        (snap,) = res.output.tasks
        assert snap.status == "running"
        assert "partial" in res.text and "Still running" in res.text


def test_wait_returns_when_done_and_reports_output(harness: Harness) -> None:
    task = start(harness, "sleep 0.3; echo finished; exit 5")
    started = time.monotonic()
    res = harness.call(TaskOutput, {"task_ids": [task], "timeout_ms": 120_000})
    assert time.monotonic() - started < 30  # at its end, not at the wait's timeout
    (snap,) = res.output.tasks
    assert snap.status == "exited" and snap.exit_code == 5
    assert "exit code 5" in res.text and "finished" in res.text


def test_wait_is_capped_by_params(harness: Harness) -> None:
    harness.set_params(TaskParams(max_wait_ms=300))
    task = start(harness, "sleep 60")
    started = time.monotonic()
    res = harness.call(TaskOutput, {"task_ids": task, "timeout_ms": 600_000})
    assert time.monotonic() - started < 30  # the cap, not the task's minute
    assert res.output.timed_out and "timed out" in res.text


def test_wait_is_cancelled_at_once(harness: Harness) -> None:
    task = start(harness, "sleep 60")
    token = CancelToken()
    threading.Timer(0.2, token.cancel).start()
    started = time.monotonic()
    res = harness.call(WaitTasks, {"task_ids": [task]}, cancel=token)
    assert time.monotonic() - started < 30  # the cancel, not the task's minute
    assert res.error is not None and res.error.kind is ErrorKind.CANCELLED


def test_wait_any_and_wait_all(harness: Harness) -> None:
    go = harness.root / "go"
    fast = start(harness, "sleep 0.2")
    slow = start(harness, f"until [ -e {go} ]; do sleep 0.05; done")
    res = harness.call(WaitTasks, {"task_ids": [fast, slow], "mode": "wait_any"})
    assert [t.finished for t in res.output.tasks] == [True, False]
    go.touch()
    res = harness.call(WaitTasks, {"task_ids": [fast, slow], "mode": "wait_all"})
    assert all(t.finished for t in res.output.tasks) and not res.output.timed_out


def test_unknown_ids_list_known_ones(harness: Harness) -> None:
    task = start(harness, "true")
    res = harness.call(TaskOutput, {"task_ids": "task-bogus"})
    assert res.output.not_found == ["task-bogus"]
    assert task in res.text
    res = harness.call(KillTask, {"task_id": "task-bogus"})
    assert res.output.outcome == "not_found" and task in res.text


def test_kill_task_outcomes(harness: Harness) -> None:
    task = start(harness, "sleep 30")
    res = harness.call(KillTask, {"task_id": task})
    assert res.output.outcome == "killed" and res.output.task.status == "killed"
    res = harness.call(KillTask, {"task_id": task})
    assert res.output.outcome == "already_exited"


def test_reminder_reports_an_unobserved_completion_once(harness: Harness) -> None:
    task = start(harness, "echo quietly done")
    tasks = harness.container.require(BackgroundTasks)
    tasks.wait([task], "wait_all", 30)
    notes = completion_notes(harness)
    assert len(notes) == 1 and task in notes[0] and "quietly done" in notes[0]
    assert completion_notes(harness) == []


def test_output_tool_report_suppresses_the_reminder(harness: Harness) -> None:
    task = start(harness, "echo done")
    res = harness.call(TaskOutput, {"task_ids": task, "timeout_ms": 30_000})
    assert res.output.tasks[0].finished
    assert [n for n in harness.reminders(res) if "Background task" in n] == []
    assert completion_notes(harness) == []


def test_killed_task_is_not_announced_again(harness: Harness) -> None:
    task = start(harness, "sleep 30")
    harness.call(KillTask, {"task_id": task})
    assert completion_notes(harness) == []


def test_tasks_are_scoped_to_their_session(ws: Path, tmp_path: Path) -> None:
    a = Harness(ws, tmp_path / "a", session_id="A")
    tasks = a.container.require(BackgroundTasks)
    b = Harness(ws, tmp_path / "b", session_id="B")
    b.container.insert(tasks, BackgroundTasks)
    try:
        task = start(a, "echo mine")
        tasks.wait([task], "wait_all", 30)
        assert completion_notes(b) == []
        res = b.call(TaskOutput, {"task_ids": task})
        assert res.output.not_found == [task]
        assert b.call(KillTask, {"task_id": task}).output.outcome == "not_found"
        assert len(completion_notes(a)) == 1
    finally:
        tasks.close()
