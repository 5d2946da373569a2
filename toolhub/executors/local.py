"""The embedded executor: runs the tool pipeline in the caller's process.

Blocking tools run in a worker thread so the event loop stays free; plain sync tools called
through ``call_sync`` run inline, with no thread hand-over, which keeps an embedded call cheap.
Cancellation never waits on the tool: the call's token fires its kill callbacks at once and the
caller gets its ``cancelled`` terminal immediately, whatever the tool is still doing. A call runs
inside its stream: a consumer that leaves before the result (closes the stream, or its task is
cancelled, as a framework's tool timeout does) cancels it, and its record says so.

Each call runs inside its own usage meter (``metered.py``): every step of the tool is started
with the meter open, so what the tool runs (in this task, a task it starts, or a thread) charges
it; the executor charges the output it passes on, and the call's record shows the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from toolhub.core import (
    CallResult,
    CancelToken,
    ErrorKind,
    Progress,
    ToolError,
    closing,
    drain,
)
from toolhub.core.usage import metered_call, metering
from toolhub.errors import ErrorCode
from toolhub.hooks import SessionHooks
from toolhub.toolset import Prepared, ToolSet

from .metered import Metered

MAX_RECORDS = 10_000
FOLLOW_POLL_SECONDS = 0.02
#: The cancel reason of a call whose consumer stopped reading before its result.
CONSUMER_GONE = "its caller stopped waiting for it"


class LocalExecutor:
    def __init__(self, toolset: ToolSet, hooks: SessionHooks | None = None) -> None:
        """``hooks``: the session's, whose ``after`` stage this executor applies before it
        keeps or hands on any item; None where another component does (a worker's emitter)."""
        self.toolset = toolset
        self.hooks = hooks
        self._running: dict[str, CancelToken] = {}
        #: The latest ``MAX_RECORDS`` calls' records by call id: (entry, started, finished,
        #: result, metered, call id).
        self.records: dict[str, tuple[Any, ...]] = {}
        #: Every record written, oldest first: eviction drops the oldest that is still current.
        #: A dict and a deque cost less per call than an ``OrderedDict``, whose per-key links
        #: are allocated on every call and freed, cold, 10,000 calls later.
        self._writes: deque[tuple[Any, ...]] = deque()

    def call_sync(self, prepared: Prepared) -> CallResult | None:
        if not prepared.entry.handle.is_sync:
            return None
        started = time.time()
        metered = Metered()
        result = metered_call(metered.meter, self.toolset.execute_sync, prepared)
        if self.hooks is not None:
            result = self.hooks.after(prepared).result(result)
        metered.charge_output(result)
        metered.fold()
        self._record(prepared, result, started, metered)
        return result

    async def result(self, prepared: Prepared) -> CallResult:
        async with closing(self.stream(prepared)) as items:
            return await drain(items)

    async def stream(
        self, prepared: Prepared, *, cancel_on_exit: bool = True
    ) -> AsyncIterator[Progress | CallResult]:
        """The call's items. It runs inside this stream: whatever ``cancel_on_exit`` says, a
        consumer that leaves before the result cancels it."""
        call_id = prepared.ctx.call_id
        token = prepared.ctx.cancel
        self._running[call_id] = token
        started = time.time()
        self._record(prepared, None, started)
        loop = asyncio.get_running_loop()
        cancelled: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not cancelled.done():
                cancelled.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        remove = token.on_cancel(wake)
        result: CallResult | None = None
        metered = Metered()
        after = self.hooks.after(prepared) if self.hooks is not None else None
        try:
            async with closing(self._race(prepared, cancelled, metered)) as raw:
                async for step in raw:
                    for item in [step] if after is None else after.items(step):
                        metered.charge_output(item)
                        if isinstance(item, CallResult):
                            result = item
                            metered.fold()
                        yield item
        finally:
            remove()
            self._running.pop(call_id, None)
            if result is None:
                # The consumer left before the result (it closed the stream, or its task was
                # cancelled): the call runs inside this stream, so it ends here, cancelled.
                token.cancel(CONSUMER_GONE)
                result = _cancelled(prepared)
            metered.fold()
            self._record(prepared, result, started, metered)

    async def _race(
        self, prepared: Prepared, cancelled: asyncio.Future[None], metered: Metered
    ) -> AsyncIterator[Progress | CallResult]:
        if prepared.entry.handle.is_sync:
            source: AsyncIterator[Progress | CallResult] = _once(
                asyncio.to_thread(self.toolset.execute_sync, prepared)
            )
        else:
            source = self.toolset.execute(prepared)
        step: asyncio.Future[Any] | None = None
        try:
            while True:
                step = _step(source, metered)
                waiting: set[asyncio.Future[Any]] = {step, cancelled}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if cancelled.done():
                    async with closing(_wind_down(source, step, prepared, metered)) as ending:
                        async for item in ending:
                            yield item
                    return
                try:
                    item = step.result()
                except StopAsyncIteration:
                    yield _missing_terminal(prepared)
                    return
                yield item
                if isinstance(item, CallResult):
                    return
        finally:
            if step is not None and not step.done():
                step.cancel()  # its consumer left mid-step: the tool's task must not run on
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(RuntimeError, asyncio.CancelledError):
                    await aclose()

    async def cancel(self, call_id: str) -> bool:
        token = self._running.get(call_id)
        if token is None:
            return False
        token.cancel()
        return True

    async def follow(
        self, call_id: str, after_seq: int = 0
    ) -> AsyncIterator[Progress | CallResult]:
        """An embedded call keeps no event log: this waits for the call's result and yields
        it (progress went to the caller that started it)."""
        while True:
            found = self.records.get(call_id)
            if found is None:
                yield unknown_call(call_id)
                return
            if found[3] is not None:
                yield found[3]
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)

    def deadline_seconds(self, workload: str | None) -> float | None:
        return None

    def end(self) -> None:
        """Nothing is stored beyond this process: closing ends it."""

    def close(self) -> None:
        for token in list(self._running.values()):
            token.cancel("session closed")

    def _record(
        self,
        prepared: Prepared,
        result: CallResult | None,
        started: float,
        metered: Metered | None = None,
    ) -> None:
        """Keep what ``record`` reports; cheap, because it runs on every call. The calls
        written last are kept: a call's second write (its result, after its start) counts as
        its latest, like a call id used again."""
        call_id = prepared.ctx.call_id
        records, writes = self.records, self._writes
        finished = time.time() if result else None
        record = (prepared.entry, started, finished, result, metered, call_id)
        rewrite = call_id in records
        records[call_id] = record
        writes.append(record)
        if rewrite:  # its earlier write stays in ``writes``, superseded, until it is dropped
            if len(writes) > 2 * MAX_RECORDS:
                self._writes = deque(w for w in writes if records.get(w[5]) is w)
        elif len(records) > MAX_RECORDS:
            while True:
                oldest = writes.popleft()
                if records.get(oldest[5]) is oldest:
                    del records[oldest[5]]
                    return

    def record(self, call_id: str) -> dict[str, Any] | None:
        """The call record (same shape as the distributed one), or None when unknown."""
        found = self.records.get(call_id)
        if found is None:
            return None
        entry, started, finished, result, metered, _ = found
        record = {
            "call_id": call_id,
            "session_id": self.toolset.session_id,
            "tool": entry.fq_id,
            "name": entry.client_name,
            "status": "running" if result is None else _status(result),
            "attempt": 1,
            "started_at": started,
            "finished_at": finished,
            "result": None if result is None else result.to_dict(),
        }
        if result is not None and metered is not None:
            record.update(metered.figures().as_record())
        return record


