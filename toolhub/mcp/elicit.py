"""``ask_user`` questions as an MCP elicitation form, and the form's answers back as the
answers ``Session.answer`` expects (one string per question, in order).

When the client cannot elicit, the questions become the tool result's text instead, with a note
telling the model to ask the user itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NO_ELICITATION_NOTE = (
    "This MCP client cannot show questions to the user, so the question was not asked. "
    "Ask the user yourself and continue with their answers."
)


def _field(index: int) -> str:
    return f"q{index + 1}"


def questions_schema(questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A flat form: one required string field per question, an enum when it has options."""
    properties: dict[str, Any] = {}
    for index, question in enumerate(questions):
        field: dict[str, Any] = {"type": "string", "title": str(question.get("question", ""))}
        options = question.get("options")
        if options:
            field["enum"] = [str(option) for option in options]
        properties[_field(index)] = field
    return {"type": "object", "properties": properties, "required": list(properties)}


def questions_message(questions: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for index, question in enumerate(questions, 1):
        line = f"{index}. {question.get('question', '')}"
        options = question.get("options")
        if options:
            line += f" (options: {', '.join(str(o) for o in options)})"
        lines.append(line)
    return "\n".join(lines)


def answers_from(content: Mapping[str, Any] | None, count: int) -> list[str]:
    values = content or {}
    return [str(values.get(_field(index), "")) for index in range(count)]


def unanswerable_text(questions: Sequence[Mapping[str, Any]]) -> str:
    return f"Questions for the user:\n{questions_message(questions)}\n\n{NO_ELICITATION_NOTE}"
