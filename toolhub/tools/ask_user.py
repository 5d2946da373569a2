"""``ask_user``: put questions to the user and wait (bounded) for the answers.

The questions are posted to the answer box first, then announced as an ``input_required``
progress item ``{call_id, questions}``; the host shows them and calls ``Session.answer``. The
wait ends on the answer, on the timeout (an output saying nobody answered) or on cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.answers import AnswerBox, Answers
from toolhub.core import Params, Progress, Tool, ToolContext, ToolError, ToolKind

INPUT_REQUIRED = "input_required"


class Question(BaseModel):
    question: str = Field(description="The question, complete and specific.")
    options: list[str] | None = Field(
        None, description="Choices to offer, when the answer is one of a few."
    )


class AskUserArgs(BaseModel):
    questions: list[Question] = Field(min_length=1, max_length=4)


class AskUserParams(BaseModel):
    timeout_s: float = Field(1800.0, gt=0)
    non_interactive: bool = Field(False, description="No user is present: answer at once.")


class QA(BaseModel):
    question: str
    answer: str


class AskUserOutput(BaseModel):
    status: Literal["answered", "timed_out", "unavailable"]
    answers: list[QA] = Field(default_factory=list)

    def model_text(self) -> str:
        if self.status == "unavailable":
            return (
                "No user is available to answer. Proceed with your best judgement and say "
                "which assumptions you made."
            )
        if self.status == "timed_out":
            return (
                "The user did not answer in time. Proceed with your best judgement, or ask "
                "again later."
            )
        return "\n\n".join(f"Q: {qa.question}\nA: {qa.answer}" for qa in self.answers)


class AskUser(Tool[AskUserArgs, AskUserOutput]):
    id = "ask_user"
    kind = ToolKind.ASK_USER
    description_template = (
        "Ask the user one to four questions when you cannot proceed without their decision "
        "(requirements, preferences, a choice between approaches). Offer options when the answer "
        "is one of a few. Do not ask what you can find out yourself."
    )
    params_model = AskUserParams

    async def execute(
        self, ctx: ToolContext, args: AskUserArgs
    ) -> AsyncIterator[Progress | AskUserOutput]:
        params = ctx.container.get_or_default(Params[AskUserParams])
        if params.non_interactive:
            yield AskUserOutput(status="unavailable")
            return
        box = ctx.container.require(AnswerBox)
        questions = [q.model_dump(exclude_none=True) for q in args.questions]
        box.post(ctx.call_id, questions)
        unregister = ctx.cancel.on_cancel(lambda: box.withdraw(ctx.call_id))
        try:
            yield Progress.custom(INPUT_REQUIRED, {"call_id": ctx.call_id, "questions": questions})
            answers = await asyncio.to_thread(box.wait, ctx.call_id, params.timeout_s)
        finally:
            unregister()
            box.withdraw(ctx.call_id)
        if ctx.cancel.cancelled:
            raise ToolError.cancelled()
        if answers is None:
            yield AskUserOutput(status="timed_out")
            return
        yield AskUserOutput(status="answered", answers=_pair(args.questions, answers))


def _pair(questions: list[Question], answers: Answers) -> list[QA]:
    """Answers as a list (by position) or a mapping (by question text, or by index)."""
    out: list[QA] = []
    for n, q in enumerate(questions):
        value: Any
        if isinstance(answers, dict):
            value = answers.get(q.question, answers.get(str(n), ""))
        else:
            value = answers[n] if n < len(answers) else ""
        out.append(QA(question=q.question, answer=str(value) if value != "" else "(no answer)"))
    return out


TOOLS: list[type[Tool[Any, Any]]] = [AskUser]
