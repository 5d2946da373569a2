"""Background tasks: the protocol that ``bash`` (background), ``task_output``, ``wait_tasks`` and
``kill_task`` rely on, whoever runs the commands.

The local implementation (``tasks_local.LocalBackgroundTasks``) runs them as child processes of
this process; a distributed one keeps the same records in Redis. The protocol is synchronous so
tools may call it from worker threads, plus ``wait_async`` so that waiting never ties up a thread.

Completion is reported to the model exactly once. Whoever shows the model a finished task —
the output tools, or the task-completion reminder — first calls ``claim_completion``; only the
first claimer gets True, so the reminder never repeats what an output tool already reported, and
a completion nobody asked about is still announced once by the reminder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from toolhub.core import ErrorKind, ToolError

#: ``lost``: the task's record says running but nothing keeps it alive any more (its host stopped
#: renewing it); it is being recovered — re-run from the beginning as its next attempt, or failed
#: when it has none left. Shown as ``lost, recovering``; not finished.
TaskStatus = Literal["running", "lost", "exited", "killed", "timeout"]
WaitMode = Literal["wait_any", "wait_all"]
KillOutcome = Literal["killed", "already_exited", "not_found"]
#: How many background tasks one session may have running at once (``None``: no cap): the
#: tenant's ``background_tasks_per_session`` quota, given by the assembly.
TasksPerSession = Callable[[str], int | None]


def check_room(running: int, limit: int | None) -> None:
    """Refuse one more task of a session that has ``running`` of its ``limit`` running.
    Threat: one session starting tasks without end (each a process tree, a log and a
    record) until the host or Redis gives out for every tenant. A check, not a reservation:
    two starts racing at the cap may both pass it, once."""
    if limit is not None and running >= limit:
        raise ToolError(
            ErrorKind.RATE_LIMITED,
            f"this session already has {running} background tasks running, the most its quota "
            f"allows (`background_tasks_per_session`: {limit}); wait for one to finish "
            "(wait_tasks) or stop one (kill_task) first",
            {"quota": "background_tasks_per_session", "limit": limit},
        )


class TaskSnapshot(BaseModel):
    """One task at one moment; plain data, so it crosses process boundaries unchanged."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    command: str
    status: TaskStatus
    exit_code: int | None = None
    output: str = ""
    """The last bytes of the output (all of it when ``output_bytes`` is small)."""
    output_bytes: int = 0
    log_path: str | None = None
    owner_session: str = ""
    call_id: str = ""
    started_at: datetime
    finished_at: datetime | None = None
    attempt: int = 1
    """Which run of the command this is: above 1 when it was restarted from the beginning
    because its host was lost (``output`` is then this run's)."""
    max_attempts: int = 1
    error: str = ""
    """Why it ended without an exit code of its own, when a backend knows (a fleet task whose
    worker was lost more often than it may be re-run: the ``worker_lost`` error's detail)."""

    @property
    def finished(self) -> bool:
        return self.status not in ("running", "lost")

    @property
    def status_text(self) -> str:
        """The status as a person or model reads it."""
        return "lost, recovering" if self.status == "lost" else self.status

    @property
    def restart_note(self) -> str:
        """One sentence when the command was restarted (empty otherwise)."""
        if self.attempt <= 1:
            return ""
        return (
            f"It restarted from the beginning after its host was lost (attempt {self.attempt} "
            f"of {self.max_attempts}); the output shown is from this attempt."
        )

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@runtime_checkable
class BackgroundTasks(Protocol):
    """Start, observe, wait for and kill long-running commands."""

    def start(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_ms: int | None,
        owner_session: str,
        call_id: str,
    ) -> str:
        """Start ``command`` now; returns its task id. ``timeout_ms`` None means the backend's
        maximum runtime."""
        ...

    def snapshot(self, task_id: str) -> TaskSnapshot | None:
        """The task as it is now, or None when no such task is known."""
        ...

    def wait(self, task_ids: Sequence[str], mode: WaitMode, timeout_s: float) -> list[TaskSnapshot]:
        """Block until any / all of ``task_ids`` finished or ``timeout_s`` passed; returns the
        snapshots of the known ones, in the order asked. Unknown ids count as finished."""
        ...

    async def wait_async(
        self, task_ids: Sequence[str], mode: WaitMode, timeout_s: float
    ) -> list[TaskSnapshot]:
        """``wait`` without holding a thread."""
        ...

    def kill(self, task_id: str) -> KillOutcome: ...

    def unreported(self, owner_session: str) -> list[TaskSnapshot]:
        """The session's finished tasks whose completion nobody has claimed yet, oldest first.

        The task-completion reminder asks this after every call, so its cost must not grow
        with the tasks the session ran before (``list`` reads them all)."""
        ...

    def running(self, owner_session: str) -> list[TaskSnapshot]:
        """The session's tasks still running (or lost and being recovered), oldest first;
        like ``unreported``, without reading the finished ones."""
        ...

    def list(self, owner_session: str | None = None) -> list[TaskSnapshot]:
        """Every known task (of one session when given), oldest first."""
        ...

    def claim_completion(self, task_id: str) -> bool:
        """True exactly once per finished task: to whoever reports its completion first.
        False while the task is still running."""
        ...


@runtime_checkable
class HostsSubagents(Protocol):
    """A backend that runs background sub-agents itself (a fleet's: each one a durable task a
    worker runs with its own ``SubagentRunner``). The local backend instead ``adopt``s a run
    the session's runner started."""

    def start_subagent(
        self,
        request: dict[str, Any],
        *,
        label: str,
        owner_session: str,
        call_id: str,
        max_concurrent: int,
    ) -> str:
        """Queue the sub-agent of ``request`` (a ``SubagentRequest`` as JSON); its task id."""
        ...
