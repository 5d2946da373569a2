"""The caller's span of one call: ``execute_tool {tool}``, as the GenAI conventions name it.

``Session`` opens one per call when tracing is on (``start_call`` answers None when it is
off, and the session takes its untraced path unchanged). The span's parent is the caller's:
the current OTel context (an agent framework's span when the framework uses OpenTelemetry),
or the W3C carrier the caller passed (the gateway's ``traceparent`` header, MCP's
``_meta.traceparent``). Its children here are the validation and, for a distributed call,
the enqueue; the worker's spans join it through the Celery message's headers
(``worker.py``). The span ends with the result: ``error.type`` is toolhub's error kind, and
its duration is recorded as ``gen_ai.execute_tool.duration``.

Contexts are attached only around code that does not yield: an async generator's frame may be
resumed by another task, where a context attached before its ``yield`` would leak out.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from toolhub.core import CallResult, Progress

from . import attributes as attr
from .carriers import parent_context
from .metrics import TOOL_DURATION, record
from .state import PHASES, api, context_api, tracer

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

T = TypeVar("T")


def session_attributes(session_id: str, tenant: str) -> dict[str, str]:
    """The attributes every call of a session has (its id, its tenant): made once a session."""
    return {attr.SESSION: session_id, attr.TENANT: tenant}


def start_call(name: str, session: dict[str, str], trace_context: object) -> CallSpan | None:
    """The span of a call of tool ``name`` (its client name) in the session whose attributes
    are ``session`` (``session_attributes``), or None when tracing is off."""
    found = tracer()
    if found is None:
        return None
    return CallSpan(found, name, session, parent_context(trace_context))


class CallSpan:
    """One call's ``execute_tool`` span, from before validation to its result.

    Without phase spans the span is made once ``prepare`` has run, dated back to the call's
    start and given every attribute at once: a span's attributes cost the SDK more than the
    span itself, and each separate setting of them costs again (docs/benchmarks.md)."""

    __slots__ = (
        "attributes", "context", "ended", "name", "parent", "session", "span", "started",
        "started_ns", "tracer",
    )  # fmt: skip

    def __init__(self, tracer: Tracer, name: str, session: dict[str, str], parent: Context) -> None:
        self.tracer = tracer
        self.started = time.perf_counter()
        self.started_ns = time.time_ns()
        self.name = name
        self.parent = parent
        #: the span's attributes that the duration metric has too
        self.attributes: dict[str, Any] = {
            attr.OPERATION: attr.EXECUTE_TOOL,
            attr.TOOL_NAME: name,
            attr.TOOL_TYPE: attr.FUNCTION,
        }
        self.session = session
        self.span: Span | None = None
        self.ended = False
        if PHASES:
            self._start({})

    def _start(self, found: dict[str, Any]) -> Span:
        trace = api()
        self.span = span = self.tracer.start_span(
            f"{attr.EXECUTE_TOOL} {self.name}",
            context=self.parent,
            kind=trace.SpanKind.INTERNAL,
            attributes={**self.attributes, **self.session, **found},
            start_time=self.started_ns,
        )
        self.context: Context = trace.set_span_in_context(span, self.parent)
        return span

    def prepare(self, prepare: Callable[[], T]) -> T:
        """``prepare()`` (lookup, remapping, validation) in the ``toolhub.validate`` span; a
        refused call's result ends the call's span."""
        try:
            if PHASES:
                with self.tracer.start_as_current_span("toolhub.validate", context=self.context):
                    prepared = prepare()
            else:
                prepared = prepare()
        except BaseException as exc:
            self.fail(exc)
            raise
        entry, ctx = getattr(prepared, "entry", None), getattr(prepared, "ctx", None)
        found: dict[str, Any] = {}
        if entry is not None and ctx is not None:
            if entry.external:
                self.attributes[attr.TOOL_TYPE] = attr.EXTENSION
            found = {
                attr.TOOL_CALL_ID: ctx.call_id,
                attr.TOOL_ID: entry.fq_id,
                attr.TOOL_TYPE: self.attributes[attr.TOOL_TYPE],
            }
        if self.span is None:
            self._start(found)
        elif found:
            self.span.set_attributes(found)
        if isinstance(prepared, CallResult):
            self.end(prepared)
        return prepared

    def run(self, work: Callable[[], T]) -> T:
        """``work()`` with this span current (a sync call)."""
        otel_context = context_api()
        token = otel_context.attach(self.context)
        try:
            outcome = work()
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:
            otel_context.detach(token)
        if isinstance(outcome, CallResult):
            self.end(outcome)
        return outcome

    async def result(self, waiting: Awaitable[CallResult]) -> CallResult:
        """The call's result, awaited with this span current; the span ends with it."""
        otel_context = context_api()
        token = otel_context.attach(self.context)
        try:
            result = await waiting
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:
            otel_context.detach(token)
        self.end(result)
        return result

    async def stream(
        self, items: AsyncIterator[Progress | CallResult]
    ) -> AsyncIterator[Progress | CallResult]:
        """``items``, each step taken with this span current; the span ends at the result,
        or as ``cancelled`` when the consumer leaves before it. Closing this closes ``items``
        (a connected call's stream cancels the call when left early)."""
        otel_context = context_api()
        try:
            while True:
                token = otel_context.attach(self.context)
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    return
                finally:
                    otel_context.detach(token)
                if isinstance(item, CallResult):
                    self.end(item)
                yield item
        finally:
            try:
                await closing_of(items)
            finally:
                if not self.ended:
                    self._close("cancelled")

    def end(self, result: CallResult) -> None:
        kind = attr.error_type(result)
        if kind is not None and not self.ended:
            span = self.span or self._start({})
            span.set_status(api().Status(api().StatusCode.ERROR, kind))
        self._close(kind)

    def fail(self, exc: BaseException) -> None:
        """The call's awaiting raised (it was cancelled, or the executor failed)."""
        self._close("cancelled" if _is_cancel(exc) else type(exc).__qualname__)

    def _close(self, kind: str | None) -> None:
        if self.ended:
            return
        self.ended = True
        span = self.span or self._start({})
        attributes = self.attributes  # not changed once the span has ended
        if kind is not None:
            attributes = {**attributes, attr.ERROR_TYPE: kind}
            span.set_attribute(attr.ERROR_TYPE, kind)
        span.end()
        record(TOOL_DURATION, time.perf_counter() - self.started, attributes)


async def closing_of(items: AsyncIterator[Progress | CallResult]) -> None:
    close = getattr(items, "aclose", None)
    if close is not None:
        await close()


def _is_cancel(exc: BaseException) -> bool:
    import asyncio

    return isinstance(exc, asyncio.CancelledError | GeneratorExit)
