"""An MCP tool result as toolhub's terminal: the text the model reads (content blocks joined,
capped), its images as content blocks beside the text (as a built-in tool's go), and the
structured output (``structuredContent``, else a toolhub server's ``_meta["toolhub/output"]``,
else the text)."""

from __future__ import annotations

import os

import mcp_types as types

from toolhub.core import ContentBlock, Outcome, ToolError, ToolOutput

DEFAULT_MAX_OUTPUT_BYTES = 20_000

#: Where ``toolhub mcp`` puts a structured output whose text is not its JSON (see
#: ``server.to_mcp_result``), so a toolhub reached over MCP keeps its typed outputs.
OUTPUT_META_KEY = "toolhub/output"


def max_output_bytes() -> int:
    raw = os.environ.get("TOOLHUB_MAX_MCP_OUTPUT_BYTES")
    return int(raw) if raw and raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_OUTPUT_BYTES


def result_text(result: types.CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(f"[image {block.mime_type}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    return cap("\n".join(parts), max_output_bytes())


def cap(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[output truncated: {len(data)} bytes, showing the first {limit}]"


def outcome_of(result: types.CallToolResult, tool_id: str) -> Outcome:
    """The terminal for a result; an ``isError`` result is a failed call the model can read."""
    text = result_text(result)
    if result.is_error:
        return Outcome(error=ToolError.execution(text or "the MCP tool reported an error"))
    images = tuple(
        ContentBlock("image", data=block.data, mime_type=block.mime_type)
        for block in result.content
        if isinstance(block, types.ImageContent)
    )
    structured = result.structured_content
    if structured is None and result.meta is not None:
        structured = result.meta.get(OUTPUT_META_KEY)
    if structured is not None:
        return Outcome(ToolOutput.dynamic(structured, tool_id), text, blocks=images)
    return Outcome(ToolOutput.plain_text(text, tool_id), text, blocks=images)
