"""toolhub's results as MCP ``CallToolResult``s: what ``toolhub mcp`` answers a ``tools/call``
with (directly, or inlined in a completed task)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from toolhub.core import CallResult
from toolhub.sources.mcp_outcome import OUTPUT_META_KEY

#: Where a failed call's typed error travels in ``_meta`` (kind, detail, details: a
#: ``rate_limited`` refusal's ``quota`` and ``retry_after``), for programs; the model reads
#: the same in the text.
ERROR_META_KEY = "toolhub/error"


def to_mcp_result(result: CallResult) -> types.CallToolResult:
    """``prompt_text`` (reminders and notes included) as the text, then the result's images.

    Clients differ in what they show the model: most show the text content, but some
    (pydantic-ai; openai-agents with ``use_structured_content``) show ``structuredContent``
    instead whenever a result has it, relying on the spec's rule that the text is then the
    serialized structured content. The model must read ``prompt_text`` in every client, so
    ``structuredContent`` is sent only when the text is exactly its JSON; otherwise the
    structured output travels in ``_meta`` under ``toolhub/output``, for programs (clients
    do not show ``_meta`` to models). A failed call's typed error goes in ``_meta`` under
    ``toolhub/error``.
    """
    output = result.output
    value = output.value if output is not None and output.tag != "plain_text" else None
    twin = isinstance(value, dict) and _is_json_of(result.prompt_text, value)
    content: list[Any] = [types.TextContent(type="text", text=result.prompt_text)]
    content += [
        types.ImageContent(type="image", data=block.data, mime_type=block.mime_type or "image/png")
        for block in result.content
        if block.type == "image" and block.data
    ]
    meta: dict[str, Any] = {}
    if value is not None and not twin:
        meta[OUTPUT_META_KEY] = value
    if result.error is not None:
        meta[ERROR_META_KEY] = result.error.to_dict()
    return types.CallToolResult(
        content=content,
        structured_content=value if twin else None,
        meta=meta or None,
        is_error=result.is_error,
    )


def _is_json_of(text: str, value: dict[str, Any]) -> bool:
    if not text.lstrip().startswith("{"):
        return False
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )
