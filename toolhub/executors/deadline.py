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
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from toolhub.core import CallResult, ErrorKind, Progress, ToolError
from toolhub.errors import ErrorCode

#: How long after the deadline's cancel the call may take to answer before the wait ends.
CANCEL_GRACE_SECONDS = 2.0

Canceller = Callable[[str], Coroutine[Any, Any, bool]]
RecordReader = Callable[[str], "dict[str, Any] | None"]


class _Deadline:
    """The deadline of one wait. At ``seconds`` it notes what the call's record shows (what
    the caller is told) and cancels the call; the wait itself ends ``CANCEL_GRACE_SECONDS``
    later at most, through the ``asyncio.Timeout`` it is given as ``scope`` (created without
    a time, so a wait that ends in time never schedules a second timer)."""

    __slots__ = (
        "_cancel",
        "_record",
        "at",
        "at_deadline",
        "call_id",
        "fired",
        "name",
        "scope",
        "seconds",
        "tasks",
    )

    def __init__(
        self, name: str, call_id: str, seconds: float, cancel: Canceller, record: RecordReader
    ) -> None:
        self.name = name
        self.call_id = call_id
        self.seconds = seconds
        self._cancel = cancel
        self._record = record
        self.at = asyncio.get_running_loop().time() + seconds
        self.fired = False
        self.at_deadline: dict[str, Any] | None = None
        self.tasks: list[asyncio.Task[bool]] = []
        self.scope: asyncio.Timeout | None = None

    def start(self) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_at(self.at, self._fire)

    def _fire(self) -> None:
        # What the record shows now, before the cancel changes it, is what the caller is told.
        self.fired = True
        self.at_deadline = _safe(self._record, self.call_id)
        self.tasks.append(asyncio.get_running_loop().create_task(self._cancel(self.call_id)))
        if self.scope is not None:
            self.scope.reschedule(self.grace_end)

    @property
    def grace_end(self) -> float:
        return self.at + CANCEL_GRACE_SECONDS

    def wait_scope(self) -> asyncio.Timeout:
        """The timeout one wait runs under: none yet, or the grace's end once fired."""
        self.scope = asyncio.timeout_at(self.grace_end if self.fired else None)
        return self.scope

    def settle(self, result: CallResult) -> CallResult:
        """The call's own result, or ``timeout`` when the deadline's cancel is what ended it."""
        return self.timeout() if self.fired and result.is_error else result

    def timeout(self) -> CallResult:
        return timeout_result(self.name, self.call_id, self.seconds, self.at_deadline)


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
    deadline = _Deadline(name, call_id, seconds, cancel, record)
    timer = deadline.start()
    try:
        while True:
            try:
                async with deadline.wait_scope():
                    item = await anext(items)
            except StopAsyncIteration:
                return
            except TimeoutError:
                yield deadline.timeout()
                return
            finally:
                deadline.scope = None
            if isinstance(item, CallResult):
                yield deadline.settle(item)
                return
            yield item
    finally:
        timer.cancel()
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError, asyncio.CancelledError, StopAsyncIteration):
                await aclose()


async def bounded_result(
    waiting: Awaitable[CallResult],
    *,
    name: str,
    call_id: str,
    seconds: float,
    cancel: Canceller,
    record: RecordReader,
) -> CallResult:
    """``bounded`` for a wait on the result alone (``Executor.result``): one coroutine
    awaited, no generator between the caller and the call."""
    deadline = _Deadline(name, call_id, seconds, cancel, record)
    timer = deadline.start()
    try:
        async with deadline.wait_scope():
            result = await waiting
    except TimeoutError:
        return deadline.timeout()
    finally:
        timer.cancel()
    return deadline.settle(result)


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
