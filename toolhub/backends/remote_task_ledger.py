"""Remote tasks a call started, written down so that another attempt of the call takes them up.

An MCP server may answer a long ``tools/call`` with a task handle
(``toolhub/sources/mcp_task_polling.py``): the remote tool then runs on the server whatever
becomes of the process polling it. On a fleet that process is a worker, and workers get lost.
Were the handle kept only in the lost worker's memory, the next attempt could only call the tool
again (its side effect twice) or give up; so the handle is recorded, keyed by the toolhub call
id, before the first poll, and an attempt that finds one polls that task instead of calling the
tool.

The ledger is a container resource that only fleet sessions have
(``toolhub/distributed/redis_task_ledger.py``). Embedded, a lost process is a lost call, nothing
could take the task up, and the MCP client polls exactly as it does without a ledger.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class RemoteTask:
    """What another attempt needs to poll a remote task again."""

    #: The MCP server (its name in the session's ``mcp_servers``) and the tool it runs.
    server: str
    tool: str
    task_id: str
    #: The attempt of the toolhub call that got the handle: when it is not the first, earlier
    #: attempts were lost before theirs came back and may have run the tool too.
    attempt: int
    poll_interval_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RemoteTask:
        return cls(
            server=str(data["server"]),
            tool=str(data["tool"]),
            task_id=str(data["task_id"]),
            attempt=int(data["attempt"]),
            poll_interval_ms=data.get("poll_interval_ms"),
        )


@dataclass(frozen=True, slots=True)
class CallAttempt:
    """Where a running call stands as one of its attempts looks: which attempt this is, of how
    many, and the remote task an attempt recorded (None: none did)."""

    attempt: int
    max_attempts: int
    task: RemoteTask | None = None
    #: Attempts lost with their worker before this one (0: earlier ones were handed back).
    lost: int = 0

    @property
    def inherited(self) -> RemoteTask | None:
        """The remote task an earlier, lost attempt left for this one to take up."""
        if self.task is not None and self.task.attempt < self.attempt:
            return self.task
        return None


@runtime_checkable
class RemoteTaskLedger(Protocol):
    def current(self, call_id: str) -> CallAttempt | None:
        """The running attempt of ``call_id`` and its recorded remote task; None when the call
        has no record of its own to keep one in (it runs outside the fleet's call records)."""
        ...

    def remember(self, call_id: str, attempt: int, task: RemoteTask) -> bool:
        """Record ``task`` for ``call_id`` while ``attempt`` still owns the call; whether it
        was recorded (when not, a loss of this attempt cannot be resumed)."""
        ...
