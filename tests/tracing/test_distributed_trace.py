"""One trace from the caller to the command, read back from a real OTLP/HTTP receiver.

A private stack (redis-server and a ``toolhub worker``), a ``toolhub serve`` gateway and a
``toolhub mcp`` server, each a real process exporting with the real OTLP/HTTP exporter,
configured by nothing but the standard ``OTEL_*`` variables. A call made with a W3C
``traceparent`` (the gateway's header, MCP's ``_meta``) comes back as one trace: the caller's
``execute_tool`` span with the GenAI attributes under the given parent, the worker's spans
continuing it through the Celery message's headers, and the command's ``TRACEPARENT`` naming
the worker's ``toolhub.run`` span. A malformed ``traceparent`` only starts a new trace."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, use_span

from tests.fixtures_stack import REPO, TOOLHUB, Stack
from tests.http_process import serving
from tests.mcp.task_client import discover
from tests.tracing.in_process import spans_of
from tests.tracing.otlp_receiver import Receiver, Span
from toolhub.ports import free_port

pytestmark = pytest.mark.timeout(180)

COMMAND = {"command": "echo tp=$TRACEPARENT", "description": "trace"}
WORKER_SPANS = {
    "toolhub.queue_wait",
    "toolhub.claim",
    "toolhub.run",
    "toolhub.sandbox_start",
    "toolhub.deliver",
}


def otel_env(receiver: Receiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


@pytest.fixture(scope="module")
def stack(receiver: Receiver) -> Iterator[Stack]:
    started = Stack(workers=1, env=otel_env(receiver)).start()
    yield started
    started.stop()


def in_process_spans(trace_id: str) -> list[ReadableSpan]:
    """This process's own finished spans of the trace, when it has the tests' provider."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        return []
    return spans_of(int(trace_id, 16))


def remote_parent(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
    )


def new_parent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def one_trace(receiver: Receiver, trace_id: str, caller: str) -> dict[str, Span]:
    """The trace's spans by name, once the caller's and the worker's have all arrived."""

    def complete() -> bool:
        names = {s.name for s in receiver.trace(trace_id)}
        return {"execute_tool bash", *WORKER_SPANS} <= names

    receiver.wait_for(complete, what=f"trace {trace_id}")
    spans = {s.name: s for s in receiver.trace(trace_id)}
    assert spans["execute_tool bash"].service == caller
    return spans


def reaches(receiver: Receiver, span: Span, parent_id: str) -> bool:
    """Whether ``span``'s ancestors lead to the caller's span ``parent_id``: directly, through
    a server library's request span (FastAPI and the MCP SDK trace too), or through the MCP
    client's own span in this process when this process has a tracer provider."""
    by_id = {s.span_id: s for s in receiver.trace(span.trace_id)}
    here = {f"{s.context.span_id:016x}": s for s in in_process_spans(span.trace_id)}
    current = span.parent_id
    while current != parent_id:
        if current in by_id:
            current = by_id[current].parent_id
        elif current in here and here[current].parent is not None:
            current = f"{here[current].parent.span_id:016x}"
        else:
            return False
    return True


def check_trace(receiver: Receiver, spans: dict[str, Span], parent_id: str, text: str) -> None:
    call = spans["execute_tool bash"]
    assert reaches(receiver, call, parent_id), call
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.name"] == "bash"
    assert call.attributes["gen_ai.tool.type"] == "function"
    assert call.attributes["gen_ai.tool.call.id"]
    assert call.attributes["toolhub.tool.id"].endswith("bash")
    assert "error.type" not in call.attributes
    assert spans["toolhub.validate"].parent_id == call.span_id
    enqueue = spans["toolhub.enqueue"]
    assert enqueue.parent_id == call.span_id
    (worker,) = [s for s in spans.values() if s.name.startswith("toolhub.worker ")]
    assert worker.service == "toolhub-worker"
    assert worker.parent_id == enqueue.span_id  # continued from the Celery headers
    assert worker.attributes["toolhub.call.attempt"] == 1
    for name in ("toolhub.queue_wait", "toolhub.claim", "toolhub.run", "toolhub.deliver"):
        assert spans[name].parent_id == worker.span_id, name
    run = spans["toolhub.run"]
    assert spans["toolhub.sandbox_start"].parent_id == run.span_id
    # The command's own environment names the run's span: a traced program joins the trace.
    traceparent = text.split("tp=", 1)[1].split()[0]
    assert traceparent == f"00-{call.trace_id}-{run.span_id}-01"


def test_a_gateway_call_is_one_trace_to_the_command(
    receiver: Receiver, stack: Stack, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        **otel_env(receiver),
        "TOOLHUB_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
    }
    argv = [
        TOOLHUB,
        "serve",
        "--port",
        str(port),
        "--workspace",
        str(tmp_path),
        "--redis",
        stack.url,
    ]
    url = f"http://127.0.0.1:{port}"
    with serving(argv, f"{url}/healthz", env=env), httpx.Client(base_url=url, timeout=60) as http:
        sid = http.post("/v1/sessions", json={}).json()["session_id"]
        trace_id, parent_id, traceparent = new_parent()
        answer = http.post(
            f"/v1/sessions/{sid}/calls",
            json={"name": "bash", "arguments": COMMAND},
            headers={"traceparent": traceparent, "tracestate": "vendor=1"},
        )
        assert answer.status_code == 200, answer.text
        text = answer.json()["prompt_text"]
        check_trace(receiver, one_trace(receiver, trace_id, "toolhub-gateway"), parent_id, text)

        # Hostile: a malformed traceparent is ignored; the call runs in a trace of its own.
        bad = http.post(
            f"/v1/sessions/{sid}/calls",
            json={"name": "bash", "arguments": COMMAND},
            headers={"traceparent": "00-zz-" + "x" * 300},
        )
        assert bad.status_code == 200 and bad.json()["error"] is None, bad.text
        own = bad.json()["prompt_text"].split("tp=", 1)[1].split()[0]
        assert own.startswith("00-") and own.split("-")[1] != trace_id
    receiver.wait_for(
        lambda: (
            {"gen_ai.execute_tool.duration", "toolhub.call.queue_wait.duration"} <= receiver.metrics
        ),
        what="metrics",
    )


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_an_mcp_call_with_meta_traceparent_is_one_trace(
    receiver: Receiver, stack: Stack, tmp_path: Path, era: str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")},
        **otel_env(receiver),
        "TOOLHUB_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
    }
    params = StdioServerParameters(
        command=TOOLHUB,
        args=["mcp", "--workspace", str(tmp_path), "--redis", stack.url],
        cwd=REPO,
        env=env,
    )
    trace_id, parent_id, traceparent = new_parent()

    async def call() -> str:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            if era == "handshake":
                await session.initialize()
            else:
                await discover(session)
            # An MCP client library that traces (this process may have a provider: the
            # in-process tests') puts its own current context in ``_meta``: the caller's span is
            # made current too, so either way the call is of the caller's trace.
            with use_span(NonRecordingSpan(remote_parent(trace_id, parent_id))):
                result = await session.call_tool(
                    "bash",
                    COMMAND,
                    meta={"traceparent": traceparent},  # type: ignore[typeddict-unknown-key]
                )
            return "".join(getattr(block, "text", "") for block in result.content)

    text = asyncio.run(call())
    check_trace(receiver, one_trace(receiver, trace_id, "toolhub-mcp"), parent_id, text)
