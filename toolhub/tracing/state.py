"""Whether this process traces, and its tracer and meter when it does.

Tracing is on when OpenTelemetry's API is installed (the ``otel`` extra) and a real tracer
provider is the global one: the one ``toolhub.tracing.setup_from_env`` installs in toolhub's
own processes when an ``OTEL_*`` variable asks for an exporter, or the application's own (a
library does not configure the SDK for its host program). ``OTEL_SDK_DISABLED=true`` turns it
off. Every other case is the no-op path, which every call takes: ``tracer()`` answers None
from a module global and, while off, looks at the global provider again at most once a
second (an application may install its provider after making a session). OpenTelemetry is
never imported here: a process that has not imported ``opentelemetry.trace`` has no provider
set, so toolhub's import time does not grow by the API's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter
    from opentelemetry.trace import Tracer

#: While tracing is off, how often the global tracer provider is looked at again.
RECHECK_SECONDS = 1.0
#: The instrumentation scope of every span and instrument toolhub makes.
SCOPE = "toolhub"
#: Whether the phases of a call get child spans of their own (validation, enqueue, queue wait,
#: claim, run, delivery): ``TOOLHUB_TRACE_PHASES=1``. By default each side of a call has one
#: span (the caller's ``execute_tool``, the worker's ``toolhub.worker``) with the phases as its
#: events and attributes: a span costs the Python SDK tens of microseconds to make and as much
#: again to encode for export, most of tracing's cost on a short call (docs/benchmarks.md).
PHASES = os.environ.get("TOOLHUB_TRACE_PHASES", "0").strip().lower() in ("1", "true", "yes")

_tracer: Tracer | None = None
_next_check = 0.0
_TRACE_API = "opentelemetry.trace"
_CONTEXT_API = "opentelemetry.context"
_modules = sys.modules
_monotonic = time.monotonic


def available() -> bool:
    """Whether the OpenTelemetry API is installed (the ``otel`` extra)."""
    return "opentelemetry.trace" in sys.modules or (
        importlib.util.find_spec("opentelemetry") is not None
    )


def tracer() -> Tracer | None:
    """The tracer when tracing is on in this process, else None (the no-op path)."""
    found = _tracer
    if found is not None or _TRACE_API not in _modules:
        return found
    now = _monotonic()
    if now < _next_check:
        return None
    return _check(now)


def _check(now: float) -> Tracer | None:
    global _tracer, _next_check
    _next_check = now + RECHECK_SECONDS
    otel_trace: Any = sys.modules.get(_TRACE_API)
    if otel_trace is None or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    provider = otel_trace.get_tracer_provider()
    if isinstance(provider, otel_trace.ProxyTracerProvider | otel_trace.NoOpTracerProvider):
        return None
    _tracer = provider.get_tracer(SCOPE)
    return _tracer


def refresh() -> None:
    """Look at the global tracer provider again on the next call (after one was installed)."""
    global _tracer, _next_check
    _tracer = None
    _next_check = 0.0


def meter() -> Meter | None:
    """The meter of toolhub's OTLP metrics (the global meter provider's; a no-op until one is
    installed), or None without the API."""
    if not available():
        return None
    from opentelemetry import metrics as otel_metrics

    return otel_metrics.get_meter(SCOPE)


def api() -> Any:
    """``opentelemetry.trace``, for the modules of this package (only called when on)."""
    return sys.modules.get(_TRACE_API) or importlib.import_module(_TRACE_API)


def context_api() -> Any:
    """``opentelemetry.context`` (only called when on): a module lookup, not an import
    statement, on a call's path."""
    return sys.modules.get(_CONTEXT_API) or importlib.import_module(_CONTEXT_API)
