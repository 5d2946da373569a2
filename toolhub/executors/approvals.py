"""The approval gate: an executor in front of another that holds each call to the session's
permission rules before it reaches its executor.

``allow``: the call goes on to the executor untouched. ``deny``: a typed
``permission_denied`` naming the rule, nothing ran. ``ask``: the call is recorded as awaiting
approval (``ApprovalBackend.ask``: in Redis for a fleet session, in this process for an
embedded one), its caller gets an ``awaiting_approval`` progress item and then, once a person
decided, the call's own progress and result, or the typed denial or expiry. Approvals
(``approve``, ``deny``, ``pending``) come from any face through the session.

Threat: the approver's edited arguments are validated against the tool's input model as a
model's would be, and checked against the rules again (a ``deny`` still refuses); and the
caller is not the approver's concern: the call runs once approved whether or not its caller is
still there (on a fleet; an embedded call is its caller's coroutine).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from toolhub.approvals.base import (
    AWAITING,
    AWAITING_SUBKIND,
    NOT_AWAITING,
    UNKNOWN_CALL,
    ApprovalRefused,
    new_approval,
    pending_view,
    rule_denied,
    with_decision,
)
from toolhub.approvals.decide import CallFacts, Verdict, decide
from toolhub.approvals.rules import Decision, OperatorPermissions, Permissions
from toolhub.core import CallResult, Progress, ToolError, closing
from toolhub.toolset import Prepared, ToolSet

from .base import Executor
from .refused import RefusedCalls


class ApprovalBackend(Protocol):
    """Where a session's waiting calls are kept and how an approved one runs."""

    def ask(self, prepared: Prepared, approval: dict[str, Any]) -> CallResult | None:
        """Record the call as awaiting approval; a refusal (the id is in use) as a result."""
        ...

    def wait(
        self, prepared: Prepared, approval: dict[str, Any], cancel_on_exit: bool
    ) -> AsyncIterator[Progress | CallResult]:
        """The decided call's progress and result: what it ran, or its denial or expiry."""
        ...

    def approve(self, prepared: Prepared, approval: dict[str, Any]) -> dict[str, Any]:
        """Queue (or wake) the approved call, exactly once; ``ApprovalRefused`` else."""
        ...

    def end(
        self, call_id: str, decision: str, principal: str, reason: str | None
    ) -> dict[str, Any]:
        """Deny, expire or cancel a waiting call; its record; ``ApprovalRefused`` else."""
        ...

    def record(self, call_id: str) -> dict[str, Any] | None: ...

    def pending(self) -> list[dict[str, Any]]: ...


