"""The approvals of an embedded session (``ApprovalBackend`` over ``MemoryApprovals``): the
waiting call is its caller's coroutine, which an approval wakes to run the call through the
embedded executor; denied, expired or left by its caller, it ends with a typed result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from toolhub.approvals.base import denied, expired
from toolhub.approvals.memory import MemoryApprovals
from toolhub.core import CallResult, Progress, ToolError, closing
from toolhub.errors import ErrorCode
from toolhub.toolset import Prepared, ToolSet

from .base import Executor


class LocalApprovals:
    def __init__(self, inner: Executor, toolset: ToolSet, store: MemoryApprovals) -> None:
        self.inner = inner
        self.toolset = toolset
        self.store = store

    def ask(self, prepared: Prepared, approval: dict[str, Any]) -> CallResult | None:
        entry, cid = prepared.entry, prepared.ctx.call_id
        if self.store.ask(cid, entry.client_name, entry.fq_id, approval):
            return None
        return CallResult.failure(
            entry.client_name,
            ToolError.custom(ErrorCode.CALL_ID_IN_USE, f"call id {cid!r} awaits approval"),
            tool_id=entry.fq_id,
            call_id=cid,
        )

    async def wait(
        self, prepared: Prepared, approval: dict[str, Any], cancel_on_exit: bool
    ) -> AsyncIterator[Progress | CallResult]:
        entry, cid = prepared.entry, prepared.ctx.call_id
        status, arguments = await self.store.wait(cid, float(approval["expires_at"]))
        record = self.store.record(cid) or {}
        decided = record.get("approval", approval)
        if status == "approved" and arguments is not None:
            run = self.toolset.prepare_canonical(entry.client_name, arguments, cid)
            async with closing(self.inner.stream(run, cancel_on_exit=cancel_on_exit)) as items:
                async for item in items:
                    yield item
        elif status == "denied":
            yield denied(entry.client_name, cid, entry.fq_id, decided)
        elif status == "expired":
            yield expired(entry.client_name, cid, entry.fq_id, decided)
        else:
            yield CallResult.failure(
                entry.client_name,
                ToolError.cancelled("The call was cancelled while it awaited approval."),
                tool_id=entry.fq_id,
                call_id=cid,
            )

    def approve(self, prepared: Prepared, approval: dict[str, Any]) -> dict[str, Any]:
        last = approval["decisions"][-1]
        return self.store.approve(prepared.ctx.call_id, last["by"], prepared.arguments)

    def end(
        self, call_id: str, decision: str, principal: str, reason: str | None
    ) -> dict[str, Any]:
        return self.store.end(call_id, decision, principal, reason=reason)

    def record(self, call_id: str) -> dict[str, Any] | None:
        return self.store.record(call_id)

    def pending(self) -> list[dict[str, Any]]:
        return self.store.pending()