def _status(result: CallResult) -> str:
    if result.error is None:
        return "succeeded"
    return "cancelled" if result.error.kind == "cancelled" else "failed"


async def _once(awaitable: Any) -> AsyncIterator[CallResult]:
    yield await awaitable


def _step(source: AsyncIterator[Progress | CallResult], metered: Metered) -> asyncio.Future[Any]:
    """The tool's next step, as a task started with the call's meter open: the task (and any
    thread or task it starts) charges it, and nothing here holds the meter across a ``yield``."""
    with metering(metered.meter):
        return asyncio.ensure_future(anext(source))


#: How long a cancelled tool may take to say how it ended (bash: "killed after 2.1 s" and the
#: output so far) before the executor answers for it. Cancellation is never longer than this.
CANCEL_GRACE_S = 0.5


async def _wind_down(
    source: AsyncIterator[Progress | CallResult],
    step: asyncio.Future[Any],
    prepared: Prepared,
    metered: Metered,
) -> AsyncIterator[Progress | CallResult]:
    """After a cancel: the tool's own cancelled result when it gives one within the grace
    (its last output first), else the executor's. A cancel wins even when the tool's step
    completed normally in the same instant: the terminal is a ``cancelled`` one either way."""
    deadline = asyncio.get_running_loop().time() + CANCEL_GRACE_S
    while True:
        left = deadline - asyncio.get_running_loop().time()
        done, _ = await asyncio.wait({step}, timeout=max(left, 0))
        if not done:
            step.cancel()
            break
        try:
            item = step.result()
        except (StopAsyncIteration, Exception):
            break
        if isinstance(item, CallResult):
            if item.error is not None and item.error.kind == ErrorKind.CANCELLED:
                yield item
                return
            break
        yield item
        step = _step(source, metered)
    yield _cancelled(prepared)


def _cancelled(prepared: Prepared) -> CallResult:
    return CallResult.failure(
        prepared.name,
        ToolError.cancelled(f"The call was cancelled ({prepared.ctx.cancel.reason})."),
        tool_id=prepared.entry.fq_id,
        call_id=prepared.ctx.call_id,
    )


def unknown_call(call_id: str) -> CallResult:
    return CallResult.failure(
        "",
        ToolError.not_found(f"No call with id {call_id!r} is known (never made, or expired)."),
        call_id=call_id,
    )


def _missing_terminal(prepared: Prepared) -> CallResult:
    return CallResult.failure(
        prepared.name,
        ToolError.custom(
            ErrorCode.STREAM_NO_TERMINAL, f"{prepared.entry.fq_id} ended without a result"
        ),
        tool_id=prepared.entry.fq_id,
        call_id=prepared.ctx.call_id,
    )
