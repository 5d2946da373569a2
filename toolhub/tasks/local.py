"""Background tasks run as child processes of this process (the embedded implementation).

Every task is a ``RunningCommand`` of the process runner: its output streams into a log file and
a bounded in-memory tail; a task something else started (a background sub-agent) joins through
``adopt`` as any ``TaskProcess``. Waiting is event-driven: each finished task notifies a
condition variable (for threads) and a set of listeners (for coroutines); nothing polls.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from toolhub.backends.capture import CapturedOutput
from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import CommandResult, KillReason

from .base import KillOutcome, TaskSnapshot, TasksPerSession, TaskStatus, WaitMode, check_room

MAX_RUNTIME_S = 10 * 3600
TAIL_BYTES = 16_000
MAX_FINISHED = 500


class TaskProcess(Protocol):
    """What a task runs: a ``RunningCommand``, or anything that behaves like one (a sub-agent
    run, ``LocalBackgroundTasks.adopt``)."""

    def output(self) -> CapturedOutput: ...

    def kill(self, reason: KillReason = "killed") -> bool: ...

    def add_done_callback(self, callback: Callable[[CommandResult], None]) -> None: ...


@dataclass(slots=True)
class _Task:
    task_id: str
    command: str
    owner_session: str
    call_id: str
    started_at: datetime
    running: TaskProcess
    finished_at: datetime | None = None
    claimed: bool = False
    result: CommandResult | None = field(default=None)


class LocalBackgroundTasks:
    """``BackgroundTasks`` on local child processes. Thread-safe."""

    def __init__(
        self,
        runner: ProcessRunner,
        *,
        max_runtime_s: float = MAX_RUNTIME_S,
        tail_bytes: int = TAIL_BYTES,
        max_finished: int = MAX_FINISHED,
        per_session: TasksPerSession | None = None,
    ) -> None:
        self.runner = runner
        #: The cap on one session's running tasks (``check_room``).
        self.per_session = per_session
        self.max_runtime_s = max_runtime_s
        self.tail_bytes = tail_bytes
        self.max_finished = max_finished
        self._tasks: dict[str, _Task] = {}
        self._cond = threading.Condition()
        self._listeners: set[Callable[[], None]] = set()

    def start(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_ms: int | None,
        owner_session: str,
        call_id: str,
    ) -> str:
        if self.per_session is not None:
            cap = self.per_session(owner_session)
            if cap is not None:
                check_room(len(self.running(owner_session)), cap)
        task_id = f"task-{uuid.uuid4().hex[:10]}"
        limit = self.max_runtime_s
        timeout_s = min(timeout_ms / 1000, limit) if timeout_ms and timeout_ms > 0 else limit
        running = self.runner.start(
            command,
            log_name=task_id,
            cwd=Path(cwd) if cwd else None,
            timeout_s=timeout_s,
            keep_bytes=self.tail_bytes,
        )
        task = _Task(task_id, command, owner_session, call_id, _now(), running)
        with self._cond:
            self._tasks[task_id] = task
        running.add_done_callback(lambda result: self._finished(task, result))
        return task_id

    def adopt(self, label: str, process: TaskProcess, *, owner_session: str, call_id: str) -> str:
        """Track a task that something else started (a background sub-agent): it is then
        shown, waited for, killed and announced like a background command. ``label`` is
        what stands in its snapshot's ``command``."""
        task_id = f"task-{uuid.uuid4().hex[:10]}"
        task = _Task(task_id, label, owner_session, call_id, _now(), process)
        with self._cond:
            self._tasks[task_id] = task
        process.add_done_callback(lambda result: self._finished(task, result))
        return task_id

    def _finished(self, task: _Task, result: CommandResult) -> None:
        with self._cond:
            task.result = result
            task.finished_at = _now()
            self._prune()
            listeners = list(self._listeners)
            self._cond.notify_all()
        for listener in listeners:
            listener()

    def _prune(self) -> None:
        finished = [t for t in self._tasks.values() if t.finished_at is not None and t.claimed]
        for task in finished[: max(0, len(finished) - self.max_finished)]:
            del self._tasks[task.task_id]

    def snapshot(self, task_id: str) -> TaskSnapshot | None:
        with self._cond:
            task = self._tasks.get(task_id)
        return None if task is None else self._snapshot(task)

    def _snapshot(self, task: _Task) -> TaskSnapshot:
        result = task.result
        output = result.output if result is not None else task.running.output()
        text, _ = output.last(self.tail_bytes)
        status: TaskStatus = "running"
        if result is not None:
            status = "exited"
            if result.killed == "timeout":
                status = "timeout"
            elif result.killed is not None:
                status = "killed"
        return TaskSnapshot(
            task_id=task.task_id,
            command=task.command,
            status=status,
            exit_code=None if result is None else result.exit_code,
            output=text,
            output_bytes=output.total_bytes,
            log_path=None if output.log_path is None else str(output.log_path),
            owner_session=task.owner_session,
            call_id=task.call_id,
            started_at=task.started_at,
            finished_at=task.finished_at,
        )

    def _satisfied(self, task_ids: Sequence[str], mode: WaitMode) -> bool:
        done = [(t := self._tasks.get(i)) is None or t.finished_at is not None for i in task_ids]
        return any(done) if mode == "wait_any" else all(done)

    def _collect(self, task_ids: Sequence[str]) -> list[TaskSnapshot]:
        with self._cond:
            tasks = [self._tasks[i] for i in task_ids if i in self._tasks]
        return [self._snapshot(t) for t in tasks]

    def wait(self, task_ids: Sequence[str], mode: WaitMode, timeout_s: float) -> list[TaskSnapshot]:
        deadline = time.monotonic() + max(timeout_s, 0)
        with self._cond:
            while not self._satisfied(task_ids, mode):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        return self._collect(task_ids)

    async def wait_async(
        self, task_ids: Sequence[str], mode: WaitMode, timeout_s: float
    ) -> list[TaskSnapshot]:
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def listener() -> None:
            loop.call_soon_threadsafe(woken.set)

        with self._cond:
            self._listeners.add(listener)
        try:
            deadline = loop.time() + max(timeout_s, 0)
            while True:
                with self._cond:
                    if self._satisfied(task_ids, mode):
                        break
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                woken.clear()
                try:
                    await asyncio.wait_for(woken.wait(), remaining)
                except TimeoutError:
                    break
        finally:
            with self._cond:
                self._listeners.discard(listener)
        return self._collect(task_ids)

    def kill(self, task_id: str) -> KillOutcome:
        with self._cond:
            task = self._tasks.get(task_id)
        if task is None:
            return "not_found"
        return "killed" if task.running.kill("killed") else "already_exited"

    def unreported(self, owner_session: str) -> list[TaskSnapshot]:
        with self._cond:
            tasks = [
                t
                for t in self._tasks.values()
                if t.owner_session == owner_session and t.finished_at is not None and not t.claimed
            ]
        return [self._snapshot(t) for t in tasks]

    def running(self, owner_session: str) -> list[TaskSnapshot]:
        with self._cond:
            tasks = [
                t
                for t in self._tasks.values()
                if t.owner_session == owner_session and t.finished_at is None
            ]
        # Judged again by the snapshot: a task may finish once the lock is released.
        return [s for s in (self._snapshot(t) for t in tasks) if not s.finished]

    def list(self, owner_session: str | None = None) -> list[TaskSnapshot]:
        with self._cond:
            tasks = [
                t
                for t in self._tasks.values()
                if owner_session is None or t.owner_session == owner_session
            ]
        return [self._snapshot(t) for t in tasks]

    def claim_completion(self, task_id: str) -> bool:
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None or task.finished_at is None or task.claimed:
                return False
            task.claimed = True
            return True

    def close(self) -> None:
        """Kill every running task: a closed session leaves no processes behind."""
        with self._cond:
            tasks = list(self._tasks.values())
        for task in tasks:
            task.running.kill("killed")


def _now() -> datetime:
    return datetime.now(UTC)
