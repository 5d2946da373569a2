"""What an approval is: the record of a call waiting for a person, the decisions on it, the
answers its caller and its approver get, and what a session's approvals offer.

A call whose permission rule says ``ask`` is kept, not queued, until a person approves it
(optionally with edited arguments, validated again and checked against the rules again),
denies it, or its approval expires. Every decision, with who made it and when, joins the
call's record (``approval``). Threat: an approver's edited arguments are model-grade input
(validated like a call's), and two approvers answering at once must not run the call twice:
each store decides atomically (a Lua script on a fleet, a lock in one process), and the one
that loses is told, typed, who won.
"""

from __future__ import annotations

import time
from typing import Any, Protocol, runtime_checkable

from toolhub.core import CallResult, ErrorKind, ToolError
from toolhub.errors import ErrorCode, ToolhubError

#: The record status of a call awaiting approval.
AWAITING = "awaiting_approval"
#: The progress subkind a waiting call streams first (payload: ``pending_view``).
AWAITING_SUBKIND = "awaiting_approval"
#: Error codes (``details.code``) of the calls' answers and of approvers' refusals.
RULE_DENIED = ErrorCode.RULE_DENIED
APPROVAL_DENIED = ErrorCode.APPROVAL_DENIED
APPROVAL_EXPIRED = ErrorCode.APPROVAL_EXPIRED
NOT_AWAITING = ErrorCode.NOT_AWAITING_APPROVAL
UNKNOWN_CALL = "unknown_call"


class ApprovalRefused(ToolhubError):
    """What an approver is told when an approval or a denial did nothing: ``code`` (above,
    or ``invalid_arguments`` / ``permission_denied`` for edited arguments), a sentence, the
    HTTP status a gateway answers with, and what it knows (``status``, ``decided_by``)."""

    def __init__(self, code: str, detail: str, http_status: int, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.http_status = http_status
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, **self.extra}


def new_approval(rule: str, arguments: dict[str, Any], seconds: int) -> dict[str, Any]:
    """The ``approval`` of a call just sent to a person: the rule, the arguments asked for,
    when it was asked and when it expires, no decision yet."""
    now = time.time()
    return {
        "rule": rule,
        "arguments": arguments,
        "asked_at": now,
        "expires_at": now + seconds,
        "decisions": [],
    }


def with_decision(
    approval: dict[str, Any],
    decision: str,
    principal: str,
    *,
    reason: str | None = None,
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``approval`` with one more decision (``approved``, ``denied``, ``expired``,
    ``cancelled``), who made it and when; edited arguments are kept beside it."""
    entry: dict[str, Any] = {"decision": decision, "by": principal, "at": time.time()}
    if reason:
        entry["reason"] = reason[:2000]
    if arguments is not None:
        entry["arguments"] = arguments
    return {**approval, "decisions": [*approval.get("decisions", []), entry]}


def pending_view(record: dict[str, Any]) -> dict[str, Any]:
    """A waiting call as approvers see it (``Session.pending``, the gateway, the CLI)."""
    approval = record.get("approval") or {}
    return {
        "call_id": record.get("call_id"),
        "name": record.get("name"),
        "tool": record.get("tool"),
        "arguments": approval.get("arguments"),
        "rule": approval.get("rule"),
        "asked_at": approval.get("asked_at"),
        "expires_at": approval.get("expires_at"),
    }


def rule_denied(name: str, call_id: str, tool: str | None, rule: str) -> CallResult:
    return CallResult.failure(
        name,
        ToolError.permission_denied(
            f"Refused by the permission rule {rule}; nothing ran.", code=RULE_DENIED, rule=rule
        ),
        tool_id=tool,
        call_id=call_id,
    )


def denied(name: str, call_id: str, tool: str | None, approval: dict[str, Any]) -> CallResult:
    last = (approval.get("decisions") or [{}])[-1]
    why = f": {last['reason']}" if last.get("reason") else ""
    return CallResult.failure(
        name,
        ToolError.permission_denied(
            f"A person denied this call ({last.get('by', '?')}){why}; nothing ran.",
            code=APPROVAL_DENIED,
            rule=approval.get("rule"),
            denied_by=last.get("by"),
        ),
        tool_id=tool,
        call_id=call_id,
    )


def expired(name: str, call_id: str, tool: str | None, approval: dict[str, Any]) -> CallResult:
    return CallResult.failure(
        name,
        ToolError(
            ErrorKind.TIMEOUT,
            "Nobody approved this call in time; nothing ran.",
            {"code": APPROVAL_EXPIRED, "rule": approval.get("rule")},
        ),
        tool_id=tool,
        call_id=call_id,
    )


@runtime_checkable
class PendingApprovals(Protocol):
    """How many calls of the session await approval (the reminder reads it after a call)."""

    def waiting_count(self) -> int: ...
