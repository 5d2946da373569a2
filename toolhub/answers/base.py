"""Questions to the user: a call posts its questions, the host answers them later.

``ask_user`` posts before it tells anybody that input is required, so an answer can never arrive
for a question the box does not know yet. The wait is always bounded, and a cancelled call
stops waiting at once (``withdraw`` wakes it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

Answers = list[str] | dict[str, str]


@runtime_checkable
class AnswerBox(Protocol):
    def post(self, call_id: str, questions: Sequence[Mapping[str, Any]]) -> None:
        """Register the questions of ``call_id`` (before telling anybody about them)."""
        ...

    def wait(self, call_id: str, timeout_s: float) -> Answers | None:
        """Block until answered (the answers), withdrawn or timed out (None); the question is
        gone afterwards either way."""
        ...

    def answer(self, call_id: str, answers: Answers) -> bool:
        """Deliver answers; False when no such question is open."""
        ...

    def withdraw(self, call_id: str) -> None:
        """Give up on a question (cancelled call): its waiter returns None at once."""
        ...

    def pending(self) -> dict[str, list[dict[str, Any]]]:
        """Open questions by call id (for hosts that show them)."""
        ...
