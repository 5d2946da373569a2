"""``closing`` and ``drain``: how the layers above consume a call's stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from toolhub.core import CallResult, Progress, closing, drain


def _result() -> CallResult:
    return CallResult(name="t", prompt_text="done")


def test_closing_runs_a_generators_cleanup_when_its_reader_stops_early():
    cleaned: list[str] = []

    async def items() -> AsyncIterator[int]:
        try:
            for i in range(10):
                yield i
        finally:
            cleaned.append("closed")

    async def first() -> int:
        async with closing(items()) as stream:
            async for item in stream:
                return item
        raise AssertionError("unreachable")

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(first()) == 0
        # Closed within the block, on the running loop: no task left for the collector.
        assert cleaned == ["closed"]
        assert not asyncio.all_tasks(loop)
    finally:
        loop.close()


def test_closing_passes_an_iterator_without_aclose_through():
    class Numbers:
        def __init__(self) -> None:
            self.left = [1, 2]

        def __aiter__(self) -> Numbers:
            return self

        async def __anext__(self) -> int:
            if not self.left:
                raise StopAsyncIteration
            return self.left.pop(0)

    async def read() -> list[int]:
        async with closing(Numbers()) as numbers:
            return [n async for n in numbers]

    assert asyncio.run(read()) == [1, 2]


def test_drain_hands_progress_on_and_returns_the_result():
    seen: list[Progress] = []

    async def stream() -> AsyncIterator[Progress | CallResult]:
        yield Progress(kind="custom", text="a")
        yield _result()

    result = asyncio.run(drain(stream(), seen.append))
    assert result.prompt_text == "done" and [p.text for p in seen] == ["a"]


def test_drain_refuses_a_stream_without_a_result():
    async def stream() -> AsyncIterator[Progress | CallResult]:
        yield Progress(kind="custom", text="a")

    with pytest.raises(RuntimeError, match="without a CallResult"):
        asyncio.run(drain(stream()))


def test_a_failure_of_no_tool_reads_as_its_detail(tmp_path) -> None:
    """Following a call id nobody knows: no ``Tool `` failed`` (issue 40)."""
    from toolhub import Session

    with Session.embedded(None, tmp_path) as session:
        (result,) = list(session.follow_sync("call-nobody-made"))
    assert isinstance(result, CallResult) and result.is_error
    assert result.prompt_text.startswith("No call with id 'call-nobody-made' is known")
