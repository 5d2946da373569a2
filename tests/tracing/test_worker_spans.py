"""The worker's span of a delivered message, in-process with the real SDK: by default one span
whose phases are its attributes, under ``TOOLHUB_TRACE_PHASES=1`` a child span per
phase; an attempt after a lost worker is named ``toolhub.rerun``, one resuming a remote task
``toolhub.resume``; a command started in the run gets the span's ``TRACEPARENT``."""

from __future__ import annotations

import secrets
import time
from types import SimpleNamespace

import pytest

from tests.tracing.in_process import exporter, spans_of
from toolhub.core import Progress
from toolhub.distributed.script_replies import ClaimAction
from toolhub.tracing import command_env
from toolhub.tracing import worker as tracing


def deliver(claim: SimpleNamespace, *, traced: bool = True) -> tuple[int, str]:
    """One message's handling as a worker does it; its trace id and the run's TRACEPARENT.
    ``traced``: the message has its caller's context (else the worker's span starts a trace)."""
    exporter()
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    request = SimpleNamespace(
        traceparent=f"00-{trace_id}-{parent}-01" if traced else None,
        tracestate=None,
        toolhub_enqueued_ns=time.time_ns() - 5_000_000,
    )
    call_id = f"c-{secrets.token_hex(4)}"
    message = {"call_id": call_id, "tool": "Main:bash", "name": "bash", "session_id": "s"}
    with tracing.delivered(request, message) as call:
        tracing.claim(call_id, lambda: claim)
        with tracing.running(call_id):
            env = command_env()
        with tracing.phase(call_id, "toolhub.deliver"):
            pass
    return call.span.get_span_context().trace_id, env["TRACEPARENT"]


def run_claim(**more: object) -> SimpleNamespace:
    """What a claim answers (``Claim``'s fields the worker span reads)."""
    return SimpleNamespace(
        **{"action": ClaimAction.RUN, "attempt": 1, "lost": 0, "resumed": False, **more}
    )


def test_one_span_per_attempt_with_its_phases_as_attributes() -> None:
    trace_id, traceparent = deliver(run_claim())
    (span,) = spans_of(trace_id)
    assert span.name == "toolhub.worker Main:bash"
    assert span.attributes["toolhub.claim.action"] == "run"
    assert span.attributes["toolhub.call.attempt"] == 1
    assert span.attributes["toolhub.call.queue_wait"] >= 0.004
    assert not span.events  # no phase events either: the span's end is the delivery's
    assert set(span.attributes) - {"toolhub.claim.action", "toolhub.call.attempt"} == {
        "toolhub.call.queue_wait",
        "gen_ai.tool.call.id",  # the call's other attributes are its parent's
    }
    assert span.start_time is not None and span.start_time <= time.time_ns()
    assert traceparent == f"00-{trace_id:032x}-{span.context.span_id:016x}-01"


def test_a_worker_span_that_starts_the_trace_has_the_call_s_attributes() -> None:
    trace_id, _ = deliver(run_claim(), traced=False)
    (span,) = spans_of(trace_id)
    assert span.parent is None
    assert span.attributes["gen_ai.tool.name"] == "bash"
    assert span.attributes["toolhub.tool.id"] == "Main:bash"
    assert span.attributes["toolhub.session.id"] == "s"
    assert span.attributes["gen_ai.tool.call.id"].startswith("c-")


def test_phase_spans_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "PHASES", True)
    trace_id, traceparent = deliver(run_claim())
    spans = {span.name: span for span in spans_of(trace_id)}
    worker = spans.pop("toolhub.worker Main:bash")
    assert set(spans) == {"toolhub.queue_wait", "toolhub.claim", "toolhub.run", "toolhub.deliver"}
    for span in spans.values():
        assert span.parent is not None and span.parent.span_id == worker.context.span_id
    assert spans["toolhub.claim"].attributes["toolhub.claim.action"] == "run"
    assert traceparent.split("-")[2] == f"{spans['toolhub.run'].context.span_id:016x}"


@pytest.mark.parametrize(
    ("claim", "name"),
    [
        (run_claim(attempt=2, lost=1), "toolhub.rerun Main:bash"),
        (run_claim(attempt=2, lost=1, resumed=True), "toolhub.resume Main:bash"),
    ],
)
def test_a_rerun_and_a_resume_are_named_so(claim: SimpleNamespace, name: str) -> None:
    trace_id, _ = deliver(claim)
    (span,) = spans_of(trace_id)
    assert span.name == name
    assert span.attributes["toolhub.call.attempt"] == 2


def test_the_span_is_made_when_the_run_first_needs_it_and_is_the_same() -> None:
    """Without phase spans the span is recorded while the call runs: nothing reads its context
    on a plain run, and it is made as the message's handling ends (after the reply), with the
    progress events of the run at their times; a command's start makes it then, and the
    command's ``TRACEPARENT`` names it."""
    exporter()
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    request = SimpleNamespace(
        traceparent=f"00-{trace_id}-{parent}-01", tracestate=None, toolhub_enqueued_ns=None
    )
    message = {"call_id": f"c-{secrets.token_hex(4)}", "tool": "Main:bash", "session_id": "s"}
    with tracing.delivered(request, message) as call:
        tracing.claim(message["call_id"], run_claim)
        before = time.time_ns()
        tracing.progress(message["call_id"], Progress("text", text="a line"))
        assert call.span is None  # recorded, not made
        env = command_env()  # a command's start: the span is made now
        assert call.span is not None
        tracing.progress(message["call_id"], Progress("text", text="another"))
    (span,) = spans_of(int(trace_id, 16))
    assert env["TRACEPARENT"] == f"00-{trace_id}-{span.context.span_id:016x}-01"
    assert span.parent is not None and f"{span.parent.span_id:016x}" == parent
    assert [event.timestamp >= before for event in span.events] == [True, True]
    assert span.start_time is not None and span.start_time < before


def test_a_span_nothing_needed_is_made_after_the_run() -> None:
    exporter()
    trace_id = secrets.token_hex(16)
    request = SimpleNamespace(traceparent=f"00-{trace_id}-{secrets.token_hex(8)}-01")
    message = {"call_id": f"c-{secrets.token_hex(4)}", "tool": "Main:noop", "session_id": "s"}
    with tracing.delivered(request, message) as call:
        tracing.claim(message["call_id"], run_claim)
        with tracing.running(message["call_id"]):
            pass
        assert call.span is None and spans_of(int(trace_id, 16)) == []
    (span,) = spans_of(int(trace_id, 16))
    assert span.name == "toolhub.worker Main:noop"
    assert span.attributes["toolhub.claim.action"] == "run"
