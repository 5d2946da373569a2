"""Driving a tool the way the tool set does: validate JSON args, stream, collect the terminal."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolhub.core import ErasedTool, Outcome, Progress, Tool, ToolContext, ToolError


def call(
    tool: Tool[Any, Any], ctx: ToolContext, args: Mapping[str, Any]
) -> tuple[list[Progress], Outcome]:
    """Progress items and the outcome of one call; bad arguments come back as an error outcome."""
    erased = ErasedTool(tool)
    try:
        parsed = erased.parse_args(args, client_name=tool.id)
    except ToolError as err:
        return [], Outcome(error=err)

    async def go() -> tuple[list[Progress], Outcome]:
        progress: list[Progress] = []
        async for item in erased.stream(ctx, parsed):
            if isinstance(item, Progress):
                progress.append(item)
            else:
                return progress, item
        raise AssertionError("stream ended without an outcome")

    return asyncio.run(go())


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: compare before and after a failed call."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
