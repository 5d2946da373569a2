"""Every wait for a call ends: a deadline on a call's stream, ending in a typed ``timeout``.

A caller that waits on a call whose answer nobody will ever write (a lost message, a hung
worker) must not wait forever. At the deadline the call is cancelled, so its own executor ends
it the ordinary way (a process group killed, a queued call marked cancelled) and the caller
gets a ``timeout`` error that says what the call's record last showed. If even the cancel gets
no terminal within a short grace, the wait ends anyway with the same error.

The deadline is the caller's ``timeout=`` when given, else what the executor derives from the
call's own limits (``Executor.deadline_seconds``; none for embedded calls, whose tools bound
their own runs).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from toolhub.core import CallResult, ErrorKind, Progress, ToolError
from toolhub.errors import ErrorCode

#: How long after the deadline's cancel the call may take to answer before the wait ends.
CANCEL_GRACE_SECONDS = 2.0

Canceller = Callable[[str], Coroutine[Any, Any, bool]]
RecordReader = Callable[[str], "dict[str, Any] | None"]


async def bounded(
    items: AsyncIterator[Progress | CallResult],
    *,
    name: str,
    call_id: str,
    seconds: float,
    cancel: Canceller,
    record: RecordReader,
) -> AsyncIterator[Progress | CallResult]:
    """``items`` until their terminal, or a ``timeout`` result ``seconds`` from now."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    fired = False
    at_deadline: dict[str, Any] | None = None
    tasks: list[asyncio.Task[bool]] = []

    def fire() -> None:
        # What the record shows now, before the cancel changes it, is what the caller is told.
        nonlocal fired, at_deadline
        fired = True
        at_deadline = _safe(record, call_id)
        tasks.append(loop.create_task(cancel(call_id)))

    timer = loop.call_at(deadline, fire)
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline + CANCEL_GRACE_SECONDS):
                    item = await anext(items)
            except StopAsyncIteration:
                return
            except TimeoutError:
                yield timeout_result(name, call_id, seconds, at_deadline)
                return
            if isinstance(item, CallResult):
                if fired and item.is_error:
                    item = timeout_result(name, call_id, seconds, at_deadline)
                yield item
                return
            yield item
    finally:
        timer.cancel()
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError, asyncio.CancelledError, StopAsyncIteration):
                await aclose()


def timeout_result(
    name: str, call_id: str, seconds: float, record: dict[str, Any] | None
) -> CallResult:
    shown = describe_record(record)
    error = ToolError(
        ErrorKind.TIMEOUT,
        f"No answer within {seconds:g}s, so toolhub cancelled the call. {shown}",
        {
            "code": ErrorCode.CALL_TIMEOUT,
            "timeout_s": seconds,
            "status": (record or {}).get("status", "unknown"),
            "attempt": (record or {}).get("attempt"),
        },
    )
    return CallResult.failure(name, error, tool_id=(record or {}).get("tool"), call_id=call_id)


def describe_record(record: dict[str, Any] | None) -> str:
    """What a call's record last showed, in a sentence."""
    if not record:
        return "Its record could not be read, so its last state is unknown."
    parts = [f"status {record.get('status', 'unknown')}"]
    attempt = record.get("attempt")
    if attempt:
        limit = record.get("max_attempts")
        parts.append(f"attempt {attempt}" + (f" of {limit}" if limit else ""))
    if record.get("worker"):
        parts.append(f"on worker {record['worker']}")
    if record.get("seq"):
        parts.append(f"{record['seq']} event(s) so far")
    return "Its record last showed " + ", ".join(parts) + "."


def _safe(record: RecordReader, call_id: str) -> dict[str, Any] | None:
    try:
        return record(call_id)
    except Exception:  # the store may be what failed: the answer says the state is unknown
        return None
