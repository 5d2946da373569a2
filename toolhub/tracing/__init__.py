"""OpenTelemetry traces and metrics of toolhub calls, with the GenAI conventions' names.

A no-op unless the ``otel`` extra is installed and a tracer provider is in place (``state``):
every entry point answers from one module global then. ``calls`` is the caller's
``execute_tool`` span, ``worker`` the worker's spans continuing it from Celery's headers,
``carriers`` the W3C context in and out (gateway headers, MCP ``_meta``, a command's
``TRACEPARENT``), ``metrics`` the OTLP instruments, ``export`` the ``OTEL_*`` configuration.
docs/tracing.md describes the spans and the settings.
"""

from .carriers import TraceContext, captured, carrier_of, carrier_of_asgi, command_env
from .export import setup_from_env, shutdown
from .state import refresh, tracer

__all__ = [
    "TraceContext",
    "captured",
    "carrier_of",
    "carrier_of_asgi",
    "command_env",
    "refresh",
    "setup_from_env",
    "shutdown",
    "tracer",
]
