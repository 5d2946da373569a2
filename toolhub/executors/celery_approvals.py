"""The approvals of a fleet session (``ApprovalBackend`` over ``RedisApprovals``).

The waiting call is its record in Redis, so whoever approves (any dispatcher, any gateway
replica, the CLI) queues it: the approver builds and signs the call's message as the
original dispatcher would have (``CeleryExecutor._dispatch``) and the ``approve`` script
queues it only if the call still awaits approval. The original caller merely follows the
call by id, and ends the approval at its expiry; a caller that is gone loses nothing, and a
new one follows the call by id. An approved call is not held to its tenant's rate quota (a
person let it through) and goes to its queue's normal level.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from redis.exceptions import RedisError

from toolhub.approvals.base import (
    NOT_AWAITING,
    UNKNOWN_CALL,
    ApprovalRefused,
    denied,
    expired,
    with_decision,
)
from toolhub.core import CallResult, Progress, ToolError, closing
from toolhub.distributed.celery_app import EXECUTE_TASK
from toolhub.distributed.quota import NO_QUOTA
from toolhub.distributed.records import new_run_id
from toolhub.distributed.script_replies import ApproveReply, AwaitApprovalReply
from toolhub.distributed.settings import queue_for
from toolhub.errors import ErrorCode
from toolhub.toolset import Prepared

from .celery import CeleryExecutor
from .celery_dispatch import dispatch_failure

#: How often a waiting caller looks again at an approval its clock says expired but Redis's
#: does not yet.
RECHECK_SECONDS = 1.0


class CeleryApprovals:
    def __init__(self, executor: CeleryExecutor) -> None:
        self.executor = executor
        self.store = executor.store
        self.approvals = executor.store.approvals
        self.session_id = executor.session_id

    def ask(self, prepared: Prepared, approval: dict[str, Any]) -> CallResult | None:
        entry, cid = prepared.entry, prepared.ctx.call_id
        fields = {
            "session_id": self.session_id,
            "tool": entry.fq_id,
            "name": entry.client_name,
            "queue": queue_for(entry.workload),
            "max_attempts": self.executor.settings.max_attempts,
            "on_lost": entry.on_worker_lost,
        }
        try:
            reply = self.approvals.ask(cid, self.session_id, fields, approval)
        except RedisError as exc:
            return dispatch_failure(
                prepared, ErrorCode.REDIS_UNAVAILABLE, f"cannot reach Redis: {exc}"
            )
        if reply is AwaitApprovalReply.AWAITING:
            return None
        return dispatch_failure(prepared, ErrorCode.CALL_ID_IN_USE, f"call id {cid!r} is taken")

    async def wait(
        self, prepared: Prepared, approval: dict[str, Any], cancel_on_exit: bool
    ) -> AsyncIterator[Progress | CallResult]:
        cid = prepared.ctx.call_id
        timer = asyncio.create_task(self._expire_at(cid, float(approval["expires_at"])))
        answered = False
        try:
            async with closing(self.executor.follow(cid)) as items:
                async for item in items:
                    answered = isinstance(item, CallResult)
                    yield item
        finally:
            timer.cancel()
            if cancel_on_exit and not answered:
                await self._cancel(cid)

    async def _expire_at(self, cid: str, expires_at: float) -> None:
        """End the approval when it expires (by Redis's clock), unless decided before."""
        while True:
            await asyncio.sleep(max(expires_at - time.time(), 0) + 0.05)
            try:
                await asyncio.to_thread(self.end, cid, "expired", "toolhub", None)
                return
            except ApprovalRefused as refused:
                if refused.code != "not_due":
                    return
            except RedisError:
                pass
            await asyncio.sleep(RECHECK_SECONDS)

    async def _cancel(self, cid: str) -> None:
        try:
            await asyncio.to_thread(self.end, cid, "cancelled", "toolhub", "its caller left")
        except ApprovalRefused:
            await self.executor.cancel(cid)  # approved meanwhile: cancel the queued call
        except RedisError:
            pass

    def approve(self, prepared: Prepared, approval: dict[str, Any]) -> dict[str, Any]:
        executor, entry, cid = self.executor, prepared.entry, prepared.ctx.call_id
        queue = queue_for(entry.workload)
        run_id = new_run_id()
        # the session's ``after`` hooks run on the worker for an approved call too
        message = executor._message(prepared, run_id)
        fields = {
            **executor._record_fields(prepared, queue, message),
            "approval": json.dumps(approval),
        }
        captured = executor.enqueuer.message(
            EXECUTE_TASK, queue, message, executor._kwargsrepr(message)
        )
        if captured is None:
            raise ApprovalRefused(
                "broker_unavailable", "this dispatcher cannot queue an approved call", 503
            )
        keys, args = executor._script_args(cid, run_id, fields, captured, NO_QUOTA)
        reply = self.approvals.approve(self.session_id, keys, args)
        if reply is ApproveReply.SESSION_EXPIRED:
            executor._store_session()
            reply = self.approvals.approve(self.session_id, keys, args)
        if reply in (ApproveReply.QUEUED, ApproveReply.QUEUED_SUBSCRIBED):
            return self.record(cid) or {"call_id": cid, "status": "queued"}
        if reply is ApproveReply.EXPIRED:
            self._end_quietly(cid, "expired")
            raise ApprovalRefused(
                "approval_expired", f"the approval of {cid!r} expired", 410, status="failed"
            )
        if reply is ApproveReply.UNKNOWN:
            raise ApprovalRefused(UNKNOWN_CALL, f"no call {cid!r} awaits approval", 404)
        raise self._decided(cid)

    def end(
        self, call_id: str, decision: str, principal: str, reason: str | None
    ) -> dict[str, Any]:
        record = self.approvals.record(call_id)
        if record is None or record.get("session_id") != self.session_id:
            raise ApprovalRefused(UNKNOWN_CALL, f"no call {call_id!r} awaits approval", 404)
        approval = record.get("approval") or {}
        decided = with_decision(approval, decision, principal, reason=reason)
        name, tool = str(record.get("name", "")), record.get("tool")
        if decision == "denied":
            result = denied(name, call_id, tool, decided)
        elif decision == "expired":
            result = expired(name, call_id, tool, decided)
        else:
            result = CallResult.failure(
                name,
                ToolError.cancelled(
                    f"The call was cancelled while it awaited approval ({reason})."
                ),
                tool_id=tool,
                call_id=call_id,
            )
        reply = self.approvals.end(
            call_id, self.session_id, result, decided, due=decision == "expired"
        )
        if isinstance(reply, int) and reply > 0:
            return self.record(call_id) or {}
        if int(reply) < 0:
            raise ApprovalRefused("not_due", f"the approval of {call_id!r} has not expired", 409)
        raise self._decided(call_id)

    def _end_quietly(self, call_id: str, decision: str) -> None:
        with contextlib.suppress(ApprovalRefused):
            self.end(call_id, decision, "toolhub", None)

    def _decided(self, call_id: str) -> ApprovalRefused:
        record = self.approvals.record(call_id) or {}
        decisions = (record.get("approval") or {}).get("decisions") or [{}]
        return ApprovalRefused(
            NOT_AWAITING,
            f"call {call_id!r} no longer awaits approval: {record.get('status')}",
            409,
            status=record.get("status"),
            decided_by=decisions[-1].get("by"),
        )

    def record(self, call_id: str) -> dict[str, Any] | None:
        return self.approvals.record(call_id)

    def pending(self) -> list[dict[str, Any]]:
        """The session's waiting calls; one whose approval expired is ended on the way."""
        out = []
        for cid in self.approvals.waiting(self.session_id):
            record = self.approvals.record(cid)
            if record is None or record.get("status") != "awaiting_approval":
                continue
            if float(record.get("approval_expires", 0)) <= time.time():
                self._end_quietly(cid, "expired")
                continue
            out.append(record)
        return out

    def waiting_count(self) -> int:
        return self.approvals.waiting_count(self.session_id)
