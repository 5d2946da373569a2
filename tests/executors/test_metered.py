"""The embedded executor opens a usage meter around every call: what the tool charges (from
its own thread or task, as the process backend does for a command), its wall time and the bytes
of its output are in the call's record; a call made inside another call counts its CPU and
memory for that call too, and its output only for itself."""

from __future__ import annotations

from pathlib import Path

from tests.distributed.plugin_usage import CONFIG, usage_builder
from toolhub import Session
from toolhub.core import CallResult, OutputDeltas, Progress
from toolhub.core.usage import UsageMeter, metering
from toolhub.executors.metered import Metered, output_bytes

FIGURES = ("cpu_seconds", "wall_seconds", "peak_memory_bytes", "output_bytes")


def test_output_bytes_counts_progress_and_result_text_in_utf8() -> None:
    assert output_bytes(Progress.of_text("héllo")) == 6
    assert output_bytes(Progress.custom("tick", {"i": 1})) == 0
    deltas = OutputDeltas().feed("ünïcode out\n".encode())
    assert sum(output_bytes(item) for item in deltas) == len("ünïcode out\n".encode())
    result = CallResult(name="t", prompt_text="abc")
    assert output_bytes(result) == 3


def test_a_nested_call_folds_cpu_and_memory_into_the_outer_one_but_not_output() -> None:
    outer = UsageMeter()
    with metering(outer):
        inner = Metered()
    inner.meter.charge(cpu_seconds=0.5, peak_memory_bytes=100, output_bytes=7)
    inner.fold()
    inner.fold()  # once only
    used = outer.usage()
    assert (used.cpu_seconds, used.peak_memory_bytes, used.output_bytes) == (0.5, 100, 0)
    assert inner.figures().output_bytes == 7 and inner.figures().wall_seconds >= 0


def test_an_embedded_call_fills_its_meter_inline_and_streaming(tmp_path: Path) -> None:
    session = Session.embedded(CONFIG, tmp_path, builder=usage_builder(), state_dir=tmp_path / "s")
    try:
        args = {"cpu_seconds": 1.25, "peak_memory_bytes": 4096, "text": "héllo"}
        inline = session.call_sync("charge", args, call_id="c1")
        assert not inline.is_error, inline.prompt_text
        record = session.record_sync("c1")
        assert record is not None
        assert record["cpu_seconds"] == 1.25
        assert record["peak_memory_bytes"] == 4096
        assert record["output_bytes"] == len(inline.prompt_text.encode())
        assert record["wall_seconds"] >= 0

        items = list(session.stream_sync("charge_stream", {**args, "chunks": 3}, call_id="c2"))
        result = items[-1]
        assert isinstance(result, CallResult) and not result.is_error, result
        streamed = session.record_sync("c2")
        assert streamed is not None
        assert streamed["cpu_seconds"] == 1.25 and streamed["peak_memory_bytes"] == 4096
        assert streamed["output_bytes"] == 3 * 6 + len(result.prompt_text.encode())
        assert all(isinstance(streamed[name], int | float) for name in FIGURES)
    finally:
        session.close()


def test_a_call_that_never_finished_has_no_figures_yet_and_a_failed_one_has(
    tmp_path: Path,
) -> None:
    session = Session.embedded(CONFIG, tmp_path, builder=usage_builder(), state_dir=tmp_path / "s")
    try:
        failed = session.call_sync("charge", {"cpu_seconds": 0.5, "fail": True}, call_id="f1")
        assert failed.is_error
        record = session.record_sync("f1")
        assert record is not None and record["status"] == "failed"
        assert record["cpu_seconds"] == 0.5
        assert record["output_bytes"] == len(failed.prompt_text.encode())
    finally:
        session.close()
