"""What the adapter tests share: a renamed ``ticks`` (the distributed suite's streaming tool,
run by real workers), a tool with a reminder and an image (embedded), and the checks that a
call's progress came from a worker while the call was still running."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from tests.distributed.plugin_tools import TOOLS
from toolhub.core import Container, ContentBlock, Tool, ToolContext, ToolKind, ToolOutput
from toolhub.toolset import ToolSetBuilder

#: ``Test:ticks`` as the model knows it: another name and another name for ``n``.
TICKS = "stream_ticks"
TICKS_ENTRY = {
    "id": "Test:ticks",
    "name": TICKS,
    "rename": {"n": "count"},
    "on_worker_lost": "rerun",
}
#: What the workers can run (they load the distributed suite's tools only).
CONNECTED_CONFIG = {"tools": [TICKS_ENTRY]}
EMBEDDED_CONFIG = {"tools": [TICKS_ENTRY, {"id": "Test:snapshot"}]}
#: Four ticks 150 ms apart: the first arrives about 450 ms before the result does.
TICK_ARGS = {"count": 4, "delay_ms": 150}
#: Refused by toolhub's own validation (``n`` is at most 100 000), named as the client names it.
BAD_ARGS = {"count": 1_000_000}
BAD_TEXT = "Failed to parse arguments for tool `stream_ticks`: `count`"
#: How much earlier than the result the first progress item must have been seen.
LIVE_MARGIN_S = 0.2

#: A 1x1 PNG, base64.
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
REMINDER = "Snapshots go stale after any edit."


class SnapshotArgs(BaseModel):
    label: str = "frame"


class SnapshotOutput(BaseModel):
    label: str

    def model_text(self) -> str:
        return f"snapshot {self.label}"

    def content_blocks(self) -> list[ContentBlock]:
        return [ContentBlock("image", data=PIXEL, mime_type="image/png")]


class Snapshot(Tool[SnapshotArgs, SnapshotOutput]):
    """Answers with text, an image beside it, and a reminder of its own."""

    id = "snapshot"
    namespace = "Test"
    kind = ToolKind.READ
    read_only = True
    description_template = "Take a snapshot."

    def run(self, ctx: ToolContext, args: SnapshotArgs) -> SnapshotOutput:
        return SnapshotOutput(label=args.label)

    def reminders(self, container: Container, output: ToolOutput) -> list[str]:
        return [REMINDER]


def make_builder() -> ToolSetBuilder:
    """The distributed suite's tools (the workers have them too) and ``Snapshot``."""
    return ToolSetBuilder(plugins=False).register(*TOOLS, Snapshot)


def assert_live_worker_progress(
    progress: list[tuple[float, dict[str, Any]]], result_seen_at: float, output: dict[str, Any]
) -> None:
    """``progress``: (time seen, ``Progress.to_dict()``) of one ``ticks`` call. Every tick came
    from the worker that produced ``output`` (not this process), and the first was seen well
    before the result, so it streamed rather than arriving with it."""
    assert [p["payload"]["i"] for _, p in progress] == list(range(TICK_ARGS["count"]))
    pids = {p["payload"]["pid"] for _, p in progress}
    assert pids == {output["worker_pid"]} and os.getpid() not in pids
    assert result_seen_at - progress[0][0] > LIVE_MARGIN_S, "progress arrived with the result"
