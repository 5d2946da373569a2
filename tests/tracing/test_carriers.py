"""The W3C context taken in: only string fields within bounds; a malformed one starts a new
trace; sampling follows the caller's decision; without a provider nothing is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.tracing.in_process import exporter, spans_of
from toolhub import Session
from toolhub.core import Progress
from toolhub.tracing import carrier_of, carrier_of_asgi
from toolhub.tracing.worker import MAX_PROGRESS_EVENTS, WorkerCall

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = f"00-{TRACE}-b7ad6b7169203331-01"


def test_only_string_fields_within_bounds_are_taken() -> None:
    hostile = {"traceparent": {"nested": 1}, "tracestate": "x" * 5000, "baggage": "k=v"}
    assert carrier_of(hostile) == {}
    assert carrier_of(None) == {}
    assert carrier_of({"traceparent": PARENT, "other": "y"}) == {"traceparent": PARENT}
    raw = [(b"traceparent", PARENT.encode()), (b"baggage", b"k=v")]
    assert carrier_of_asgi(raw) == {"traceparent": PARENT}


def test_a_call_under_an_unsampled_parent_records_nothing(tmp_path: Path) -> None:
    kept = exporter()
    unsampled = f"00-{TRACE}-b7ad6b7169203331-00"
    with Session.embedded(None, tmp_path, state_dir=tmp_path / "s") as session:
        args = {"command": "echo $TRACEPARENT", "description": "t"}
        result = session.call_sync("bash", args, trace_context={"traceparent": unsampled})
        assert result.error is None
        # The decision travels on: the command's context says "not sampled" too.
        assert result.prompt_text.strip().endswith("-00")
        malformed = session.call_sync("bash", args, trace_context={"traceparent": "00-zz"})
    assert malformed.error is None
    assert spans_of(int(TRACE, 16)) == []
    assert kept.get_finished_spans()  # the malformed parent's call: a trace of its own


def test_progress_events_are_bounded() -> None:
    exporter()
    from toolhub.tracing.state import tracer

    found = tracer()
    assert found is not None
    request = SimpleNamespace(traceparent=PARENT)
    with WorkerCall(found, request, {"call_id": "c1", "tool": "t"}) as call:
        call.claim(lambda: SimpleNamespace(action="run", attempt=1))
        for _ in range(MAX_PROGRESS_EVENTS + 5):
            call.progress(Progress("text", text="a line"))
    (span,) = [s for s in spans_of(int(TRACE, 16)) if s.name == "toolhub.worker t"]
    assert len(span.events) == MAX_PROGRESS_EVENTS
    assert span.attributes["toolhub.progress.dropped"] == 5
    assert all(set(e.attributes) == {"toolhub.progress.kind"} for e in span.events)


def test_without_a_provider_no_opentelemetry_is_imported(tmp_path: Path) -> None:
    script = (
        "import sys, toolhub\n"
        f"s = toolhub.Session.embedded(None, {str(tmp_path)!r})\n"
        "assert s.call_sync('bash', {'command': 'echo $TRACEPARENT.', 'description': 'x'})"
        ".prompt_text.strip().endswith('\\n.')\n"
        "from toolhub.tracing import tracer\n"
        "assert tracer() is None\n"
        "assert 'opentelemetry.trace' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_the_plain_traceparent_is_read_as_the_propagator_reads_it() -> None:
    """toolhub's own form (version 00, no tracestate) is parsed directly; the propagator's
    reading is the reference, for it and for the forms handed to the propagator."""
    from opentelemetry import context, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from toolhub.tracing.carriers import parent_context

    exporter()
    propagator = TraceContextTextMapPropagator()
    zeros = "0" * 32
    for carrier in [
        {"traceparent": PARENT},
        {"traceparent": f"00-{TRACE}-b7ad6b7169203331-00"},
        {"traceparent": f"00-{zeros}-b7ad6b7169203331-01"},
        {"traceparent": f"00-{TRACE}-0000000000000000-01"},
        {"traceparent": f"01-{TRACE}-b7ad6b7169203331-01-later"},
        {"traceparent": PARENT.upper()},
        {"traceparent": PARENT + "-extra"},
        {"traceparent": PARENT, "tracestate": "k=v"},
        {},
    ]:
        ours = trace.get_current_span(parent_context(carrier)).get_span_context()
        reference = propagator.extract(carrier, context=context.Context())
        assert ours == trace.get_current_span(reference).get_span_context(), carrier
        assert ours.trace_state == trace.get_current_span(reference).get_span_context().trace_state


def test_the_traceparent_toolhub_writes_is_the_propagator_s() -> None:
    """``inject`` formats the carrier itself; the W3C propagator's is the reference (with and
    without a ``tracestate``, sampled or not), and the record's JSON of the message headers
    reads back as the headers."""
    import json

    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from toolhub.tracing.carriers import inject
    from toolhub.tracing.worker import ENQUEUED, headers_json

    propagator = TraceContextTextMapPropagator()
    for flags, state in [(1, None), (0, None), (1, trace.TraceState([("k", "v"), ("a", "b")]))]:
        found = trace.SpanContext(
            int(TRACE, 16), 0x00F067AA0BA902B7, True, trace.TraceFlags(flags), state
        )
        context = trace.set_span_in_context(trace.NonRecordingSpan(found))
        reference: dict[str, str] = {}
        propagator.inject(reference, context=context)
        assert inject(context) == reference
        headers = {**reference, ENQUEUED: 1765143000123456789}
        assert json.loads(headers_json(headers)) == headers
    assert json.loads(headers_json({"traceparent": PARENT, "tracestate": 'k="\\ü', ENQUEUED: 1}))
