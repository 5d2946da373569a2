"""A call awaiting approval, asked over MCP as a question: the gate's ``awaiting_approval``
progress item becomes an ``input_required`` one, with one question whose options are
``approve`` and ``deny``, so every path an ``ask_user`` question takes reaches the person
too: an ``InputRequiredResult`` on a 2026-07-28 request, an elicitation on a handshake-era
connection, a task that shows ``input_required``. The answer comes back through
``Session.answer``, which decides the approval (``ApprovalGate.answer``); a declined form
cancels the call, as it cancels an ``ask_user`` call.
"""

from __future__ import annotations

import json

from toolhub.approvals.base import AWAITING_SUBKIND
from toolhub.core import Progress

#: The progress subkind the MCP server asks its questions on.
INPUT_REQUIRED = "input_required"
#: Longest argument text shown in the question.
SHOWN_CHARS = 2000


def as_question(item: object) -> object:
    """``item``, or the question of a call awaiting approval."""
    if not (
        isinstance(item, Progress) and item.kind == "custom" and item.subkind == AWAITING_SUBKIND
    ):
        return item
    payload = item.payload if isinstance(item.payload, dict) else {}
    shown = json.dumps(payload.get("arguments"), ensure_ascii=False)
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS] + "…"
    question = (
        f"Approve the call of `{payload.get('name')}` with {shown}? "
        f"(asked by the permission rule {payload.get('rule')})"
    )
    return Progress.custom(
        INPUT_REQUIRED,
        {
            "questions": [{"question": question, "options": ["approve", "deny"]}],
            "approval": payload,
        },
    )
