"""How many bytes of a call the gateway holds: the size of an item as the log keeps it, and a
result larger than the window, cut with a marker.

Threat: a tenant's calls print megabytes each; a gateway that kept every event of every call
(for replay by ``Last-Event-ID``) grew with each call until the kernel killed it, and every
client lost its connection. The gateway keeps a bounded window per call
(``GatewaySettings.call_window_bytes``): the newest progress and the result, the older
progress replaced by one marker (``toolhub.core.trimmed``). Nothing of the output is lost: a
command's full output is in its log file (named in its result), a background task's through
``task_output``, and a distributed call's full result in its record.
"""

from __future__ import annotations

import json
from typing import Any

from toolhub.core import CallResult, Progress

#: The default window of one call: what the gateway holds of its progress and of its result.
DEFAULT_CALL_WINDOW_BYTES = 256 << 10

__all__ = ["DEFAULT_CALL_WINDOW_BYTES", "cut_result", "size_of"]


def size_of(item: Progress | CallResult) -> int:
    """About the bytes an item holds (its strings), without encoding it: counted per event."""
    if isinstance(item, CallResult):
        return len(json.dumps(item.to_dict(), ensure_ascii=False, default=str))
    size = 64 + len(item.text or "")
    for block in item.blocks:
        size += _payload_size(block.to_dict())
    return size + _payload_size(item.payload)


def _payload_size(value: Any, depth: int = 0) -> int:
    if isinstance(value, str | bytes):
        return len(value)
    if depth > 8:
        return 64
    if isinstance(value, dict):
        return sum(len(str(k)) + _payload_size(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_payload_size(v, depth + 1) for v in value)
    return 8


def cut_result(result: CallResult, window: int) -> CallResult:
    """``result`` as the gateway holds it: itself when it fits ``window``, else its text's head
    and a marker saying how much was cut and where the full result is (structured output and
    content blocks of a cut result are dropped: the record holds them)."""
    size = size_of(result)
    if size <= window:
        return result
    keep = max(window // 2, 1024)
    text = result.prompt_text
    note = (
        f"\n[{size - min(len(text), keep)} bytes of this result cut by the gateway (it holds "
        f"{window} bytes per call); full output: the command's log file, task_output for a "
        "background task, or the call's record (GET /v1/sessions/{sid}/calls/{cid})]"
    )
    return CallResult(
        name=result.name,
        prompt_text=text[:keep] + note,
        error=result.error,
        tool_id=result.tool_id,
        call_id=result.call_id,
        effective_tool_name=result.effective_tool_name,
    )
