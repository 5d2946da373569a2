"""Tools and session factories shared by the gateway, MCP and CLI suites.

The tools are small and deterministic: an echo, a counter that streams, a sleeper that honours
cancellation (a runaway command stand-in) and a question to the user over the answer box.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tests.sample_tools import Count, Echo
from toolhub import Progress, Session, Tool, ToolContext, ToolKind
from toolhub.answers import AnswerBox
from toolhub.toolset import ConfigSource, ToolSetBuilder

TOOL_IDS = ["Main:echo", "Main:count", "Main:nap", "Main:ask"]


class NapArgs(BaseModel):
    seconds: float = Field(default=30.0, ge=0, le=600)
    marker: str | None = Field(default=None, description="File that gets how the nap ended.")


class NapOutput(BaseModel):
    slept: float


class Nap(Tool[NapArgs, NapOutput]):
    """Sleeps, streaming a tick per 50 ms; a cancel interrupts it at once."""

    id = "nap"
    kind = ToolKind.EXECUTE
    workload = "command"
    description_template = "Sleep for a while."

    async def execute(self, ctx: ToolContext, args: NapArgs):  # type: ignore[override]
        loop = asyncio.get_running_loop()
        start = loop.time()
        tick = 0
        while loop.time() - start < args.seconds:
            tick += 1
            yield Progress.of_text(f"tick {tick}")
            if await ctx.cancel.wait(min(0.05, args.seconds)):
                _mark(args.marker, "cancelled")
                return
        _mark(args.marker, "done")
        yield NapOutput(slept=args.seconds)


def _mark(marker: str | None, how: str) -> None:
    if marker:
        Path(marker).write_text(how)


class Question(BaseModel):
    question: str
    options: list[str] | None = None


class AskArgs(BaseModel):
    questions: list[Question]


class AskOutput(BaseModel):
    answers: list[str] | dict[str, str] | None

    def model_text(self) -> str:
        return f"answers: {self.answers}"


class Ask(Tool[AskArgs, AskOutput]):
    """``ask_user`` in miniature: posts the questions, says input is required, waits."""

    id = "ask"
    kind = ToolKind.ASK_USER
    description_template = "Ask the user."

    async def execute(self, ctx: ToolContext, args: AskArgs):  # type: ignore[override]
        box = ctx.container.require(AnswerBox)
        questions = [q.model_dump(exclude_none=True) for q in args.questions]
        box.post(ctx.call_id, questions)
        yield Progress.custom("input_required", {"call_id": ctx.call_id, "questions": questions})
        remove = ctx.cancel.on_cancel(lambda: box.withdraw(ctx.call_id))
        try:
            answers = await asyncio.to_thread(box.wait, ctx.call_id, 60.0)
        finally:
            remove()
        yield AskOutput(answers=answers)


def make_builder() -> ToolSetBuilder:
    builder = ToolSetBuilder(plugins=False)
    builder.register(Echo, Count, Nap, Ask)
    builder.set_default_tools(TOOL_IDS)
    return builder


def session_factory(tmp_path: Path) -> Callable[[ConfigSource, Path, str], Session]:
    """``(config, workspace, session_id) -> Session`` for the gateway, on the test tools."""
    builder = make_builder()

    def make(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.embedded(
            config,
            workspace,
            session_id=session_id,
            state_dir=tmp_path / "state" / session_id,
            builder=builder,
        )

    return make


def sse(body: str) -> list[dict[str, Any]]:
    """The events of an SSE body as sent (``{event?, id?, data}``, ``data`` parsed as JSON);
    comment lines (``: keepalive``) left out. Either line ending (the MCP SDK writes CRLF)."""
    import json

    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "data" in fields:
            fields["data"] = json.loads(fields["data"])
            events.append(fields)
    return events


def sse_events(text: str) -> list[dict[str, Any]]:
    """The gateway's events of an SSE body: named ones, as ``{id, event, data}`` with ``id`` a
    number."""
    return [{**event, "id": int(event["id"])} for event in sse(text) if "event" in event]
