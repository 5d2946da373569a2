"""``python -m tests.mcp.conformance_server WORKSPACE PORT|stdio``: toolhub's MCP server on
streamable HTTP (``run_http``, what ``toolhub mcp --transport http`` runs) or on stdio
(``run_stdio``) serving the fixture tools the
official conformance suite's ``tools-call-*`` scenarios call by name, written as toolhub tools.

Each tool is the smallest toolhub tool that meets its scenario's stated requirement, so what the
suite checks is toolhub's own mapping of a tool's text, images, failure, progress and question
to MCP, not a hand-made MCP answer.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolhub import Progress, Session, Tool, ToolContext, ToolError, ToolKind
from toolhub.answers import AnswerBox
from toolhub.core import ContentBlock
from toolhub.mcp.transports import run_http, run_stdio
from toolhub.toolset import ToolSetBuilder

#: A 1x1 transparent PNG.
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
    "AAAABJRU5ErkJggg=="
)
SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"


class NoArgs(BaseModel):
    pass


class Said(BaseModel):
    text: str

    def model_text(self) -> str:
        return self.text


class SimpleText(Tool[NoArgs, Said]):
    id = "test_simple_text"
    kind = ToolKind.READ
    description_template = "Returns a simple text."

    def run(self, ctx: ToolContext, args: NoArgs) -> Said:
        return Said(text="This is a simple text response for testing.")


class Picture(Said):
    def content_blocks(self) -> list[ContentBlock]:
        return [ContentBlock("image", data=PIXEL, mime_type="image/png")]


class ImageContent(Tool[NoArgs, Picture]):
    id = "test_image_content"
    kind = ToolKind.READ
    description_template = "Returns an image."

    def run(self, ctx: ToolContext, args: NoArgs) -> Picture:
        return Picture(text="A 1x1 PNG.")


class ErrorHandling(Tool[NoArgs, Said]):
    id = "test_error_handling"
    kind = ToolKind.OTHER
    description_template = "Always fails."

    def run(self, ctx: ToolContext, args: NoArgs) -> Said:
        raise ToolError.execution("This tool intentionally returns an error for testing")


class WithProgress(Tool[NoArgs, Said]):
    id = "test_tool_with_progress"
    kind = ToolKind.EXECUTE
    description_template = "Reports progress three times."

    async def execute(self, ctx: ToolContext, args: NoArgs):  # type: ignore[override]
        for step in ("0/100", "50/100", "100/100"):
            yield Progress.of_text(step)
            # Apart by more than the relay's merge interval, so each is its own notification.
            await asyncio.sleep(0.2)
        yield Said(text="Progress reported.")


class ElicitArgs(BaseModel):
    message: str = Field(description="The message to show the user.")


class Answers(BaseModel):
    answers: Any

    def model_text(self) -> str:
        return f"User response: {self.answers}"


class Elicitation(Tool[ElicitArgs, Answers]):
    """Asks through toolhub's question path (the answer box), as ``ask_user`` does."""

    id = "test_elicitation"
    kind = ToolKind.ASK_USER
    description_template = "Asks the user."

    async def execute(self, ctx: ToolContext, args: ElicitArgs):  # type: ignore[override]
        box = ctx.container.require(AnswerBox)
        questions = [{"question": args.message}]
        box.post(ctx.call_id, questions)
        yield Progress.custom("input_required", {"call_id": ctx.call_id, "questions": questions})
        answers = await asyncio.to_thread(box.wait, ctx.call_id, 60.0)
        yield Answers(answers=answers)


class Address(BaseModel):
    street: str
    city: str


class SchemaArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"$schema": SCHEMA_2020_12})
    name: str
    address: Address | None = None


class JsonSchema202012(Tool[SchemaArgs, Said]):
    id = "json_schema_2020_12_tool"
    kind = ToolKind.READ
    description_template = "Takes a schema with $defs."

    def run(self, ctx: ToolContext, args: SchemaArgs) -> Said:
        return Said(text=f"Hello {args.name}")


TOOLS: tuple[type[Tool[Any, Any]], ...] = (
    SimpleText,
    ImageContent,
    ErrorHandling,
    WithProgress,
    Elicitation,
    JsonSchema202012,
)


def main() -> None:
    workspace, where = Path(sys.argv[1]), sys.argv[2]
    builder = ToolSetBuilder(plugins=False)
    builder.register(*TOOLS)
    builder.set_default_tools([f"Main:{tool.id}" for tool in TOOLS])
    session = Session.embedded(
        None,
        workspace,
        session_id=f"conformance-{os.getpid()}",
        state_dir=workspace.parent / f"conformance-state-{os.getpid()}",
        builder=builder,
    )
    with session:
        if where == "stdio":
            run_stdio(session)
        else:
            run_http(session, host="127.0.0.1", port=int(where))


if __name__ == "__main__":
    main()
