"""The worker's side of a call's trace: one span per delivered message, continuing the caller's
trace from the Celery message's headers, and its children.

The dispatcher puts the current W3C context (its ``toolhub.enqueue`` span, or the caller's
``execute_tool`` span without phase spans) and the enqueue time into the message's headers
(``message_headers``); the worker opens ``toolhub.worker {tool}`` under it (``delivered``),
with ``toolhub.queue_wait`` (enqueue to claim), ``toolhub.claim``, ``toolhub.run`` (the tool; a
command started in it gets the run's ``TRACEPARENT``, ``carriers.command_env``) and
``toolhub.deliver`` (the result written and published) as children; only the run's under
``TOOLHUB_TRACE_PHASES=0`` (``state.PHASES``). A re-run after a lost worker is named
``toolhub.rerun {tool}``, the resume of a remote task ``toolhub.resume {tool}``; the attempt is
an attribute. Progress items become span events, their kind only (payloads may hold secrets),
at most ``MAX_PROGRESS_EVENTS`` per attempt; the rest are counted.

The enqueue time comes from the dispatcher's clock: across hosts, queue wait carries their
skew. Headers are not covered by the message's fleet signature: a forged one can only
mis-parent or mis-time a span.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from toolhub.core import Progress

from . import attributes as attr
from .carriers import carrier_of, inject, parent_context
from .metrics import QUEUE_WAIT, SANDBOX_START, record
from .state import PHASES, api, tracer

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

C = TypeVar("C")

#: The Celery header with the dispatcher's enqueue time (ns since the epoch).
ENQUEUED = "toolhub_enqueued_ns"
#: Progress items recorded as events of one attempt's span; later ones are only counted.
MAX_PROGRESS_EVENTS = 32

_NO_SPAN = contextlib.nullcontext()
_live: dict[str, WorkerCall] = {}
_live_lock = threading.Lock()


def message_headers() -> dict[str, Any] | None:
    """The Celery headers that carry the current trace to the worker, or None when off."""
    if tracer() is None:
        return None
    carrier: dict[str, Any] = inject()
    if not carrier:
        return None
    carrier[ENQUEUED] = time.time_ns()
    return carrier


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
    message's headers as attributes), current while it is handled."""
    found = tracer()
    if found is None:
        return _NO_SPAN
    headers = {
        name: getattr(request, name, None) for name in ("traceparent", "tracestate", ENQUEUED)
    }
    return _delivered(found, headers, message)


@contextlib.contextmanager
def _delivered(
    tracer: Tracer, headers: dict[str, Any], message: Mapping[str, Any]
) -> Iterator[Any]:
    from opentelemetry import context as otel_context

    call = WorkerCall(tracer, headers, message)
    token = otel_context.attach(call.context)
    with _live_lock:
        _live[call.call_id] = call
    try:
        yield call
    finally:
        with _live_lock:
            if _live.get(call.call_id) is call:
                del _live[call.call_id]
        otel_context.detach(token)
        call.end()


def claim(call_id: str, take: Callable[[], C]) -> C:
    """``take()`` (the claim script) in the ``toolhub.claim`` span, after the call's queue wait
    is recorded; the claim's attempt names the attempt's span."""
    call = _live.get(call_id)
    return take() if call is None else call.claim(take)


@contextlib.contextmanager
def running(call_id: str) -> Iterator[None]:
    """The tool's run, in the ``toolhub.run`` span."""
    found = tracer()
    if found is None or call_id not in _live:
        yield
        return
    with found.start_as_current_span("toolhub.run"):
        yield


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
    """The spans of one delivered message."""

    def __init__(self, tracer: Tracer, headers: dict[str, Any], message: Mapping[str, Any]) -> None:
        trace = api()
        self.tracer = tracer
        self.call_id = str(message.get("call_id", ""))
        self.tool = str(message.get("tool") or message.get("name") or "?")
        enqueued = headers.pop(ENQUEUED, None)
        self.enqueued_ns = enqueued if isinstance(enqueued, int) and enqueued > 0 else None
        self.span: Span = tracer.start_span(
            f"toolhub.worker {self.tool}",
            context=parent_context(carrier_of(headers)),
            kind=trace.SpanKind.CONSUMER,
            attributes={
                attr.TOOL_NAME: str(message.get("name", "")),
                attr.TOOL_ID: self.tool,
                attr.TOOL_CALL_ID: self.call_id,
                attr.SESSION: str(message.get("session_id", "")),
            },
        )
        self.context = trace.set_span_in_context(self.span)
        self.events = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def claim(self, take: Callable[[], C]) -> C:
        now = time.time_ns()
        if self.enqueued_ns is not None and self.enqueued_ns <= now:
            if PHASES:
                waited = self.tracer.start_span(
                    "toolhub.queue_wait", context=self.context, start_time=self.enqueued_ns
                )
                waited.end(end_time=now)
            record(QUEUE_WAIT, (now - self.enqueued_ns) / 1e9, {attr.TOOL_ID: self.tool})
        claimed = self.tracer.start_span("toolhub.claim", context=self.context) if PHASES else None
        try:
            taken = take()
            action = getattr(taken, "action", None)
            (claimed or self.span).set_attribute(attr.CLAIM, str(getattr(action, "value", action)))
        finally:
            if claimed is not None:
                claimed.end()
        attempt = getattr(taken, "attempt", None)
        if isinstance(attempt, int):
            self.span.set_attribute(attr.ATTEMPT, attempt)
        if getattr(taken, "resumed", False):
            self.span.update_name(f"toolhub.resume {self.tool}")
        elif getattr(taken, "lost", 0):
            self.span.update_name(f"toolhub.rerun {self.tool}")
        return taken

    def progress(self, item: Progress) -> None:
        with self._lock:
            if self.events >= MAX_PROGRESS_EVENTS:
                self.dropped += 1
                return
            self.events += 1
        kind = item.kind if item.kind != "custom" else f"custom:{str(item.subkind)[:64]}"
        self.span.add_event("toolhub.progress", {attr.PROGRESS_KIND: kind})

    def end(self) -> None:
        if self.dropped:
            self.span.set_attribute(attr.PROGRESS_DROPPED, self.dropped)
        self.span.end()
