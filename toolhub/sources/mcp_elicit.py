"""An external MCP server's question during a call, relayed to toolhub's own caller the way
``ask_user`` asks: posted to the session's answer box, announced as an ``input_required``
progress item ``{call_id, questions}``, answered with ``Session.answer``; the answers go back
to the server as its form's content.

A server asks with an elicitation form: ``elicitation/create`` on a handshake-era connection,
or an ``InputRequiredResult`` answering ``tools/call`` on a 2026-07-28 one (the call is retried
with the responses: ``answer_inputs``). The latter names its call; the former does not (the
protocol carries no link from a server request to the client request it serves), so the link
relays it only while exactly one of its calls is in flight (``ServerLink``), and otherwise
answers ``cancel``.

Threat: the form is the external server's word, shown to the user. Each question names the
server; a form is relayed only when it is the flat object the protocol allows (``MAX_FIELDS``
fields at most, each a string, number, integer, boolean, or a multi-select array of choices;
its text clipped), and an answer goes back only converted to its field's type and inside its
choices; anything else is declined, never sent as it came. A multi-select field is answered
with its choices separated by commas.
A URL-mode elicitation is declined: it would send the user to a page toolhub cannot vouch for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from toolhub.answers import AnswerBox, Answers
from toolhub.core import Params, Progress, ToolContext
from toolhub.tools.ask_user import INPUT_REQUIRED, AskUserParams

#: Fields a relayed form may have (ask_user asks at most 4 questions; a form may ask more).
MAX_FIELDS = 16
#: Choices one field may offer.
MAX_CHOICES = 64
#: Characters of the server's text kept in one question.
MAX_TEXT = 2000
#: Rounds of ``InputRequiredResult`` one call may go through before it fails.
MAX_ROUNDS = 10
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})
_YES = frozenset({"yes", "y", "true", "1"})
_NO = frozenset({"no", "n", "false", "0"})
_ELICIT: TypeAdapter[types.ElicitRequest] = TypeAdapter(types.ElicitRequest)

Retry = Callable[
    [types.InputResponses | None, str | None], Awaitable[types.CallToolResult | types.Result]
]


class _Refused(Exception):
    """The form or an answer is not one toolhub relays: the server is told ``decline``."""


@dataclass(frozen=True)
class _Field:
    name: str
    kind: str
    question: dict[str, Any]
    required: bool
    #: Answer text -> the value sent (an enum's values, or its titles when it has them).
    choices: dict[str, Any] | None

    def value(self, answer: str) -> Any:
        if self.kind == "array":
            assert self.choices is not None
            picked = [part.strip() for part in answer.split(",") if part.strip()]
            if not set(picked) <= set(self.choices):
                raise _Refused
            return [self.choices[part] for part in picked]
        if self.choices is not None:
            if answer not in self.choices:
                raise _Refused
            return self.choices[answer]
        try:
            if self.kind == "integer":
                return int(answer)
            if self.kind == "number":
                return float(answer)
        except ValueError:
            raise _Refused from None
        if self.kind == "boolean":
            word = answer.strip().lower()
            if word not in _YES | _NO:
                raise _Refused
            return word in _YES
        return answer


class Form:
    """A relayable elicitation form: its questions, and answers back as its content."""

    def __init__(self, server: str, params: types.ElicitRequestFormParams) -> None:
        schema = params.requested_schema
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict) or not 0 < len(properties) <= MAX_FIELDS:
            raise _Refused
        required = schema.get("required") or []
        message = _clip(params.message)
        self.fields = [
            _field(server, message, str(name), prop, name in required)
            for name, prop in properties.items()
        ]

    @property
    def questions(self) -> list[dict[str, Any]]:
        return [f.question for f in self.fields]

    def result(self, answers: Answers) -> types.ElicitResult:
        content: dict[str, Any] = {}
        for index, field in enumerate(self.fields):
            text = _answer(answers, index, field.question["question"])
            if text == "":
                if field.required:
                    raise _Refused
                continue
            content[field.name] = field.value(text)
        return types.ElicitResult(action="accept", content=content)


def _field(server: str, message: str, name: str, prop: Any, required: bool) -> _Field:
    if not isinstance(prop, dict):
        raise _Refused
    kind = prop.get("type", "string" if ("enum" in prop or "oneOf" in prop) else None)
    if kind == "array":
        items = prop.get("items")
        choices = _choices(items, "string") if isinstance(items, dict) else None
        if choices is None:
            raise _Refused
    elif kind in _PRIMITIVES:
        choices = _choices(prop, kind)
    else:
        raise _Refused
    label = _clip(str(prop.get("title") or name))
    text = f"MCP server `{server}` asks: {message}\n{label}"
    if prop.get("description"):
        text += f": {_clip(str(prop['description']))}"
    if kind == "array":
        text += " (one or more, separated by commas)"
    question: dict[str, Any] = {"question": text}
    if choices is not None:
        question["options"] = list(choices)
    return _Field(name, kind, question, required, choices)


def _choices(prop: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The answers a field takes, each to the value sent: an enum's values (by their
    ``enumNames`` when it has them), titled values (``oneOf``/``anyOf`` of ``const`` and
    ``title``) by their titles, yes/no for a boolean; None for free text."""
    enum, names = prop.get("enum"), prop.get("enumNames")
    if isinstance(enum, list):
        labels = names if isinstance(names, list) and len(names) == len(enum) else enum
        return {_clip(str(n)): v for n, v in list(zip(labels, enum, strict=True))[:MAX_CHOICES]}
    variants = prop.get("oneOf", prop.get("anyOf"))
    if isinstance(variants, list):
        titled = {
            _clip(str(o.get("title", o["const"]))): o["const"]
            for o in variants[:MAX_CHOICES]
            if isinstance(o, dict) and "const" in o
        }
        return titled or None
    if kind == "boolean":
        return {"yes": True, "no": False}
    return None


