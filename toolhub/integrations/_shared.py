"""What the three adapters share: the definitions they build from and the call loop they run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from toolhub.core import CallResult, Progress

if TYPE_CHECKING:
    from toolhub.session import Session

PROGRESS_EVENT = "toolhub.progress"
"""The name progress travels under wherever a framework names its custom events."""

INSTALL_HINT = "install the adapters' frameworks with: pip install 'toolhub[integrations]'"


def function_definitions(
    session: Session, *, strict: bool, include_external: bool
) -> list[dict[str, Any]]:
    """Each tool as ``{name, description, parameters}`` (and ``strict``, when asked for):
    client names and client-named parameters, as the session lists them right now."""
    definitions = session.definitions("openai", include_external=include_external, strict=strict)
    return [entry["function"] for entry in definitions]


async def run_call(
    session: Session,
    name: str,
    arguments: Any,
    *,
    call_id: str,
    timeout: float | None,
    on_progress: Callable[[Progress], Awaitable[None]],
) -> CallResult:
    """Stream one call, awaiting ``on_progress`` for each progress item, and return its result
    (a ``CallResult`` always: toolhub answers a failed call with an error result). When the
    framework cancels the tool (its own timeout, a cancelled run), the call is cancelled too;
    else it would run on to its end, on a worker perhaps."""
    result: CallResult | None = None
    try:
        async for item in session.stream(name, arguments, call_id=call_id, timeout=timeout):
            if isinstance(item, CallResult):
                result = item
            else:
                await on_progress(item)
    except asyncio.CancelledError:
        await session.cancel(call_id)
        raise
    if result is None:
        raise RuntimeError(f"the stream of call {call_id} ended without a result")
    return result


def images(result: CallResult) -> list[tuple[str, str]]:
    """The result's inline images as ``(mime_type, base64 data)``: what belongs beside
    ``prompt_text`` in the model's view."""
    return [
        (b.mime_type, b.data)
        for b in result.content
        if b.type == "image" and b.data and b.mime_type
    ]
