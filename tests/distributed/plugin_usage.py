"""Tools that charge their call's usage meter directly, as the process backend does for a
command: the usage tests' stand-in for a command's CPU seconds and peak memory. Loaded by the
test workers through ``TOOLHUB_PLUGINS`` and by the test sessions through ``usage_builder``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from toolhub.core import Progress, Tool, ToolContext, ToolError, ToolKind
from toolhub.core.usage import current_meter
from toolhub.toolset import ToolSetBuilder


class ChargeArgs(BaseModel):
    cpu_seconds: float = 0.0
    peak_memory_bytes: int = 0
    text: str = ""
    chunks: int = Field(default=0, ge=0, le=100)
    fail: bool = False


class ChargeOutput(BaseModel):
    text: str


def _charge(args: ChargeArgs) -> None:
    meter = current_meter()
    if meter is None:
        raise ToolError.execution("no usage meter is open for this call")
    meter.charge(cpu_seconds=args.cpu_seconds, peak_memory_bytes=args.peak_memory_bytes)
    if args.fail:
        raise ToolError.execution("failed on purpose")


class Charge(Tool[ChargeArgs, ChargeOutput]):
    """Charges its meter and returns ``text`` (a plain sync tool: run inline)."""

    id = "charge"
    namespace = "Usage"
    kind = ToolKind.OTHER
    description_template = "Charge the meter."

    def run(self, ctx: ToolContext, args: ChargeArgs) -> ChargeOutput:
        _charge(args)
        return ChargeOutput(text=args.text)


class ChargeStream(Tool[ChargeArgs, ChargeOutput]):
    """Streams ``text`` as ``chunks`` progress items, charges its meter from a thread, and
    returns ``text`` (a streaming tool: run through the executor's stream)."""

    id = "charge_stream"
    namespace = "Usage"
    kind = ToolKind.OTHER
    description_template = "Charge the meter, streaming."

    async def execute(self, ctx: ToolContext, args: ChargeArgs):  # type: ignore[override]
        import asyncio

        for _ in range(args.chunks):
            yield Progress.of_text(args.text)
        await asyncio.to_thread(_charge, args)
        yield ChargeOutput(text=args.text)


TOOLS: tuple[type[Tool[Any, Any]], ...] = (Charge, ChargeStream)
CONFIG = {"tools": [{"id": t.fq_id()} for t in TOOLS]}


def register(builder: ToolSetBuilder) -> None:
    builder.register(*TOOLS)


def usage_builder() -> ToolSetBuilder:
    return ToolSetBuilder(plugins=False).register(*TOOLS)
