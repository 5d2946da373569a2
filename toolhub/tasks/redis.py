"""``BackgroundTasks`` in Redis: durable background commands for every dispatcher and worker.

A background command is a call record of its own (id = task id) run by the ``toolhub.background``
Celery task on the ``toolhub.background`` queue. It therefore gets everything a call has: a
lease renewed while it runs, a re-run as the next attempt on another worker when its worker
dies (the record lists every attempt), cancellation through the control channel (``kill``), and
its output as ``output_delta`` events in the call's stream, appended as they are produced. A
client that disconnects loses nothing: ``snapshot`` and ``task_output`` read the stream.

On a worker the command runs under the host's background holder (``workers/holder/server.py``),
so it survives the worker process. A task whose record says running but whose lease expired (its
host is gone, the sweep has not re-run it yet) is ``lost``, never ``running``; a task that was
re-run says so through its ``attempt``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from redis import Redis

from toolhub.core import CallResult
from toolhub.distributed import replies
from toolhub.distributed.celery_app import BACKGROUND_TASK
from toolhub.distributed.codec import decode_item, pack, unpack
from toolhub.distributed.keys import Keys
from toolhub.distributed.quota import OverQuota, QuotaLimits, over_quota_error, quota_args
from toolhub.distributed.records import TERMINAL_STATUSES, CallRecords, new_run_id
from toolhub.distributed.settings import QUEUES, Settings
from toolhub.distributed.signing import sign_message
from toolhub.errors import ErrorCode
from toolhub.subagents.base import too_many_subagents
from toolhub.tracing.worker import message_headers

from .base import KillOutcome, TaskSnapshot, TasksPerSession, TaskStatus, WaitMode, check_room

TAIL_BYTES = 16_000
#: How a background sub-agent's task label starts (``task`` labels them so).
SUBAGENT = "sub-agent "
_POLL_S = 0.05
BACKGROUND_TOOL = "toolhub:background"


class RedisBackgroundTasks:
    """``config_hash``: the session config the commands started here run under; the worker
    that runs one builds that session's tool set to find its workspace and sandbox."""

    def __init__(
        self,
        client: Redis,
        app: Celery,
        settings: Settings,
        session_id: str,
        config_hash: str | None = None,
        *,
        per_session: TasksPerSession | None = None,
        quotas: QuotaLimits | None = None,
    ) -> None:
        self.client = client
        #: The cap on one session's running tasks (``check_room``).
        self.per_session = per_session
        self.app = app
        self.settings = settings
        self.session_id = session_id
        self.config_hash = config_hash
        self.keys = Keys(settings.prefix)
        self.records = CallRecords(client, settings)
        #: The tenant's quotas: a task over ``concurrent_background_tasks`` (all the tenant's
        #: sessions together) or its command CPU-seconds per hour is not started.
        self.quotas = quotas

    def start(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_ms: int | None,
        owner_session: str,
        call_id: str,
    ) -> str:
        self._check_room(owner_session)
        limit = self.settings.max_background_seconds
        timeout_s = min(timeout_ms / 1000, limit) if timeout_ms and timeout_ms > 0 else limit
        return self._enqueue(command, {"cwd": cwd, "timeout_s": timeout_s}, owner_session, call_id)

    def _check_room(self, owner_session: str) -> None:
        if self.per_session is not None:
            limit = self.per_session(owner_session)
            if limit is not None:
                check_room(len(self.running(owner_session)), limit)

    def start_subagent(
        self,
        request: dict[str, Any],
        *,
        label: str,
        owner_session: str,
        call_id: str,
        max_concurrent: int,
    ) -> str:
        """A background sub-agent: a durable task like a command, whose worker runs it with
        its own ``SubagentRunner`` and, when the worker is lost, re-runs it (resumed from the
        runner's stored state when it has it) as the next attempt. ``max_concurrent`` counts
        the session's running sub-agents (a check, not a reservation: two dispatchers racing
        at the limit may both start one)."""
        running = [t for t in self.running(owner_session) if t.command.startswith(SUBAGENT)]
        if len(running) >= max_concurrent:
            raise too_many_subagents(max_concurrent)
        self._check_room(owner_session)
        extra = {
            "subagent": request,
            "cwd": request.get("cwd"),
            "timeout_s": self.settings.max_background_seconds,
        }
        return self._enqueue(label, extra, owner_session, call_id)

    def _enqueue(
        self, command: str, extra: dict[str, Any], owner_session: str, call_id: str
    ) -> str:
        task_id = f"task-{os.urandom(5).hex()}"
        run_id = new_run_id()
        queue = QUEUES["background"]
        message = {
            "task": BACKGROUND_TASK,
            "queue": queue,
            "call_id": task_id,
            "run_id": run_id,
            "session_id": owner_session,
            "config_hash": self.config_hash,
            "name": "background",
            "tool": BACKGROUND_TOOL,
            "command": command,
            **extra,
            "max_attempts": self.settings.max_attempts,
        }
        message = sign_message(message)  # with a fleet key: workers run only signed messages
        quota, held = quota_args(
            self.keys,
            self.quotas,
            counted="tasks",
            workload="background",
            hold_seconds=self.settings.call_deadline_seconds("background"),
        )
        created = self.records.create(
            task_id,
            run_id,
            {
                "session_id": owner_session,
                "tool": BACKGROUND_TOOL,
                "name": "background",
                "queue": queue,
                "command": command,
                "parent_call": call_id,
                "max_attempts": self.settings.max_attempts,
                "message": pack(message),
                **held,
            },
            quota,
        )
        if isinstance(created, OverQuota):
            assert self.quotas is not None
            raise over_quota_error(self.quotas.tenant, created)
        self.client.zadd(self.keys.session_tasks(owner_session), {task_id: time.time()})
        headers = message_headers()  # the starting call's trace: the task's spans join it
        self.app.send_task(
            BACKGROUND_TASK,
            kwargs=message,
            queue=queue,
            ignore_result=True,
            kwargsrepr=repr({"task_id": task_id, "session_id": owner_session}),
            **({"headers": headers} if headers else {}),
        )
        return task_id

    def snapshot(self, task_id: str) -> TaskSnapshot | None:
        raw = replies.hgetall(self.client, self.keys.call(task_id))
        if not raw or raw.get(b"tool") != BACKGROUND_TOOL.encode():
            return None
        record = {k.decode(): v for k, v in raw.items()}
        output, total = self._tail(task_id)
        status, exit_code = _status(record)
        if status == "running" and _expired(record, self.client):
            status = "lost"
        finished = record.get("finished_at")
        return TaskSnapshot(
            task_id=task_id,
            command=record.get("command", b"").decode(),
            status=status,
            exit_code=exit_code,
            output=output,
            output_bytes=total,
            owner_session=record.get("session_id", b"").decode(),
            call_id=record.get("parent_call", b"").decode(),
            started_at=_time(record.get("started_at") or record.get("created_at")),
            finished_at=_time(finished) if finished else None,
            attempt=max(int(record.get("attempt") or 0), 1),
            max_attempts=max(int(record.get("max_attempts") or 0), 1),
            error=_lost_error(record),
        )

    def _tail(self, task_id: str) -> tuple[str, int]:
        """The last output of the current attempt, newest events first, and its byte count."""
        chunks: list[str] = []
        size = 0
        total = 0
        for _, fields in replies.xrevrange(self.client, self.keys.events(task_id), 256):
            item = decode_item(fields[b"d"])
            if isinstance(item, CallResult):
                continue
            if item.subkind == "retry":
                break
            if item.subkind != "output_delta" or not isinstance(item.payload, dict):
                continue
            total = total or int(item.payload.get("total_bytes", 0))
            delta = str(item.payload.get("delta", ""))
            chunks.append(delta)
            size += len(delta.encode())
            if size >= TAIL_BYTES:
                break
        text = "".join(reversed(chunks))
        data = text.encode()
        if len(data) > TAIL_BYTES:
            text = data[-TAIL_BYTES:].decode("utf-8", "ignore")
        return text, total

    def _done(self, task_ids: Sequence[str], mode: WaitMode) -> bool:
        pipe = self.client.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hget(self.keys.call(task_id), "status")
        statuses: list[bytes | None] = pipe.execute()
        done = [s is None or s.decode() in TERMINAL_STATUSES for s in statuses]
        return any(done) if mode == "wait_any" else all(done)

    def wait(self, task_ids: Sequence[str], mode: WaitMode, timeout_s: float) -> list[TaskSnapshot]:
        deadline = time.monotonic() + max(timeout_s, 0)
        while task_ids and not self._done(task_ids, mode) and time.monotonic() < deadline:
            time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0)))
        return self._collect(task_ids)

    async def wait_async(
        self, task_ids: Sequence[str], mode: WaitMode, timeout_s: float
    ) -> list[TaskSnapshot]:
        deadline = time.monotonic() + max(timeout_s, 0)
        while task_ids and not self._done(task_ids, mode) and time.monotonic() < deadline:
            await asyncio.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0)))
        return self._collect(task_ids)

    def _collect(self, task_ids: Sequence[str]) -> list[TaskSnapshot]:
        return [s for s in (self.snapshot(t) for t in task_ids) if s is not None]

    def kill(self, task_id: str) -> KillOutcome:
        if replies.hget(self.client, self.keys.call(task_id), "tool") != BACKGROUND_TOOL.encode():
            return "not_found"
        outcome = self.records.cancel(task_id, reason="killed")
        if outcome in {"cancelled", "signalled"}:
            return "killed"
        return "not_found" if outcome == "unknown" else "already_exited"

    def unreported(self, owner_session: str) -> list[TaskSnapshot]:
        finished = [t for t, done in self._open(owner_session) if done]
        return [s for s in self._collect(finished) if s.finished]

    def running(self, owner_session: str) -> list[TaskSnapshot]:
        # Judged again by the snapshot: a task may finish between the two reads.
        unfinished = [t for t, done in self._open(owner_session) if not done]
        return [s for s in self._collect(unfinished) if not s.finished]

    def _open(self, owner_session: str) -> list[tuple[str, bool]]:
        """The session's tasks not reported yet, oldest first, each with whether it finished.

        Tasks are scored by start time, and the score is negated by the first of these reads
        that finds the task's completion claimed (a claim sets a field of the record, not the
        score): only the positive range is read, with one status check each in one round trip,
        so what the session ran and reported before costs nothing here. Entries of the positive
        range whose record expired are dropped."""
        key = self.keys.session_tasks(owner_session or self.session_id)
        entries = replies.zscored(self.client, key, "(0")
        if not entries:
            return []
        pipe = self.client.pipeline(transaction=False)
        for member, _ in entries:
            pipe.hmget(self.keys.call(member.decode()), "tool", "status", "completion_claimed")
        rows: list[list[bytes | None]] = pipe.execute()
        found: list[tuple[str, bool]] = []
        gone: list[bytes] = []
        reported: dict[bytes, float] = {}
        for (member, score), (tool, status, claimed) in zip(entries, rows, strict=True):
            if tool is None:
                gone.append(member)  # its record expired: nothing left to report
            elif claimed is not None:
                reported[member] = -score
            else:
                finished = status is not None and status.decode() in TERMINAL_STATUSES
                found.append((member.decode(), finished))
        if gone or reported:
            pipe = self.client.pipeline(transaction=False)
            if gone:
                pipe.zrem(key, *gone)
            if reported:
                pipe.zadd(key, reported, xx=True)
            pipe.execute()
        return found

    def list(self, owner_session: str | None = None) -> list[TaskSnapshot]:
        sid = owner_session or self.session_id
        entries = replies.zscored(self.client, self.keys.session_tasks(sid))
        return self._collect([m.decode() for m, _ in sorted(entries, key=lambda e: abs(e[1]))])

    def list_all(self) -> Sequence[TaskSnapshot]:
        """Every session's background tasks, oldest first (the operator's view)."""
        pattern = self.keys.every_session_tasks
        sessions = [
            self.keys.session_of_tasks(key.decode())
            for key in self.client.scan_iter(match=pattern, count=500)
        ]
        found = [task for sid in sessions for task in self.list(sid)]
        return sorted(found, key=lambda task: task.started_at)

    def claim_completion(self, task_id: str) -> bool:
        key = self.keys.call(task_id)
        status = replies.hget(self.client, key, "status")
        if status is None or status.decode() not in TERMINAL_STATUSES:
            return False
        return bool(self.client.hsetnx(key, "completion_claimed", "1"))


