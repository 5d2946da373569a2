"""``ask_user`` on a 2026-07-28 connection without tasks: the questions as an
``InputRequiredResult``, the answers on the client's retry.

That protocol revision has no server-to-client request on a plain call, so the server asks by
answering ``tools/call`` with ``resultType: input_required``: an elicitation form under
``inputRequests`` and a ``requestState``. A client that declared elicitation (the ``mcp`` SDK's
``Client``, FastMCP) shows the form and sends the same ``tools/call`` again with
``inputResponses`` and the echoed ``requestState`` (SEP-2322's multi round trip). Meanwhile the
call goes on waiting for its answers; the retry delivers them (``Session.answer``; a declined
form cancels the call) and waits for what comes next: the result, or another question.

The call's stream stays with the replica that asked (``_Waiting``); a retry that reaches another
replica follows the call by id instead (``Session.follow``). Threat: the retry is the client's
word. ``requestState`` is HMAC-protected and bound to the call and the principal that asked
(``request_state.py``), so no one can answer, or read the result of, another caller's call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .elicit import answers_from, questions_message, questions_schema
from .request_state import RequestStates, StateRefused
from .task_protocol import INPUT_KEY, principal_of

if TYPE_CHECKING:
    from toolhub.session import Session

#: What a call's ``requestState`` is bound to, beside a task's id.
SUBJECT_PREFIX = "call:"

Follow = Callable[[str, "asyncio.Queue[object]"], Coroutine[Any, Any, None]]


@dataclass
class _Waiting:
    """A call that asked: its items still arrive on ``queue`` (``pump`` feeds it)."""

    queue: asyncio.Queue[object]
    pump: asyncio.Task[None]
    #: The ``input_required`` progress payload (the questions).
    payload: Any


@dataclass
class Resumed:
    """The call a retry continues: its items arrive on ``queue`` (fed by ``pump``);
    ``unanswered``, the questions still open when the retry carried no answer to them."""

    call_id: str
    queue: asyncio.Queue[object]
    pump: asyncio.Task[None]
    unanswered: Any = None


class CallQuestions:
    def __init__(self, session: Session, states: RequestStates, follow: Follow) -> None:
        self.session = session
        self.states = states
        self._follow = follow
        self._waiting: dict[str, _Waiting] = {}

    @staticmethod
    def can_ask(ctx: ServerRequestContext[Any]) -> bool:
        """A 2026-07-28 request from a client that declared elicitation."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        caps = ctx.session.client_capabilities
        return caps is not None and caps.elicitation is not None

    def ask(
        self,
        ctx: ServerRequestContext[Any],
        call_id: str,
        payload: Any,
        queue: asyncio.Queue[object],
        pump: asyncio.Task[None],
    ) -> types.InputRequiredResult:
        """The questions as the request's result; the call waits on for the retry."""
        questions = _questions(payload)
        waiting = _Waiting(queue, pump, payload)
        self._waiting[call_id] = waiting
        # A call that ends with nobody coming back (its ask timed out) is forgotten; a late
        # retry then follows it by id.
        pump.add_done_callback(lambda _: self._forget(call_id, waiting))
        form = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=questions_message(questions),
                requested_schema=questions_schema(questions),
            )
        )
        return types.InputRequiredResult(
            input_requests={INPUT_KEY: form},
            request_state=self.states.issue(SUBJECT_PREFIX + call_id, principal_of(ctx)),
        )

    async def resume(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> Resumed:
        """The call a retry continues, its answers delivered."""
        if params.request_state is None:
            raise MCPError(types.INVALID_PARAMS, "inputResponses without a requestState")
        try:
            subject = self.states.subject(params.request_state, principal_of(ctx))
        except StateRefused as refused:
            raise MCPError(types.INVALID_PARAMS, f"Invalid requestState: {refused}") from None
        if not subject.startswith(SUBJECT_PREFIX):
            raise MCPError(types.INVALID_PARAMS, "Invalid requestState: not a call's")
        call_id = subject.removeprefix(SUBJECT_PREFIX)
        waiting = self._waiting.pop(call_id, None)
        reply = (params.input_responses or {}).get(INPUT_KEY)
        if isinstance(reply, types.ElicitResult):
            if reply.action == "accept":
                count = len(_questions(waiting.payload)) if waiting else len(reply.content or {})
                answers = answers_from(reply.content, count)
                who = f"mcp:{principal_of(ctx)}"
                await asyncio.to_thread(self.session.answer, call_id, answers, principal=who)
            else:
                await self.session.cancel(call_id)
        elif waiting is not None:
            return Resumed(call_id, waiting.queue, waiting.pump, unanswered=waiting.payload)
        if waiting is not None:
            return Resumed(call_id, waiting.queue, waiting.pump)
        queue: asyncio.Queue[object] = asyncio.Queue()
        return Resumed(call_id, queue, asyncio.create_task(self._follow(call_id, queue)))

    def _forget(self, call_id: str, waiting: _Waiting) -> None:
        if self._waiting.get(call_id) is waiting:
            del self._waiting[call_id]


def _questions(payload: Any) -> list[Any]:
    questions = payload.get("questions") if isinstance(payload, dict) else None
    return questions if isinstance(questions, list) else []


__all__ = ["CallQuestions", "Resumed"]
