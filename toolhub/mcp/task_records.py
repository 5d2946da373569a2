"""Where MCP tasks live: one small record per task, beside the call it runs.

A task is a handle on one toolhub call. Its record says which call (``call_id``), who made it
(``principal``: tenant and key id, never the credential), the tool, when it was made and until
when it is kept, and, once some replica has seen the call end, the MCP result, so later polls
need not replay the call's stream. Everything else (is it running, its progress, its result) is the
call's own record and stream, which every dispatcher of the session can read: that is what
lets a task made through one replica be polled, cancelled and collected through another, and
outlive the worker that ran it.

With a distributed session the records are Redis hashes (``toolhub:mcptask:<id>``) that expire
with the task's TTL; the record is written before the handle is returned (the extension asks
that a ``tasks/get`` for a returned id always resolves). Embedded, they live in the process,
as the calls do.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from redis import Redis

    from toolhub.session import Session

KEY_PREFIX = "toolhub:mcptask:"


@dataclass(frozen=True, slots=True)
class TaskRecord:
    task_id: str
    call_id: str
    principal: str
    tool: str
    created_at: float
    expires_at: float | None
    #: The MCP ``CallToolResult`` (wire form) once the call has ended; ``status`` its task
    #: status then (``completed`` or ``cancelled``).
    result: dict[str, Any] | None = None
    status: str | None = None
    updated_at: float | None = None
    #: The ``ask_user`` questions the call waits on (``input_required``), for any replica.
    questions: list[dict[str, Any]] | None = None

    def ended(self, status: str, result: dict[str, Any] | None) -> TaskRecord:
        return replace(self, status=status, result=result, questions=None, updated_at=time.time())

    def asking(self, questions: list[dict[str, Any]] | None) -> TaskRecord:
        return replace(self, questions=questions, updated_at=time.time())


class TaskRecords(Protocol):
    def put(self, record: TaskRecord) -> None: ...

    def get(self, task_id: str) -> TaskRecord | None: ...


class MemoryTaskRecords:
    """An embedded session's tasks: a dict, pruned of expired tasks as it grows."""

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._lock = threading.Lock()

    def put(self, record: TaskRecord) -> None:
        with self._lock:
            now = time.time()
            for task_id in [k for k, v in self._records.items() if _expired(v, now)]:
                del self._records[task_id]
            self._records[record.task_id] = record

    def get(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            found = self._records.get(task_id)
        return None if found is None or _expired(found, time.time()) else found


class RedisTaskRecords:
    """A distributed session's tasks, in its Redis, each expiring with its TTL."""

    def __init__(self, client: Redis) -> None:
        self.client = client

    def put(self, record: TaskRecord) -> None:
        key = KEY_PREFIX + record.task_id
        ttl = None if record.expires_at is None else max(1, int(record.expires_at - time.time()))
        self.client.set(key, json.dumps(asdict(record)), ex=ttl)

    def get(self, task_id: str) -> TaskRecord | None:
        raw = self.client.get(KEY_PREFIX + task_id)
        if raw is None:
            return None
        try:
            return TaskRecord(**json.loads(raw))
        except (TypeError, ValueError):
            return None


def _expired(record: TaskRecord, now: float) -> bool:
    return record.expires_at is not None and record.expires_at <= now


def records_for(session: Session) -> tuple[TaskRecords, Redis | None]:
    """The task records of ``session``'s kind, and its Redis client when it has one."""
    store = getattr(session.executor, "store", None)
    client = getattr(store, "client", None)
    if client is None:
        return MemoryTaskRecords(), None
    return RedisTaskRecords(client), client
