"""The caller's ``execute_tool`` span: a refused call ends it with ``error.type`` = toolhub's
error kind and an error status (with phase spans, under its validation's span); by default
the validation has no span of its own, and the call's span, made once the call is prepared,
still starts before it and carries every attribute."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from tests.tracing.in_process import exporter, spans_of, tool_span
from toolhub import Session


def test_a_refused_call_carries_its_error_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter()
    monkeypatch.setattr("toolhub.tracing.calls.PHASES", True)
    with (
        Session.embedded(None, tmp_path, state_dir=tmp_path / "s") as session,
        trace.get_tracer("app").start_as_current_span("turn") as turn,
    ):
        result = session.call_sync("bash", {"command": 42})  # not a string: refused
    assert result.error is not None
    trace_id = turn.get_span_context().trace_id
    span = tool_span(trace_id, "bash")
    assert span.attributes["error.type"] == result.error.kind.value
    assert span.status.status_code is StatusCode.ERROR
    assert "toolhub.validate" in {s.name for s in spans_of(trace_id)}


def test_without_phase_spans_validation_has_no_span(tmp_path: Path) -> None:
    exporter()
    with (
        Session.embedded(None, tmp_path, state_dir=tmp_path / "s") as session,
        trace.get_tracer("app").start_as_current_span("turn") as turn,
    ):
        result = session.call_sync("bash", {"command": "true", "description": "t"})
    assert result.error is None
    trace_id = turn.get_span_context().trace_id
    span = tool_span(trace_id, "bash")
    assert span.attributes["gen_ai.tool.type"] == "function"
    assert span.attributes["gen_ai.tool.call.id"] == result.call_id
    assert span.attributes["toolhub.tool.id"].endswith("bash")
    assert span.attributes["toolhub.session.id"] == session.session_id
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time < span.end_time
    assert "toolhub.validate" not in {s.name for s in spans_of(trace_id)}


def test_leaving_a_traced_stream_early_closes_the_call_s_stream(tmp_path: Path) -> None:
    """The traced stream closes what it wraps: the call is cancelled, its span says so."""
    import asyncio

    exporter()

    async def leave_early(session: Session) -> str:
        with trace.get_tracer("app").start_as_current_span("turn") as turn:
            args = {"command": "echo started; sleep 30", "description": "t"}
            stream = session.stream("bash", args, call_id="left")
            async for _ in stream:
                break  # the first progress item: leave while the command runs
            await stream.aclose()
            # Closed now, not when the loop ends: the call is cancelled at once.
            record = await session.record("left") or {}
            assert record.get("status") == "cancelled", record
        return f"{turn.get_span_context().trace_id:032x}"

    with Session.embedded(None, tmp_path, state_dir=tmp_path / "s") as session:
        trace_id = asyncio.run(leave_early(session))
    span = tool_span(int(trace_id, 16), "bash")
    assert span.attributes["error.type"] == "cancelled"
