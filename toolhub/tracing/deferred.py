"""A span that the SDK makes only when something first needs it (``worker.py``).

The worker's span is current while its call runs, but on a plain call nothing reads it: the
tool's run needs its context only to start a command (``toolhub.sandbox_start``, the
command's ``TRACEPARENT``), to send a task message (a background command), or when an
instrumented library makes a span of its own. ``DeferredSpan`` stands in the OTel context for
the span until then: whatever asks it anything (its context, whether it records, a new
attribute) makes the real one first, through ``make``, and is answered by it. ``make`` is
the worker call's (``WorkerCall.made``), which dates the span back and gives it everything
recorded so far, so the span is the same whenever it is made; a call that never needed it
has it made once its reply is published, off the call's path.

Only the OpenTelemetry API's public ``Span`` interface is implemented here; the module is
imported only when tracing is on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from opentelemetry.trace import Span, SpanContext, Status, StatusCode
from opentelemetry.util import types


class DeferredSpan(Span):
    """The stand-in of a span not made yet; every method makes it (``make``) and forwards."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Span]) -> None:
        self.make = make

    def get_span_context(self) -> SpanContext:
        return self.make().get_span_context()

    def is_recording(self) -> bool:
        return self.make().is_recording()

    def end(self, end_time: int | None = None) -> None:
        self.make().end(end_time)

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        self.make().set_attributes(attributes)

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        self.make().set_attribute(key, value)

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        self.make().add_event(name, attributes, timestamp)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        self.make().add_link(context, attributes)

    def update_name(self, name: str) -> None:
        self.make().update_name(name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self.make().set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        self.make().record_exception(exception, attributes, timestamp, escaped)
