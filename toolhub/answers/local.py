"""``AnswerBox`` for one process (embedded sessions): a dict guarded by a condition variable."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Answers


@dataclass(slots=True)
class _Pending:
    questions: list[dict[str, Any]]
    answers: Answers | None = None
    withdrawn: bool = False


class LocalAnswerBox:
    """``AnswerBox`` for one process: a dict guarded by a condition variable."""

    def __init__(self) -> None:
        self._open: dict[str, _Pending] = {}
        self._cond = threading.Condition()

    def post(self, call_id: str, questions: Sequence[Mapping[str, Any]]) -> None:
        with self._cond:
            self._open[call_id] = _Pending([dict(q) for q in questions])

    def wait(self, call_id: str, timeout_s: float) -> Answers | None:
        deadline = time.monotonic() + max(timeout_s, 0)
        with self._cond:
            try:
                while True:
                    entry = self._open.get(call_id)
                    if entry is None or entry.withdrawn:
                        return None
                    if entry.answers is not None:
                        return entry.answers
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._cond.wait(remaining)
            finally:
                self._open.pop(call_id, None)

    def answer(self, call_id: str, answers: Answers) -> bool:
        with self._cond:
            entry = self._open.get(call_id)
            if entry is None or entry.withdrawn or entry.answers is not None:
                return False
            entry.answers = answers
            self._cond.notify_all()
            return True

    def withdraw(self, call_id: str) -> None:
        with self._cond:
            entry = self._open.get(call_id)
            if entry is not None:
                entry.withdrawn = True
                self._cond.notify_all()

    def close(self) -> None:
        """Withdraw every open question (the session is closing): no waiter is left hanging."""
        with self._cond:
            for entry in self._open.values():
                entry.withdrawn = True
            self._cond.notify_all()

    def pending(self) -> dict[str, list[dict[str, Any]]]:
        with self._cond:
            return {
                call_id: list(entry.questions)
                for call_id, entry in self._open.items()
                if entry.answers is None and not entry.withdrawn
            }
