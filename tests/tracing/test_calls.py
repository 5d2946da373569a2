"""The caller's ``execute_tool`` span: a refused call ends it with ``error.type`` = toolhub's
error kind and an error status; without phase spans the validation has none of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from tests.tracing.in_process import exporter, spans_of, tool_span
from toolhub import Session


def test_a_refused_call_carries_its_error_kind(tmp_path: Path) -> None:
    exporter()
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


def test_without_phase_spans_validation_has_no_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter()
    monkeypatch.setattr("toolhub.tracing.calls.PHASES", False)
    with (
        Session.embedded(None, tmp_path, state_dir=tmp_path / "s") as session,
        trace.get_tracer("app").start_as_current_span("turn") as turn,
    ):
        result = session.call_sync("bash", {"command": "true", "description": "t"})
    assert result.error is None
    trace_id = turn.get_span_context().trace_id
    assert tool_span(trace_id, "bash").attributes["gen_ai.tool.type"] == "function"
    assert "toolhub.validate" not in {s.name for s in spans_of(trace_id)}
