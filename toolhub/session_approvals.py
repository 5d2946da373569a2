"""The session's approval faces (docs/approvals.md): the calls awaiting a person's approval,
approving (with edited arguments, validated and checked against the rules again) and denying
them, and whether a call would wait for one.

All of it goes through the session's ``ApprovalGate`` (``toolhub/executors/approvals.py``),
which decides each call exactly once; a session without permission rules has no gate, and then
nothing awaits approval. ``SessionApprovals`` is a mixin of ``Session``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolhub.executors import Executor
    from toolhub.executors.approvals import ApprovalGate


class SessionApprovals:
    """Approve, deny and list the calls of this session that wait for a person."""

    if TYPE_CHECKING:
        executor: Executor

    def pending(self) -> list[dict[str, Any]]:
        """The calls awaiting approval: id, name, tool, arguments, rule, asked and expiry."""
        gate = self._gate()
        return gate.pending() if gate is not None else []

    def approve(
        self,
        call_id: str,
        *,
        arguments: dict[str, Any] | None = None,
        principal: str = "python",
    ) -> dict[str, Any]:
        """Approve a waiting call (``arguments``: edited, canonical names; validated and
        checked against the rules again); its record. ``ApprovalRefused`` when it did nothing
        (no such call, already decided, expired, edited arguments refused)."""
        return self._require_gate(call_id).approve(call_id, principal, arguments)

    def deny(
        self, call_id: str, reason: str | None = None, *, principal: str = "python"
    ) -> dict[str, Any]:
        """Deny a waiting call: its caller gets ``permission_denied``; its record."""
        return self._require_gate(call_id).deny(call_id, principal, reason)

    def needs_approval(self, name: str, arguments: Any) -> bool:
        """Whether this call would wait for a person's approval (a framework adapter asks its
        framework's own approval first: ``toolhub.integrations``)."""
        gate = self._gate()
        return gate is not None and gate.asks(name, arguments)

    def _gate(self) -> ApprovalGate | None:
        from toolhub.executors.approvals import ApprovalGate

        return self.executor if isinstance(self.executor, ApprovalGate) else None

    def _require_gate(self, call_id: str) -> ApprovalGate:
        from toolhub.approvals.base import UNKNOWN_CALL, ApprovalRefused

        gate = self._gate()
        if gate is None:
            raise ApprovalRefused(UNKNOWN_CALL, f"no call {call_id!r} awaits approval", 404)
        return gate