def _answer(answers: Answers, index: int, question: str) -> str:
    """One field's answer: by position, or by question text (or index) in a mapping."""
    if isinstance(answers, dict):
        value = answers.get(question, answers.get(str(index), ""))
    else:
        value = answers[index] if index < len(answers) else ""
    text = str(value).strip()
    return "" if text == "(no answer)" else text


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


@dataclass
class Asker:
    """One external call's way to ask its caller: its context, and ``emit`` to put a progress
    item on the call's stream (callable from any thread)."""

    ctx: ToolContext
    emit: Callable[[Progress], object]

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Relay one form; the server's answer (``cancel`` when nobody answered in time)."""
        settings = self.ctx.container.get_or_default(Params[AskUserParams])
        box = self.ctx.container.get(AnswerBox)
        if settings.non_interactive or box is None:
            return types.ElicitResult(action="decline")
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="decline")
        try:
            form = Form(server, params)
        except _Refused:
            return types.ElicitResult(action="decline")
        call_id = self.ctx.call_id
        box.post(call_id, form.questions)
        unregister = self.ctx.cancel.on_cancel(lambda: box.withdraw(call_id))
        try:
            payload = {"call_id": call_id, "questions": form.questions}
            self.emit(Progress.custom(INPUT_REQUIRED, payload))
            answers = await asyncio.to_thread(box.wait, call_id, settings.timeout_s)
        finally:
            unregister()
            box.withdraw(call_id)
        if answers is None:
            return types.ElicitResult(action="cancel")
        try:
            return form.result(answers)
        except _Refused:
            return types.ElicitResult(action="decline")


async def respond(
    server: str, requests: Mapping[str, Any], asker: Asker | None
) -> types.InputResponses | None:
    """The responses to a server's input requests (typed, or as a task's ``inputRequests``
    carry them): each elicitation form through ``asker`` (``cancel`` without one); None when one
    asks for sampling or roots, which toolhub does not serve."""
    responses: types.InputResponses = {}
    for key, raw in requests.items():
        try:
            request = _ELICIT.validate_python(raw)
        except ValidationError:
            return None
        responses[key] = (
            await asker.elicit(server, request.params)
            if asker is not None
            else types.ElicitResult(action="cancel")
        )
    return responses


async def answer_inputs(
    server: str,
    first: types.InputRequiredResult,
    asker: Asker | None,
    retry: Retry,
) -> types.CallToolResult | types.Result:
    """Answer a 2026-07-28 server's ``InputRequiredResult``s for one call and retry the call
    with the responses until it answers with something else."""
    current: types.CallToolResult | types.Result = first
    for _ in range(MAX_ROUNDS):
        if not isinstance(current, types.InputRequiredResult):
            return current
        responses = await respond(server, current.input_requests or {}, asker)
        if responses is None:
            return _failed(f"MCP server `{server}` asked for sampling or roots, not served here")
        current = await retry(responses or None, current.request_state)
    if isinstance(current, types.InputRequiredResult):
        return _failed(f"MCP server `{server}` asked for input more than {MAX_ROUNDS} times")
    return current


def task_answers(
    server: str, asker: Asker | None
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]] | None:
    """How a task's ``inputRequests`` are answered for a call (its ``inputResponses`` as JSON,
    None for requests toolhub does not serve); None without a caller to ask."""
    if asker is None:
        return None

    async def answer(requests: dict[str, Any]) -> dict[str, Any] | None:
        responses = await respond(server, requests, asker)
        if responses is None:
            return None
        return {
            key: response.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, response in responses.items()
        }

    return answer


def _failed(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
