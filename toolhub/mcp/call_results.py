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


#: The extension a client declares (``capabilities.extensions``, either protocol era) to get
#: a result's structured output in ``_meta`` under the same name: toolhub's own MCP client does.
OUTPUT_EXTENSION = OUTPUT_META_KEY


def wants_output(ctx: Any) -> bool:
    """Whether the client of a request (a ``ServerRequestContext``) declared
    ``OUTPUT_EXTENSION``."""
    caps = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    extensions = getattr(caps, "extensions", None) or {}
    return OUTPUT_EXTENSION in extensions


def to_mcp_result(result: CallResult, *, with_output: bool = False) -> types.CallToolResult:
    """``prompt_text`` (reminders and notes included) as the text, then the result's images.

    Clients differ in what they show the model: most show the text content, but some
    (pydantic-ai; openai-agents with ``use_structured_content``) show ``structuredContent``
    instead whenever a result has it, relying on the spec's rule that the text is then the
    serialized structured content. The model must read ``prompt_text`` in every client, so
    ``structuredContent`` is sent only when the text is exactly its JSON. Otherwise the
    structured output goes in ``_meta`` under ``toolhub/output`` only ``with_output`` (a
    client that declared ``OUTPUT_EXTENSION``): some clients show ``_meta`` to the model
    (Google ADK passes it on, LlamaIndex prints the whole result), where a copy would double
    what the model reads. A failed call's typed error goes in ``_meta`` under
    ``toolhub/error``: its ``kind`` and ``details`` (a quota's ``retry_after``) for every
    client, its ``detail`` (the text's own words again) only ``with_output``.
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
    if value is not None and not twin and with_output:
        meta[OUTPUT_META_KEY] = value
    if result.error is not None:
        meta[ERROR_META_KEY] = _typed_error(result.error.to_dict(), with_output=with_output)
    return types.CallToolResult(
        content=content,
        structured_content=value if twin else None,
        meta=meta or None,
        is_error=result.is_error,
    )


def _typed_error(error: dict[str, Any], *, with_output: bool) -> dict[str, Any]:
    """The ``toolhub/error`` a client gets: without ``detail``, the words of the text content
    (which a client that shows ``_meta`` to its model would otherwise show twice), unless it
    declared ``OUTPUT_EXTENSION``."""
    return error if with_output else {k: v for k, v in error.items() if k != "detail"}


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


def for_client(wire: dict[str, Any], *, with_output: bool) -> dict[str, Any]:
    """A stored result (wire form, made ``with_output``) as one client gets it: without the
    structured copy or the error's ``detail`` unless it declared ``OUTPUT_EXTENSION``."""
    meta = wire.get("_meta")
    if with_output or not isinstance(meta, dict):
        return wire
    meta = {k: v for k, v in meta.items() if k != OUTPUT_META_KEY}
    if isinstance(meta.get(ERROR_META_KEY), dict):
        meta[ERROR_META_KEY] = _typed_error(meta[ERROR_META_KEY], with_output=False)
    trimmed = {k: v for k, v in wire.items() if k != "_meta"}
    return {**trimmed, "_meta": meta} if meta else trimmed
