"""External tools registered over HTTP: each call is forwarded to the registrant's URL.

The protocol (docs/interfaces.md): toolhub POSTs ``{"name", "arguments", "call_id",
"session_id"}`` as JSON; a 2xx answer's JSON body is the tool's output (a JSON string becomes
plain text for the model); any other status fails the call with the answer's text as the
detail the model reads. The spec's ``source`` carries the target, so any process that rebuilds
the tool set (a worker) can rebuild the handler with ``forward_handler``.
"""

from __future__ import annotations

from typing import Any

import httpx

from toolhub.core import ToolContext, ToolError
from toolhub.toolset import ExternalHandler, ExternalSpec

MAX_ERROR_TEXT = 2000


def forward_source(url: str, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    return {"forward": {"url": url, "headers": headers, "timeout_s": timeout_s}}


def forward_handler(spec: ExternalSpec) -> ExternalHandler:
    """The handler of a tool whose ``spec.source`` is a ``forward_source``."""
    target = spec.source["forward"]
    url: str = target["url"]
    headers: dict[str, str] = dict(target.get("headers") or {})
    timeout_s = float(target.get("timeout_s") or 60.0)

    async def handle(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        payload = {
            "name": spec.name,
            "arguments": arguments,
            "call_id": ctx.call_id,
            "session_id": ctx.session_id,
        }
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                response = await client.post(url, json=payload, headers=headers)
        except httpx.TimeoutException:
            detail = f"`{spec.name}`: no answer from its endpoint within {timeout_s:g}s"
            raise ToolError.timeout(detail) from None
        except httpx.HTTPError as exc:
            detail = f"`{spec.name}`: its endpoint is unreachable ({exc})"
            raise ToolError.execution(detail) from None
        if response.status_code >= 300:
            text = response.text[:MAX_ERROR_TEXT] or response.reason_phrase
            raise ToolError.execution(f"`{spec.name}` failed ({response.status_code}): {text}")
        try:
            return response.json()
        except ValueError:
            return response.text

    return handle
