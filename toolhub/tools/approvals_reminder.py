"""The reminder that calls of the session await a person's approval: after each call, "2 calls
await approval", so the model knows why results it asked for have not come, and does not ask
again. Active in every tool set; it costs nothing where no approvals are kept (an embedded
session without rules, a fleet session whose config has none)."""

from __future__ import annotations

from toolhub.approvals.base import PendingApprovals
from toolhub.core import Container, ToolOutput
from toolhub.core.requirements import TRUE, Expr


class PendingApprovalsReminder:
    requires: Expr = TRUE

    def collect(self, container: Container, output: ToolOutput) -> list[str]:
        pending = container.get(PendingApprovals)
        if pending is None:
            return []
        count = pending.waiting_count()
        if not count:
            return []
        calls = "1 call awaits" if count == 1 else f"{count} calls await"
        return [
            f"{calls} approval by a person; each one's result comes once it is decided. "
            "Do not make those calls again."
        ]


REMINDERS = [PendingApprovalsReminder()]
