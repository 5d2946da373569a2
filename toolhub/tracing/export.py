"""Exporting toolhub's traces and metrics, configured by the standard ``OTEL_*`` variables.

toolhub's own processes (workers, the gateway, ``toolhub mcp``, ``toolhub up``'s children)
call ``setup_from_env`` at start. It installs the SDK's tracer and meter providers when an
exporter is asked for — ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` set (``otlp``,
``console``; ``none`` for off), or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, or the
signal's own ``..._TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT``) — and leaves the process
untraced otherwise (no exporter reaching for a collector that is not there), when the
``otel`` extra is absent, under ``OTEL_SDK_DISABLED=true``, or when the process already has a
provider. The protocol is ``OTEL_EXPORTER_OTLP_PROTOCOL`` (or the signal's own):
``http/protobuf`` (the default) or ``grpc``. Everything else is the SDK's own reading of the
standard variables: endpoint, headers, timeouts; the head sampler (``OTEL_TRACES_SAMPLER``,
``OTEL_TRACES_SAMPLER_ARG``; the default, ``parentbased_always_on``, follows the caller's
sampling decision); the batch processor's schedule (``OTEL_BSP_*``); the metric interval
(``OTEL_METRIC_EXPORT_INTERVAL``); ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``.
``shutdown`` flushes what is buffered (a worker calls it when it stops).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from .state import available, refresh

logger = logging.getLogger("toolhub.tracing")

_installed: list[Any] = []
#: The span queue's bound unless ``OTEL_BSP_MAX_QUEUE_SIZE`` says otherwise.
QUEUE_SIZE = 16384


def _wanted(signal: str) -> str | None:
    """The exporter ``signal`` (``traces``, ``metrics``) is to use, or None."""
    name = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    if name:
        first = name.split(",")[0].strip()
        return None if first == "none" else first
    endpoint = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return "otlp" if endpoint else None


def _protocol(signal: str) -> str:
    value = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    return value.strip().lower()


def setup_from_env(service_name: str) -> bool:
    """Install the SDK's providers as ``OTEL_*`` asks; True when traces are now exported."""
    if not available() or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    traces, metrics = _wanted("traces"), _wanted("metrics")
    if traces is None and metrics is None:
        return False
    try:
        from opentelemetry import metrics as otel_metrics
        from opentelemetry import trace as otel_trace
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        logger.warning("OTEL_* asks for an exporter but the SDK is not installed: toolhub[otel]")
        return False
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = hashed_resource(Resource.create({} if named else {"service.name": service_name}))
    tracing = False
    if traces is not None and isinstance(
        otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider
    ):
        exporter = _span_exporter(traces)
        if exporter is not None:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=resource)
            provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=_queue_size()))
            otel_trace.set_tracer_provider(provider)
            _installed.append(provider)
            tracing = True
    if metrics is not None and type(otel_metrics.get_meter_provider()).__name__.startswith(
        "_Proxy"
    ):
        reader = _metric_reader(metrics)
        if reader is not None:
            from opentelemetry.sdk.metrics import MeterProvider

            meters = MeterProvider(resource=resource, metric_readers=[reader])
            otel_metrics.set_meter_provider(meters)
            _installed.append(meters)
    refresh()
    return tracing


def hashed_resource(resource: Any) -> Any:
    """``resource`` with its hash computed once. The OTLP encoder groups a batch's spans by
    their resource, a dict lookup per span, and the SDK's ``Resource.__hash__`` serializes the
    attributes to JSON every time: a third of a span's encoding. A resource is immutable (its
    attributes cannot change once made), so the hash is the same every time; equality is the
    SDK's own."""
    from opentelemetry.sdk.resources import Resource

    class HashedResource(Resource):
        def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return HashedResource(resource.attributes, resource.schema_url)


def _queue_size() -> int | None:
    """The span queue's bound: ``OTEL_BSP_MAX_QUEUE_SIZE``, else ``QUEUE_SIZE`` (the SDK's
    2048 drops spans when a burst outruns one export; a queued span is a few kB)."""
    return None if os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") else QUEUE_SIZE


def _span_exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        logger.warning("OTEL_TRACES_EXPORTER=%s is not supported here: otlp, console, none", name)
        return None
    if _protocol("traces") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
            OTLPSpanExporter,
        )
    return OTLPSpanExporter()


def _metric_reader(name: str) -> Any:
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    exporter: Any
    if name == "console":
        exporter = ConsoleMetricExporter()
    elif name != "otlp":
        logger.warning("OTEL_METRICS_EXPORTER=%s is not supported here: otlp, console, none", name)
        return None
    elif _protocol("metrics") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HTTPMetricExporter,
        )

        exporter = HTTPMetricExporter()
    return PeriodicExportingMetricReader(exporter)


def shutdown() -> None:
    """Flush and stop the providers ``setup_from_env`` installed (idempotent)."""
    while _installed:
        provider = _installed.pop()
        try:
            provider.shutdown()
        except Exception:  # an exporter that cannot reach its collector: logged, not raised
            logger.warning("flushing telemetry failed", exc_info=True)
