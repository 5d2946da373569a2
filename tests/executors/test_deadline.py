"""Every wait for a call ends (``toolhub/executors/deadline.py``): in time with the call's own
result, at the deadline with a ``timeout`` that says what the record showed once the cancel
ended the call, or at the grace's end when even the cancel brings no answer. Both shapes of
the wait are held to it: a stream (``bounded``) and a result alone (``bounded_result``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from toolhub.core import CallResult, ErrorKind, Progress, ToolError, ToolOutput
from toolhub.executors import deadline
from toolhub.executors.deadline import bounded, bounded_result

RECORD = {"status": "running", "attempt": 1, "max_attempts": 3, "worker": "w1"}


class Call:
    """A call that answers when told: its result future, and the cancels it was sent."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[CallResult] = asyncio.get_running_loop().create_future()
        self.cancels: list[str] = []
        self.on_cancel: Callable[[], None] = lambda: None

    async def cancel(self, call_id: str) -> bool:
        self.cancels.append(call_id)
        self.on_cancel()
        return True

    def record(self, call_id: str) -> dict[str, Any]:
        return dict(RECORD)

    async def items(self) -> AsyncIterator[Progress | CallResult]:
        yield Progress.of_text("started")
        yield await self.answer


def ok() -> CallResult:
    return CallResult(
        name="slow", prompt_text="done", output=ToolOutput.plain_text("done"), call_id="c1"
    )


def cancelled() -> CallResult:
    return CallResult.failure("slow", ToolError(ErrorKind.CANCELLED, "cancelled"), call_id="c1")


async def wait(call: Call, shape: str, seconds: float) -> tuple[CallResult, float]:
    """The result the caller gets, and how long it waited."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    options: dict[str, Any] = {
        "name": "slow",
        "call_id": "c1",
        "seconds": seconds,
        "cancel": call.cancel,
        "record": call.record,
    }
    if shape == "result":
        result = await bounded_result(asyncio.shield(call.answer), **options)
    else:
        items = [item async for item in bounded(call.items(), **options)]
        assert isinstance(items[0], Progress) and len(items) == 2
        result = items[-1]
        assert isinstance(result, CallResult)
    return result, loop.time() - started


SHAPES = ["result", "stream"]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_result_in_time_is_the_calls_own(shape: str) -> None:
    async def go() -> None:
        call = Call()
        asyncio.get_running_loop().call_later(0.05, call.answer.set_result, ok())
        result, _ = await wait(call, shape, seconds=5)
        assert not result.is_error and call.cancels == []

    asyncio.run(go())


@pytest.mark.parametrize("shape", SHAPES)
def test_at_the_deadline_the_call_is_cancelled_and_the_caller_told_what_it_was(
    shape: str,
) -> None:
    async def go() -> None:
        call = Call()
        call.on_cancel = lambda: call.answer.set_result(cancelled())
        result, took = await wait(call, shape, seconds=0.2)
        assert call.cancels == ["c1"]
        assert result.error is not None and result.error.kind == ErrorKind.TIMEOUT
        assert "status running, attempt 1 of 3, on worker w1" in result.error.detail
        assert 0.2 <= took < 1.0

    asyncio.run(go())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_success_that_lands_after_the_cancel_is_kept(shape: str) -> None:
    async def go() -> None:
        call = Call()
        call.on_cancel = lambda: call.answer.set_result(ok())
        result, _ = await wait(call, shape, seconds=0.1)
        assert not result.is_error and call.cancels == ["c1"]

    asyncio.run(go())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_cancel_that_brings_no_answer_ends_the_wait_at_the_grace(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadline, "CANCEL_GRACE_SECONDS", 0.3)

    async def go() -> None:
        call = Call()
        result, took = await wait(call, shape, seconds=0.2)
        assert call.cancels == ["c1"]
        assert result.error is not None and result.error.kind == ErrorKind.TIMEOUT
        assert 0.5 <= took < 1.5

    asyncio.run(go())


def test_a_wait_that_ends_in_time_leaves_no_timer_behind() -> None:
    """The grace's timer is only scheduled once the deadline fired (``_Deadline.wait_scope``),
    and the deadline's own timer is cancelled as the wait ends."""

    async def go() -> None:
        loop = asyncio.get_running_loop()
        call = Call()
        call.answer.set_result(ok())
        await bounded_result(
            call.answer,
            name="slow",
            call_id="c1",
            seconds=60,
            cancel=call.cancel,
            record=call.record,
        )
        live = [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
        assert live == []

    asyncio.run(go())
