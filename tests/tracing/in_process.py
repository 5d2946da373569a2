"""This test process's own tracer provider: the real SDK, its finished spans kept in memory.

A process has one global tracer provider, set once; the tests that trace in-process share
this one and pick their spans out by trace id."""

from __future__ import annotations

import functools

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolhub.tracing import refresh


@functools.cache
def exporter() -> InMemorySpanExporter:
    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    trace.set_tracer_provider(provider)
    refresh()
    return kept


def spans_of(trace_id: int) -> list[ReadableSpan]:
    return [s for s in exporter().get_finished_spans() if s.context.trace_id == trace_id]


def tool_span(trace_id: int, name: str) -> ReadableSpan:
    (found,) = [
        s
        for s in spans_of(trace_id)
        if s.name == f"execute_tool {name}" and s.instrumentation_scope.name == "toolhub"
    ]
    return found


def parent_of(span: ReadableSpan, trace_id: int) -> ReadableSpan:
    assert span.parent is not None
    (found,) = [s for s in spans_of(trace_id) if s.context.span_id == span.parent.span_id]
    return found
