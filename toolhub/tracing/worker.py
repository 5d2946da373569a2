"""The worker's side of a call's trace: one span per delivered message, continuing the caller's
trace from the Celery message's headers.

The dispatcher puts the current W3C context (the caller's ``execute_tool`` span; its
``toolhub.enqueue`` span with phase spans) and the enqueue time into the message's headers
(``message_headers``); the worker opens ``toolhub.worker {tool}`` under it (``delivered``;
by default made when the run first needs it, else once the reply is published, dated back to
the delivery: ``WorkerCall``). By default that is the
worker's only span (a command's start adds ``toolhub.sandbox_start``): the queue wait is its
attribute ``toolhub.call.queue_wait`` (seconds), the claim's answer and the attempt its
attributes too, and a command started in the run gets its ``TRACEPARENT``
(``carriers.command_env``). Under
``TOOLHUB_TRACE_PHASES=1`` (``state.PHASES``) the phases are child spans instead:
``toolhub.queue_wait`` (enqueue to claim), ``toolhub.claim``, ``toolhub.run`` (the command's
``TRACEPARENT`` then names it) and ``toolhub.deliver``. A re-run after a lost worker is named
``toolhub.rerun {tool}``, the resume of a remote task ``toolhub.resume {tool}``; the attempt is
an attribute. Progress items become span events, their kind only (payloads may hold secrets),
at most ``MAX_PROGRESS_EVENTS`` per attempt; the rest are counted.

The enqueue time comes from the dispatcher's clock: across hosts, queue wait carries their
skew. Headers are not covered by the message's fleet signature: a forged one can only
mis-parent or mis-time a span.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from toolhub.core import Progress

from . import attributes as attr
from .carriers import TRACEPARENT, TRACESTATE, inject, parent_context
from .metrics import QUEUE_WAIT, SANDBOX_START, record
from .state import PHASES, api, context_api, tracer

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

C = TypeVar("C")

#: The Celery header with the dispatcher's enqueue time (ns since the epoch).
ENQUEUED = "toolhub_enqueued_ns"
#: Progress items recorded as events of one attempt's span; later ones are only counted.
MAX_PROGRESS_EVENTS = 32
#: The name of a progress item's event.
PROGRESS_EVENT = "toolhub.progress"

_NO_SPAN = contextlib.nullcontext()
_live: dict[str, WorkerCall] = {}
_live_lock = threading.Lock()
_deferred: Callable[[Callable[[], Span]], Span] | None = None


def message_headers() -> dict[str, Any] | None:
    """The Celery headers that carry the current trace to the worker, or None when off."""
    if tracer() is None:
        return None
    carrier: dict[str, Any] = inject()
    if not carrier:
        return None
    carrier[ENQUEUED] = time.time_ns()
    return carrier


def headers_json(headers: Mapping[str, Any]) -> str:
    """``message_headers``' answer as JSON (the record keeps it for a message built later),
    written directly: the JSON encoder costs more than reading the trace context did. Only a
    ``tracestate`` needs escaping; the ``traceparent`` toolhub writes is hex and dashes."""
    text = f'{{"{TRACEPARENT}": "{headers[TRACEPARENT]}", "{ENQUEUED}": {headers[ENQUEUED]:d}'
    state = headers.get(TRACESTATE)
    return text + (f', "{TRACESTATE}": {json.dumps(state)}}}' if state is not None else "}")


def span(name: str, *, producer: bool = False) -> contextlib.AbstractContextManager[Any]:
    """A child span of the current one, current while the block runs (a no-op when off).
    ``producer``: the span sends a message (its context goes in the message's headers). A
    phase's span: none under ``TOOLHUB_TRACE_PHASES=0``."""
    found = tracer()
    if found is None or not PHASES:
        return _NO_SPAN
    kind = api().SpanKind.PRODUCER if producer else api().SpanKind.INTERNAL
    return found.start_as_current_span(name, kind=kind)


def delivered(request: Any, message: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """The worker's span of one delivered message (Celery's ``task.request`` carries the
    message's headers as attributes), current from its claim until the message is handled."""
    found = tracer()
    if found is None:
        return _NO_SPAN
    return WorkerCall(found, request, message)


def claim(call_id: str, take: Callable[[], C]) -> C:
    """``take()`` (the claim script) in the ``toolhub.claim`` span, after the call's queue wait
    is recorded; the claim's attempt names the attempt's span."""
    call = _live.get(call_id)
    return take() if call is None else call.claim(take)


def phase(call_id: str, name: str) -> contextlib.AbstractContextManager[Any]:
    """A phase of a call running here (``toolhub.run``, ``toolhub.deliver``): under
    ``TOOLHUB_TRACE_PHASES=1`` a child span of its worker span, current while the block runs
    (a command started in ``toolhub.run`` names it); nothing by default (an event costs the
    SDK nearly what an attribute does, and the worker span's end is the delivery's)."""
    if not PHASES:
        return _NO_SPAN
    call = _live.get(call_id) if _live else None
    if call is None:
        return _NO_SPAN
    return call.tracer.start_as_current_span(name)


def running(call_id: str) -> contextlib.AbstractContextManager[Any]:
    """The tool's run: ``phase(call_id, "toolhub.run")``."""
    return phase(call_id, "toolhub.run")


def command_start() -> contextlib.AbstractContextManager[Any]:
    """Starting a command (its cgroup, sandbox and process), in the ``toolhub.sandbox_start``
    span, its duration recorded as ``toolhub.command.start.duration``."""
    found = tracer()
    if found is None:
        return _NO_SPAN
    return _command_start(found)


@contextlib.contextmanager
def _command_start(tracer: Tracer) -> Iterator[None]:
    started = time.perf_counter()
    with tracer.start_as_current_span("toolhub.sandbox_start"):
        yield
    record(SANDBOX_START, time.perf_counter() - started, {})


def progress(call_id: str, item: Progress) -> None:
    """A progress item of a call running here: an event of its attempt's span (bounded)."""
    if not _live:
        return
    call = _live.get(call_id)
    if call is not None:
        call.progress(item)


class WorkerCall:
    """The spans of one delivered message; current, and found by its call id, while it is
    handled (a context manager).

    Without phase spans the span is recorded, not made, while the call runs: the delivery
    time, the claim's attributes, the span's name, progress events with their times. A
    ``DeferredSpan`` stands for it in the OTel context from the claim on, and whatever needs
    the span's context during the run (a command's start, a task message, an instrumented
    library's span) makes it then (``made``); otherwise it is made as the message's handling
    ends, after the reply is published: off the call's path. Made when it may, the span is
    the same: dated back to the delivery, with its name, every attribute and event at once (as
    the caller's is, ``calls.py``: the SDK's attribute handling costs more than the span, and
    each separate setting of them, or of its name, costs again). A message refused before its
    claim gets it as it ends.

    Of the call's attributes, the worker's span has the call id when it is under the caller's
    span, which has the others; one that starts a trace (its dispatcher did not trace) has
    them all."""

    def __init__(self, tracer: Tracer, request: Any, message: Mapping[str, Any]) -> None:
        self.started_ns = time.time_ns()
        self.tracer = tracer
        self.message = message
        self.call_id = str(message.get("call_id", ""))
        self.tool = str(message.get("tool") or message.get("name") or "?")
        self.name = f"toolhub.worker {self.tool}"
        enqueued = getattr(request, ENQUEUED, None)
        self.enqueued_ns = enqueued if isinstance(enqueued, int) and enqueued > 0 else None
        self.carrier = {
            TRACEPARENT: getattr(request, TRACEPARENT, None),
            TRACESTATE: getattr(request, TRACESTATE, None),
        }
        #: the context current before the span (at the claim; the delivery's own before it)
        self.arrived: Context | None = None
        #: the attributes of the claim (its answer, the attempt, the queue wait)
        self.found: dict[str, Any] = {}
        self.queue_wait: float | None = None
        self.span: Span | None = None
        self.context: Context | None = None
        self.events = 0
        self.dropped = 0
        #: progress events (kind, time) recorded before the span is made
        self.pending: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._token: object = None
        if PHASES:
            self._attach(self.made())

    def made(self) -> Span:
        """The span, made now if it is not yet (once: a progress event may come from another
        thread)."""
        span = self.span
        if span is not None:
            return span
        with self._lock:
            if self.span is None:
                self.span = self._make()
            return self.span

    def _make(self) -> Span:
        trace = api()
        parent = parent_context(self.carrier, self.arrived)  # which takes what is in bounds
        attributes: dict[str, Any] = {attr.TOOL_CALL_ID: self.call_id}
        if not trace.get_current_span(parent).get_span_context().is_valid:
            message = self.message
            attributes[attr.TOOL_NAME] = str(message.get("name", ""))
            attributes[attr.TOOL_ID] = self.tool
            attributes[attr.SESSION] = str(message.get("session_id", ""))
        attributes.update(self.found)
        span: Span = self.tracer.start_span(
            self.name,
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
            start_time=self.started_ns,
        )
        for kind, at in self.pending:
            span.add_event(PROGRESS_EVENT, {attr.PROGRESS_KIND: kind}, timestamp=at)
        self.pending.clear()
        return span

    def _attach(self, span: Span) -> None:
        """``span`` current from now until the message is handled."""
        otel_context = context_api()
        self.arrived = otel_context.get_current()
        self.context = api().set_span_in_context(span, self.arrived)
        self._token = otel_context.attach(self.context)

    def __enter__(self) -> WorkerCall:
        with _live_lock:
            _live[self.call_id] = self
        return self

    def __exit__(self, *exc: object) -> None:
        with _live_lock:
            if _live.get(self.call_id) is self:
                del _live[self.call_id]
        if self._token is not None:
            context_api().detach(self._token)
        self.context = None  # the deferred span's way back here: no cycle left to collect
        with self._lock:
            earlier = self.span
            if earlier is None and self.dropped:
                self.found[attr.PROGRESS_DROPPED] = self.dropped
        if earlier is not None and self.dropped:
            earlier.set_attribute(attr.PROGRESS_DROPPED, self.dropped)
        (earlier or self.made()).end()
        if self.queue_wait is not None:
            record(QUEUE_WAIT, self.queue_wait, {attr.TOOL_ID: self.tool})

    def claim(self, take: Callable[[], C]) -> C:
        now = time.time_ns()
        found: dict[str, Any] = {}
        if self.enqueued_ns is not None and self.enqueued_ns <= now:
            self.queue_wait = (now - self.enqueued_ns) / 1e9
            if PHASES:
                waited = self.tracer.start_span(
                    "toolhub.queue_wait", context=self.context, start_time=self.enqueued_ns
                )
                waited.end(end_time=now)
            else:
                found[attr.QUEUE_WAIT] = self.queue_wait
        claimed = self.tracer.start_span("toolhub.claim", context=self.context) if PHASES else None
        try:
            taken = take()
            action = getattr(taken, "action", None)
            found[attr.CLAIM] = str(getattr(action, "value", action))
            if claimed is not None:
                claimed.set_attribute(attr.CLAIM, found.pop(attr.CLAIM))
        finally:
            if claimed is not None:
                claimed.end()
        attempt = getattr(taken, "attempt", None)
        if isinstance(attempt, int):
            found[attr.ATTEMPT] = attempt
        if getattr(taken, "resumed", False):
            self.name = f"toolhub.resume {self.tool}"
        elif getattr(taken, "lost", 0):
            self.name = f"toolhub.rerun {self.tool}"
        if self.span is None:  # without phase spans: recorded for the span, made when needed
            self.found.update(found)
            self._attach(deferred_span(self.made))
        else:
            self.span.set_attributes(found)
            if not self.name.startswith("toolhub.worker "):
                self.span.update_name(self.name)
        return taken

    def progress(self, item: Progress) -> None:
        kind = item.kind if item.kind != "custom" else f"custom:{str(item.subkind)[:64]}"
        with self._lock:
            if self.events >= MAX_PROGRESS_EVENTS:
                self.dropped += 1
                return
            self.events += 1
            span = self.span
            if span is None:
                self.pending.append((kind, time.time_ns()))
                return
        span.add_event(PROGRESS_EVENT, {attr.PROGRESS_KIND: kind})


def deferred_span(make: Callable[[], Span]) -> Span:
    """A ``DeferredSpan`` (its module imports the OpenTelemetry API: imported on first use)."""
    global _deferred
    if _deferred is None:
        from .deferred import DeferredSpan

        _deferred = DeferredSpan
    return _deferred(make)
