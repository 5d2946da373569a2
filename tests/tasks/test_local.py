"""Local background tasks: lifecycle, event-driven waits, kills, session scoping, and
exactly-once completion claims under contention."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhub.backends.process import ProcessRunner
from toolhub.tasks import BackgroundTasks
from toolhub.tasks.local import LocalBackgroundTasks


@pytest.fixture
def tasks(tmp_path: Path) -> Iterator[LocalBackgroundTasks]:
    root = tmp_path / "ws"
    root.mkdir()
    backend = LocalBackgroundTasks(ProcessRunner(root, tmp_path / "logs"))
    yield backend
    backend.close()


def start(tasks: LocalBackgroundTasks, command: str, session: str = "s1", **kw: object) -> str:
    return tasks.start(command, cwd=None, timeout_ms=None, owner_session=session, call_id="c", **kw)


def test_implements_the_protocol(tasks: LocalBackgroundTasks) -> None:
    assert isinstance(tasks, BackgroundTasks)


def test_snapshot_while_running_and_after(tasks: LocalBackgroundTasks) -> None:
    task = start(tasks, "echo begin; sleep 0.3; echo end; exit 4")
    snap = tasks.snapshot(task)
    assert snap is not None and snap.status == "running" and snap.exit_code is None
    (done,) = tasks.wait([task], "wait_all", 5)
    assert done.status == "exited" and done.exit_code == 4
    assert done.output == "begin\nend\n" and done.output_bytes == 10
    assert done.log_path and Path(done.log_path).read_text() == "begin\nend\n"
    assert done.duration_s is not None and done.duration_s >= 0.25
    assert tasks.snapshot("task-nope") is None


def test_wait_any_returns_when_the_first_finishes(tasks: LocalBackgroundTasks) -> None:
    fast = start(tasks, "sleep 0.2")
    slow = start(tasks, "sleep 60")
    started = time.monotonic()
    snaps = tasks.wait([slow, fast], "wait_any", 120)
    elapsed = time.monotonic() - started
    assert elapsed < 30  # the first, not the minute-long one
    assert [s.task_id for s in snaps] == [slow, fast]
    assert snaps[1].finished and not snaps[0].finished


def test_wait_times_out_and_async_wait_wakes_on_completion(tasks: LocalBackgroundTasks) -> None:
    slow = start(tasks, "sleep 60")
    started = time.monotonic()
    (snap,) = tasks.wait([slow], "wait_all", 0.2)
    assert not snap.finished and 0.15 < time.monotonic() - started < 30
    quick = start(tasks, "sleep 0.2")
    started = time.monotonic()
    snaps = asyncio.run(tasks.wait_async([quick], "wait_all", 120))
    assert snaps[0].finished and time.monotonic() - started < 30  # woken, not timed out


def test_timeout_status(tasks: LocalBackgroundTasks) -> None:
    task = tasks.start("sleep 10", cwd=None, timeout_ms=200, owner_session="s1", call_id="c")
    (snap,) = tasks.wait([task], "wait_all", 5)
    assert snap.status == "timeout"


def test_kill_outcomes(tasks: LocalBackgroundTasks) -> None:
    task = start(tasks, "sleep 30")
    assert tasks.kill(task) == "killed"
    (snap,) = tasks.wait([task], "wait_all", 5)
    assert snap.status == "killed"
    assert tasks.kill(task) == "already_exited"
    assert tasks.kill("task-missing") == "not_found"


def test_list_is_scoped_by_session(tasks: LocalBackgroundTasks) -> None:
    a = start(tasks, "true", session="A")
    b = start(tasks, "true", session="B")
    assert [t.task_id for t in tasks.list("A")] == [a]
    assert {t.task_id for t in tasks.list()} == {a, b}


def test_claim_completion_exactly_once_under_contention(tasks: LocalBackgroundTasks) -> None:
    task = start(tasks, "true")
    tasks.wait([task], "wait_all", 5)
    wins: list[bool] = []
    barrier = threading.Barrier(16)

    def claim() -> None:
        barrier.wait()
        wins.append(tasks.claim_completion(task))

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


def test_running_task_cannot_be_claimed(tasks: LocalBackgroundTasks) -> None:
    task = start(tasks, "sleep 5")
    assert tasks.claim_completion(task) is False
    tasks.kill(task)
    tasks.wait([task], "wait_all", 5)
    assert tasks.claim_completion(task) is True


def test_unreported_lists_the_sessions_finished_unclaimed_tasks(
    tasks: LocalBackgroundTasks,
) -> None:
    first, second = start(tasks, "true"), start(tasks, "true")
    running = start(tasks, "sleep 5")
    elsewhere = start(tasks, "true", session="s2")
    tasks.wait([first, second, elsewhere], "wait_all", 5)
    assert [t.task_id for t in tasks.unreported("s1")] == [first, second]
    assert tasks.claim_completion(first) is True
    assert [t.task_id for t in tasks.unreported("s1")] == [second]
    tasks.kill(running)
    tasks.wait([running], "wait_all", 5)
    assert [t.task_id for t in tasks.unreported("s1")] == [second, running]
    assert [t.task_id for t in tasks.unreported("s2")] == [elsewhere]
    assert tasks.running("s1") == []


def test_running_lists_the_sessions_unfinished_tasks(tasks: LocalBackgroundTasks) -> None:
    done = start(tasks, "true")
    tasks.wait([done], "wait_all", 5)
    first, second = start(tasks, "sleep 5"), start(tasks, "sleep 5")
    start(tasks, "sleep 5", session="s2")
    assert [t.task_id for t in tasks.running("s1")] == [first, second]
    tasks.kill(first)
    tasks.wait([first], "wait_all", 5)
    assert [t.task_id for t in tasks.running("s1")] == [second]


def test_close_kills_running_tasks(tasks: LocalBackgroundTasks) -> None:
    task = start(tasks, "sleep 30")
    tasks.close()
    (snap,) = tasks.wait([task], "wait_all", 5)
    assert snap.status == "killed"
