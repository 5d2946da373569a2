"""Reminders: short notes appended after a tool's output to steer the model.

Cross-tool reminders are registered in the builder with their own dependency expression and run
after every call; tool-internal ones come from the tool itself (``Tool.reminders``). Both land in
``prompt_text`` only; the structured output stays clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .container import Container
from .requirements import Expr
from .result import ToolOutput

DEFAULT_REMINDER_TAG = "system-reminder"


@runtime_checkable
class Reminder(Protocol):
    """``requires`` decides whether the reminder is active for a tool set at all; ``collect`` runs
    after each call with the session's container and the call's output."""

    requires: Expr

    def collect(self, container: Container, output: ToolOutput) -> list[str]: ...


class RemindersEnabled:
    """Container flag: present and False turns every reminder off for the session."""

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled


def wrap_reminders(text: str, reminders: Sequence[str], tag: str = DEFAULT_REMINDER_TAG) -> str:
    """``text``, then each reminder as ``<tag>\\n…\\n</tag>``, blocks joined by blank lines."""
    if not reminders:
        return text
    joined = "\n\n".join(f"<{tag}>\n{r}\n</{tag}>" for r in reminders)
    return f"{text}\n\n{joined}" if text else joined