def _status(record: dict[str, bytes]) -> tuple[TaskStatus, int | None]:
    status = record.get("status", b"queued").decode()
    if status not in TERMINAL_STATUSES:
        return "running", None
    result: dict[str, Any] = unpack(record["result"]) if "result" in record else {}
    error = result.get("error")
    if error is None:
        value = (result.get("output") or {}).get("value") or {}
        return "exited", value.get("exit_code")
    exit_code = (error.get("details") or {}).get("exit_code")
    if error.get("kind") == "timeout":
        return "timeout", exit_code
    if status == "cancelled" or (error.get("details") or {}).get("code") == ErrorCode.WORKER_LOST:
        return "killed", exit_code
    return "exited", exit_code


def _lost_error(record: dict[str, bytes]) -> str:
    """The detail of a ``worker_lost`` terminal: the task did not end by itself, and says so."""
    if "result" not in record:
        return ""
    error = unpack(record["result"]).get("error") or {}
    if (error.get("details") or {}).get("code") != ErrorCode.WORKER_LOST:
        return ""
    return str(error.get("detail", ""))


def _expired(record: dict[str, bytes], client: Redis) -> bool:
    """A running attempt whose lease ran out (by Redis's clock, the one leases are set by):
    nothing renews it, so its host is gone or handed it back."""
    if record.get("status") != b"running":
        return False
    return float(record.get("lease_until") or 0) <= replies.time(client)


def _time(raw: bytes | None) -> datetime:
    return datetime.fromtimestamp(float(raw) if raw else time.time(), UTC)
