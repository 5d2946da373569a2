"""W3C trace context in and out: gateway headers, MCP ``_meta``, Celery headers, a command's
environment.

Only ``traceparent`` and ``tracestate`` cross toolhub's edges (the W3C Trace Context
propagator, not the process's global one: baggage from a caller is not taken). What comes in
is untrusted — a tenant's client or a model-facing MCP client writes it — so a value that is
not a string, or is longer than the bounds below, is dropped, and the propagator ignores a
malformed one: the call then starts a trace of its own, and nothing else changes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .state import api, available, context_api, tracer

if TYPE_CHECKING:
    from opentelemetry.context import Context

#: The W3C Trace Context fields, as header and ``_meta`` names.
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
#: Longest values taken (a traceparent is 55 characters; W3C asks to pass at least 512 of a
#: tracestate).
MAX_LENGTHS = {TRACEPARENT: 128, TRACESTATE: 1024}

#: The ``traceparent`` toolhub writes (``inject``): version 00, lower-case, nothing after it.
PLAIN_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")

#: The trace flags byte in hex, by value.
_HEX = tuple(f"{value:02x}" for value in range(256))
#: The trace flags a ``traceparent`` names (the W3C propagator makes one per message).
_FLAGS: dict[str, Any] = {}

#: A W3C trace context carrier: ``traceparent`` and optionally ``tracestate``.
TraceContext = Mapping[str, str]


def carrier_of(source: Mapping[str, Any] | None) -> dict[str, str]:
    """The trace context fields of ``source`` (headers, ``_meta``, Celery's request headers)
    that are strings within bounds; the rest is dropped."""
    if not source:
        return {}
    found: dict[str, str] = {}
    for name, bound in MAX_LENGTHS.items():
        value = source.get(name)
        if isinstance(value, str) and 0 < len(value) <= bound:
            found[name] = value
    return found


def carrier_of_asgi(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """``carrier_of`` over an ASGI scope's raw headers (lower-case names)."""
    wanted: dict[str, Any] = {}
    for name, value in headers:
        if name in (b"traceparent", b"tracestate"):
            wanted[name.decode()] = value.decode("latin-1")
    return carrier_of(wanted)


@functools.cache
def _propagator() -> Any:
    """The W3C Trace Context propagator (one per process: it holds no state)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def parent_context(trace_context: object, current: Context | None = None) -> Context:
    """The OTel context a call's span starts under: the current one when ``trace_context`` is
    None, the context itself when it is one (``captured``), else the parent a W3C carrier
    names (an empty or malformed one: a new trace) — unless the current span is of the
    carrier's trace already: a server library that continued it (FastAPI's, the MCP SDK's
    request span) is then the parent, below the caller's span. ``current``: the context that
    was current when the call arrived (default: the current one now)."""
    otel_context = context_api()
    if current is None:
        current = otel_context.get_current()
    if trace_context is None:
        return current
    otel_trace, empty = api(), otel_context.Context
    if isinstance(trace_context, empty):
        given: Context = trace_context
        return given
    carrier = carrier_of(trace_context) if isinstance(trace_context, Mapping) else {}
    extracted = _extracted(carrier, empty)
    inside = otel_trace.get_current_span(current).get_span_context()
    if not inside.is_valid:  # a worker's thread, a server without a library's request span
        return extracted
    named = otel_trace.get_current_span(extracted).get_span_context()
    if named.is_valid and inside.trace_id == named.trace_id:
        return current
    return extracted


def _extracted(carrier: dict[str, str], empty: type[Context]) -> Context:
    """The context ``carrier`` names, as the W3C propagator reads it. The form toolhub's own
    dispatcher writes (version 00, no ``tracestate``: every worker's message) is read here, a
    match and two ints; any other goes through the propagator, whose checks and objects cost
    more than the span context itself."""
    value = carrier.get(TRACEPARENT)
    plain = PLAIN_TRACEPARENT.fullmatch(value) if value and TRACESTATE not in carrier else None
    if plain is None:
        extracted: Context = _propagator().extract(carrier, context=empty())
        return extracted
    trace_id, span_id = int(plain[1], 16), int(plain[2], 16)
    if not (trace_id and span_id):
        return empty()
    otel_trace = api()
    flags = _FLAGS.get(plain[3])
    if flags is None:
        flags = _FLAGS[plain[3]] = otel_trace.TraceFlags(int(plain[3], 16))
    remote = otel_trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)
    named: Context = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote), empty())
    return named


def captured() -> Context | None:
    """The current OTel context, to hand to a call made on another thread (a session's sync
    twins run their calls on its loop thread); None without the API."""
    if not available():
        return None
    from opentelemetry import context as otel_context

    return otel_context.get_current()


def inject(context: Context | None = None) -> dict[str, str]:
    """The W3C carrier of ``context`` (default: the current one); empty when it has no valid
    span. Formatted here as the propagator would (``traceparent`` version 00): this runs once
    per call, and the propagator's setter and checks cost more than the string (and a valid
    id's bytes in hex cost half what formatting the int with a width does)."""
    found = api().get_current_span(context).get_span_context()
    if not found.is_valid:
        return {}
    trace_id, span_id = found.trace_id.to_bytes(16, "big"), found.span_id.to_bytes(8, "big")
    carrier = {TRACEPARENT: f"00-{trace_id.hex()}-{span_id.hex()}-{_HEX[found.trace_flags & 0xFF]}"}
    if found.trace_state:
        carrier[TRACESTATE] = found.trace_state.to_header()
    return carrier


def command_env() -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE``) naming the current span, for a command's
    environment, so a traced program inside it joins the call's trace; empty when tracing is
    off or no span is current."""
    if tracer() is None:
        return {}
    return {name.upper(): value for name, value in inject().items()}
