"""A traced program, run as a command inside a call's sandbox: it joins the call's trace
through the ``TRACEPARENT`` its environment carries and exports its own span
(``child.work``) with the real OTLP/HTTP exporter to the endpoint its argument names.

    python traced_child.py http://127.0.0.1:PORT

Prints ``child=<trace id>-<span id>`` of its span, so the test can match the exported one.
"""

from __future__ import annotations

import os
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator


def main(endpoint: str) -> int:
    provider = TracerProvider(resource=Resource.create({"service.name": "traced-child"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30))
    )
    carrier = {"traceparent": os.environ.get("TRACEPARENT", "")}
    if os.environ.get("TRACESTATE"):
        carrier["tracestate"] = os.environ["TRACESTATE"]
    parent = TraceContextTextMapPropagator().extract(carrier)
    with provider.get_tracer("traced-child").start_as_current_span("child.work", parent) as span:
        span.set_attribute("child.pid", os.getpid())
        found = span.get_span_context()
    provider.shutdown()
    print(f"child={found.trace_id:032x}-{found.span_id:016x}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
