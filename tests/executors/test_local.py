"""The embedded executor's calls, through a real embedded session."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path

import pytest

from tests.sample_tools import ALL, EchoArgs, EchoOutput
from toolhub import Session, Tool, ToolContext, ToolKind, ToolSetBuilder
from toolhub.executors import LocalExecutor, local

CONTEXTS: list[weakref.ref[ToolContext]] = []


class Remember(Tool[EchoArgs, EchoOutput]):
    """Echoes, and keeps a weak reference to each call's context."""

    id = "remember"
    kind = ToolKind.OTHER

    def run(self, ctx: ToolContext, args: EchoArgs) -> EchoOutput:
        CONTEXTS.append(weakref.ref(ctx))
        return EchoOutput(echoed=args.text)


def test_a_finished_embedded_call_is_freed_without_the_garbage_collector(tmp_path: Path) -> None:
    """A call's context, its dispatcher and its cancel token form no reference cycle: with the
    collector off, each is gone as soon as its call returned. (A cycle left every call's objects
    to a young collection, and each such collection walked what the kept records hold.)"""
    builder = ToolSetBuilder(plugins=False).register(Remember)
    config = {"tools": [{"id": "Main:remember"}]}
    with Session.embedded(config, tmp_path, state_dir=tmp_path / ".state", builder=builder) as s:
        s.call_sync("remember", {"text": "warm"})
        CONTEXTS.clear()
        gc.collect()
        gc.disable()
        try:
            for i in range(20):
                assert s.call_sync("remember", {"text": str(i)}).output.value == {"echoed": str(i)}
                assert CONTEXTS[-1]() is None
        finally:
            gc.enable()
    assert len(CONTEXTS) == 20


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> LocalExecutor:
    """An executor of the sample tools that keeps 4 records."""
    monkeypatch.setattr(local, "MAX_RECORDS", 4)
    toolset = (
        ToolSetBuilder(plugins=False)
        .register(*ALL)
        .build({"tools": [{"id": "Main:echo"}, {"id": "Main:count"}]})
    )
    return LocalExecutor(toolset)


def call(executor: LocalExecutor, call_id: str) -> None:
    prepared = executor.toolset.prepare("echo", {"text": call_id}, call_id)
    assert executor.call_sync(prepared) is not None


def test_the_records_kept_are_the_latest_calls(executor: LocalExecutor) -> None:
    for i in range(10):
        call(executor, f"c{i}")
    assert list(executor.records) == ["c6", "c7", "c8", "c9"]
    assert executor.record("c5") is None
    found = executor.record("c9")
    assert found is not None and found["status"] == "succeeded"
    assert found["result"]["prompt_text"] == "echo: c9"


def test_a_streamed_calls_result_counts_as_its_latest_write(executor: LocalExecutor) -> None:
    """A call started before others and finished after them is kept as long as one that
    started when it finished, like the ``OrderedDict`` moved to its end did."""

    async def go() -> None:
        prepared = executor.toolset.prepare("count", {"n": 1}, "s")
        items = executor.stream(prepared)
        await anext(items)  # started: its first write
        for name in ("a", "b", "c"):
            call(executor, name)
        assert executor.record("s") is not None
        assert executor.record("s")["status"] == "running"  # type: ignore[index]
        async for _ in items:
            pass
        for name in ("d", "e", "f"):
            call(executor, name)

    asyncio.run(go())
    assert sorted(executor.records) == ["d", "e", "f", "s"]
    assert executor.record("s")["status"] == "succeeded"  # type: ignore[index]


def test_a_call_id_used_again_and_again_keeps_one_record_and_bounded_writes(
    executor: LocalExecutor,
) -> None:
    for _ in range(50):
        call(executor, "same")
    call(executor, "other")
    assert sorted(executor.records) == ["other", "same"]
    assert len(executor._writes) <= 2 * local.MAX_RECORDS