class ApprovalGate:
    def __init__(
        self,
        inner: Executor,
        toolset: ToolSet,
        backend: ApprovalBackend,
        *,
        operator: OperatorPermissions | None,
        workspace: str,
    ) -> None:
        self.inner = inner
        self.toolset = toolset
        self.backend = backend
        self.operator = operator
        self.workspace = workspace
        self.rules: Permissions | None = toolset.config.permissions
        self.seconds = self.rules.approval_seconds if self.rules else 600
        if operator is not None:
            self.seconds = min(self.seconds, operator.max_approval_seconds)
        self._refused = RefusedCalls(toolset.session_id)

    def verdict(self, prepared: Prepared) -> Verdict:
        entry = prepared.entry
        facts = CallFacts(
            entry.client_name,
            entry.fq_id,
            entry.kind,
            entry.read_only,
            prepared.arguments,
            self.workspace,
        )
        return decide(facts, self.rules, self.operator)

    def asks(self, name: str, arguments: Any) -> bool:
        """Whether a call of ``name`` with ``arguments`` would wait for an approval (False for
        arguments that fail validation: the call itself answers them)."""
        try:
            prepared = self.toolset.prepare(name, arguments, "")
        except ToolError:
            return False
        return self.verdict(prepared).decision is Decision.ASK

    # -- the Executor protocol ---------------------------------------------------------------

    def call_sync(self, prepared: Prepared) -> CallResult | None:
        if self.verdict(prepared).decision is Decision.ALLOW:
            return self.inner.call_sync(prepared)
        return None

    async def result(self, prepared: Prepared) -> CallResult:
        verdict = self.verdict(prepared)
        if verdict.decision is Decision.ALLOW:
            return await self.inner.result(prepared)
        last: CallResult | None = None
        async with closing(self._gated(prepared, verdict, True)) as items:
            async for item in items:
                if isinstance(item, CallResult):
                    last = item
        assert last is not None
        return last

    async def stream(
        self, prepared: Prepared, *, cancel_on_exit: bool = True
    ) -> AsyncIterator[Progress | CallResult]:
        verdict = self.verdict(prepared)
        items = (
            self.inner.stream(prepared, cancel_on_exit=cancel_on_exit)
            if verdict.decision is Decision.ALLOW
            else self._gated(prepared, verdict, cancel_on_exit)
        )
        async with closing(items):
            async for item in items:
                yield item

    async def _gated(
        self, prepared: Prepared, verdict: Verdict, cancel_on_exit: bool
    ) -> AsyncIterator[Progress | CallResult]:
        entry, cid = prepared.entry, prepared.ctx.call_id
        if verdict.decision is Decision.DENY:
            refused = rule_denied(entry.client_name, cid, entry.fq_id, verdict.rule)
            self._refused.add(entry.client_name, refused)
            yield refused
            return
        approval = new_approval(verdict.rule, prepared.arguments, self.seconds)
        refusal = self.backend.ask(prepared, approval)
        if refusal is not None:
            yield refusal
            return
        yield Progress.custom(
            AWAITING_SUBKIND,
            {
                "call_id": cid,
                "name": entry.client_name,
                "arguments": prepared.arguments,
                "rule": verdict.rule,
                "expires_at": approval["expires_at"],
            },
        )
        async with closing(self.backend.wait(prepared, approval, cancel_on_exit)) as items:
            async for item in items:
                yield item

    async def cancel(self, call_id: str) -> bool:
        try:
            self.backend.end(call_id, "cancelled", "toolhub", "cancelled by its caller")
            return True
        except ApprovalRefused:
            return await self.inner.cancel(call_id)

    def record(self, call_id: str) -> dict[str, Any] | None:
        found = self.inner.record(call_id)
        waiting = self.backend.record(call_id)
        if found is None:
            return waiting or self._refused.record(call_id)
        if waiting is not None and "approval" not in found:
            found = {**found, "approval": waiting.get("approval")}
        return found

    def follow(self, call_id: str, after_seq: int = 0) -> AsyncIterator[Progress | CallResult]:
        return self.inner.follow(call_id, after_seq)

    def deadline_seconds(self, workload: str | None) -> float | None:
        """The executor's, plus the longest an approval may wait."""
        inner = self.inner.deadline_seconds(workload)
        return None if inner is None else inner + self.seconds

    def end(self) -> None:
        self.inner.end()

    def close(self) -> None:
        self.inner.close()

    # -- the approvers' side ------------------------------------------------------------------

    def pending(self) -> list[dict[str, Any]]:
        return [pending_view(r) for r in self.backend.pending()]

    def approve(
        self, call_id: str, principal: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Run the waiting call, with ``arguments`` (canonical names) instead of those asked
        for when given: validated and checked against the rules again first."""
        record = self._waiting(call_id)
        approval = record["approval"]
        if time.time() >= float(approval["expires_at"]):
            self.backend.end(call_id, "expired", "toolhub", None)
            raise ApprovalRefused(
                "approval_expired", f"the approval of {call_id!r} expired", 410, status="failed"
            )
        edited = arguments is not None and arguments != approval["arguments"]
        try:
            prepared = self.toolset.prepare_canonical(
                str(record["name"]),
                arguments if arguments is not None else approval["arguments"],
                call_id,
            )
        except ToolError as err:
            raise ApprovalRefused(
                "invalid_arguments", err.detail, 422, error=err.to_dict()
            ) from None
        verdict = self.verdict(prepared)
        if verdict.decision is Decision.DENY:
            raise ApprovalRefused(
                "permission_denied",
                f"the permission rule {verdict.rule} refuses these arguments",
                403,
                rule=verdict.rule,
            )
        decided = with_decision(
            approval, "approved", principal, arguments=prepared.arguments if edited else None
        )
        return self.backend.approve(prepared, decided)

    def answer(self, call_id: str, answers: Any, principal: str) -> bool:
        """An answer to the question a call awaiting approval was asked as (``approve``, or
        anything else: a denial naming the answer); False for a call that does not await
        approval (the answer is then an ``ask_user`` one) or whose approval did nothing."""
        record = self.backend.record(call_id)
        if record is None or record.get("status") != AWAITING:
            return False
        values = list(answers.values()) if isinstance(answers, dict) else list(answers or [])
        choice = str(values[0]).strip().lower() if values else ""
        try:
            if choice == "approve":
                self.approve(call_id, principal)
            else:
                self.deny(call_id, principal, f"answered {choice[:200]!r}")
        except ApprovalRefused:
            return False
        return True

    def deny(self, call_id: str, principal: str, reason: str | None = None) -> dict[str, Any]:
        self._waiting(call_id)
        return self.backend.end(call_id, "denied", principal, reason)

    def _waiting(self, call_id: str) -> dict[str, Any]:
        record = self.backend.record(call_id)
        if record is None or record.get("session_id") != self.toolset.session_id:
            raise ApprovalRefused(UNKNOWN_CALL, f"no call {call_id!r} awaits approval", 404)
        if record.get("status") != AWAITING:
            decisions = (record.get("approval") or {}).get("decisions") or [{}]
            raise ApprovalRefused(
                NOT_AWAITING,
                f"call {call_id!r} no longer awaits approval: {record.get('status')}",
                409,
                status=record.get("status"),
                decided_by=decisions[-1].get("by"),
            )
        return record


def gated(
    executor: Executor,
    toolset: ToolSet,
    *,
    operator: OperatorPermissions | None,
    workspace: str,
) -> Executor:
    """``executor`` behind an ``ApprovalGate`` when the session has permission rules (its
    config's, or the operator's), else unchanged: a session without rules pays nothing."""
    if toolset.config.permissions is None and not (operator and operator.rules):
        return executor
    from toolhub.approvals.base import PendingApprovals
    from toolhub.approvals.memory import MemoryApprovals

    from .celery import CeleryExecutor
    from .celery_approvals import CeleryApprovals
    from .local_approvals import LocalApprovals

    backend: CeleryApprovals | LocalApprovals
    if isinstance(executor, CeleryExecutor):
        backend = CeleryApprovals(executor)
        toolset.container.insert(backend, PendingApprovals)
    else:
        store = MemoryApprovals(toolset.session_id)
        backend = LocalApprovals(executor, toolset, store)
        toolset.container.insert(store, PendingApprovals)
    return ApprovalGate(executor, toolset, backend, operator=operator, workspace=workspace)
